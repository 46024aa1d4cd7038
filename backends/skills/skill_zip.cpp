// Safe extraction of uploaded skill archives with libzip (§11.7).
#include "backends/skills/skill_zip.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <set>
#include <system_error>
#include <vector>

#include <zip.h>

#include "backends/linux/beneath.hpp"

namespace boxrt::skills {

std::string normpath(std::string_view path) {
  if (path.empty())
    return ".";
  size_t initial_slashes = 0;
  if (path.starts_with("/"))
    initial_slashes = path.starts_with("//") && !path.starts_with("///") ? 2 : 1;
  std::vector<std::string_view> comps;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t end = path.find('/', pos);
    if (end == std::string_view::npos)
      end = path.size();
    auto comp = path.substr(pos, end - pos);
    pos = end + 1;
    if (comp.empty() || comp == ".")
      continue;
    if (comp != ".." || (initial_slashes == 0 && comps.empty())
        || (!comps.empty() && comps.back() == ".."))
      comps.push_back(comp);
    else if (!comps.empty())
      comps.pop_back();
  }
  std::string out(initial_slashes, '/');
  for (size_t i = 0; i < comps.size(); ++i) {
    if (i > 0)
      out += '/';
    out += comps[i];
  }
  return out.empty() ? "." : out;
}

} // namespace boxrt::skills

namespace boxrt::skills::zip {

namespace {

box_error invalid(std::string text) {
  return make_box_error(ec::validation, std::move(text));
}

box_error not_a_zip() {
  return invalid("Uploaded file must be a valid .zip archive");
}

struct archive_closer {
  void operator()(zip_t* za) const noexcept { zip_discard(za); }
};
using archive_ptr = std::unique_ptr<zip_t, archive_closer>;

struct member_closer {
  void operator()(zip_file_t* zf) const noexcept { zip_fclose(zf); }
};
using member_ptr = std::unique_ptr<zip_file_t, member_closer>;

/// What the metadata pass learned about one member.
struct member {
  uint64_t index = 0;
  std::string name;        // as stored (for messages)
  std::string destination; // normalized archive-relative path
  bool is_dir = false;
  bool executable = false;
  uint64_t size = 0;
};

/// Checks every member before anything is written (§11.7 order).
box_error check_members(zip_t* za, std::vector<member>& out) {
  const zip_int64_t count = zip_get_num_entries(za, 0);
  if (count < 0)
    return not_a_zip();
  if (static_cast<uint64_t>(count) > max_entries)
    return invalid("Archive contains too many entries (maximum 512)");
  std::set<std::string> destinations;
  std::set<std::string> implied_dirs;
  uint64_t total_compressed = 0;
  uint64_t total_size = 0;
  for (zip_int64_t i = 0; i < count; ++i) {
    const auto index = static_cast<uint64_t>(i);
    const char* raw = zip_get_name(za, index, 0);
    // libzip hands out NUL-terminated names, so a name with NUL arrives cut at it.
    if (raw == nullptr || *raw == '\0')
      return invalid("Archive contains an unsafe empty or NUL path");
    member m;
    m.index = index;
    m.name = raw;
    std::string name = m.name;
    for (auto& ch : name)
      if (ch == '\\')
        ch = '/';
    const auto unsafe = [&] { return invalid("Archive contains an unsafe path: " + m.name); };
    if (name.starts_with("/"))
      return unsafe();
    auto normalized = normpath(name);
    if (normalized == "." || normalized == ".." || normalized.starts_with("../"))
      return unsafe();
    auto first = normalized.substr(0, normalized.find('/'));
    if (first.size() >= 2 && first[1] == ':')
      return unsafe();
    m.destination = normalized;
    m.is_dir = name.ends_with("/");
    if (!destinations.insert(normalized).second)
      return invalid("Archive contains a duplicate path: " + m.name);

    zip_uint8_t opsys = 0;
    zip_uint32_t attributes = 0;
    if (zip_file_get_external_attributes(za, index, 0, &opsys, &attributes) != 0)
      return not_a_zip();
    const mode_t mode = attributes >> 16;
    const mode_t type = mode & S_IFMT;
    if (type == S_IFLNK)
      return invalid("Archive contains a symbolic link: " + m.name);
    if (type != 0 && type != S_IFREG && type != S_IFDIR)
      return invalid("Archive contains a non-regular entry: " + m.name);
    m.executable = (mode & 0111) != 0;

    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(za, index, 0, &st) != 0 || (st.valid & ZIP_STAT_SIZE) == 0
        || (st.valid & ZIP_STAT_COMP_SIZE) == 0)
      return invalid("Archive contains invalid size metadata: " + m.name);
    m.size = st.size;
    if (m.is_dir && st.size != 0)
      return invalid("Archive directory has unexpected content: " + m.name);
    if (st.size > max_entry_bytes)
      return invalid("Archive entry exceeds the uncompressed size limit: " + m.name);
    if (st.size > 0 && (st.comp_size == 0 || st.size > st.comp_size * max_ratio))
      return invalid("Archive entry exceeds the compression ratio limit: " + m.name);
    total_compressed += st.comp_size;
    if (total_compressed > max_upload_bytes)
      return invalid("Archive exceeds the compressed size limit");
    total_size += st.size;
    if (total_size > max_total_bytes)
      return invalid("Archive exceeds the total uncompressed size limit");

    for (size_t slash = normalized.find('/'); slash != std::string::npos;
         slash = normalized.find('/', slash + 1))
      implied_dirs.insert(normalized.substr(0, slash));
    out.push_back(std::move(m));
  }
  if (total_size > total_compressed * max_ratio)
    return invalid("Archive exceeds the aggregate compression ratio limit");
  // A file where another member needs a directory cannot be extracted; refuse it here
  // rather than half-way through the extraction.
  for (const auto& m : out)
    if (!m.is_dir && implied_dirs.contains(m.destination))
      return invalid("Archive contains a duplicate path: " + m.name);
  return {};
}

box_error os_failure(int err, const std::string& path) {
  return invalid(beneath::os_error_text(err, path));
}

/// Streams one regular member to `<root>/<destination>` with exclusive create, beneath
/// the extraction folder's descriptor and without following any link.
box_error extract_file(zip_t* za, const member& m, int root, const std::string& shown, uint64_t& total_written) {
  auto slash = m.destination.rfind('/');
  if (slash != std::string::npos
      && beneath::make_dirs(root, m.destination.substr(0, slash), 0755, beneath::links::none) != 0)
    return invalid("Archive contains an unsafe path: " + m.name);
  const std::string path = shown + "/" + m.destination;
  auto fd = beneath::open(root, m.destination, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, beneath::links::none, 0600);
  if (!fd)
    return invalid("Archive contains a duplicate path: " + m.name);
  member_ptr zf{zip_fopen_index(za, m.index, 0)};
  if (!zf)
    return not_a_zip();
  uint64_t written = 0;
  std::vector<char> buf(copy_chunk);
  for (;;) {
    zip_int64_t n = zip_fread(zf.get(), buf.data(), buf.size());
    if (n < 0)
      return not_a_zip();
    if (n == 0)
      break;
    written += static_cast<uint64_t>(n);
    total_written += static_cast<uint64_t>(n);
    if (written > max_entry_bytes)
      return invalid("Archive entry exceeds the uncompressed size limit: " + m.name);
    if (total_written > max_total_bytes)
      return invalid("Archive exceeds the total uncompressed size limit");
    if (!beneath::write_all(fd.get(), {buf.data(), static_cast<size_t>(n)}))
      return os_failure(errno, path);
  }
  if (written != m.size)
    return invalid("Archive entry size changed while extracting: " + m.name);
  ::fchmod(fd.get(), m.executable ? 0755 : 0644);
  return {};
}

} // namespace

box_error safe_extract(std::string_view bytes, int parent, const std::string& name, const std::string& shown) {
  zip_error_t zerr;
  zip_error_init(&zerr);
  zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &zerr);
  if (src == nullptr) {
    zip_error_fini(&zerr);
    return not_a_zip();
  }
  archive_ptr za{zip_open_from_source(src, ZIP_RDONLY, &zerr)};
  zip_error_fini(&zerr);
  if (!za) {
    zip_source_free(src);
    return not_a_zip();
  }
  std::vector<member> members;
  if (auto err = check_members(za.get(), members))
    return err;
  if (::mkdirat(parent, name.c_str(), 0755) != 0)
    return os_failure(errno, shown);
  auto root = beneath::open(parent, name, O_PATH | O_DIRECTORY, beneath::links::none);
  if (!root)
    return os_failure(errno, shown);
  uint64_t total_written = 0;
  for (const auto& m : members) {
    if (m.is_dir) {
      if (beneath::make_dirs(root.get(), m.destination, 0755, beneath::links::none) != 0)
        return invalid("Archive contains a duplicate path: " + m.name);
      continue;
    }
    if (auto err = extract_file(za.get(), m, root.get(), shown, total_written))
      return err;
  }
  return {};
}

} // namespace boxrt::skills::zip
