// Packages below a tree: discovery, loading SKILL.md, writing text, and uploads
// (zip preview and install) unpacked into a private temp folder.
#include "backends/skills/store_detail.hpp"

namespace boxrt::skills::detail {


std::string host_path(const tree& t, std::string_view rel) {
  if (rel.empty() || rel == ".")
    return t.path;
  return t.path == "/" ? "/" + std::string{rel} : t.path + "/" + std::string{rel};
}

std::string rel_join(std::string_view base, std::string_view name) {
  if (base.empty() || base == ".")
    return std::string{name};
  return std::string{base} + "/" + std::string{name};
}

std::optional<found_package> find_entry(const tree& t, int dir, const std::string& rel) {
  for (const char* candidate : {"SKILL.md", "skill.md"}) {
    struct stat st{};
    if (beneath::stat(dir, candidate, links::inside, st)) {
      if (S_ISREG(st.st_mode))
        return found_package{rel, candidate, false};
      continue;
    }
    // A link that leaves the package is still "a file" to the reference when its
    // target is one; it is found, and loading it fails.
    if (errno == EXDEV)
      return found_package{rel, candidate, true};
  }
  (void)t;
  return std::nullopt;
}

result<std::vector<found_package>> discover(const tree& t, const std::string& start, int max_depth) {
  std::vector<found_package> found;
  std::deque<std::pair<std::string, int>> queue{{start, 0}};
  size_t scanned = 0;
  while (!queue.empty()) {
    auto [current, depth] = queue.front();
    queue.pop_front();
    auto dir = beneath::open(t.fd.get(), current, O_RDONLY | O_DIRECTORY, links::none);
    if (!dir)
      continue;
    if (auto entry = find_entry(t, dir.get(), current)) {
      found.push_back(*entry);
      if (found.size() > limits::discovery_packages)
        return invalid("Skill discovery exceeded the configured package limit");
      continue;
    }
    if (depth >= max_depth)
      continue;
    bool over = false;
    auto names = beneath::list(dir.get(), limits::discovery_entries - scanned + 1, over);
    if (!names)
      continue;
    scanned += names->size();
    if (over || scanned > limits::discovery_entries)
      return invalid("Skill discovery exceeded the configured entry limit");
    for (const auto& n : *names) {
      if ((current.empty() || current == ".") && n == trash_name)
        continue;
      struct stat st{};
      if (::fstatat(dir.get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
        queue.emplace_back(rel_join(current, n), depth + 1);
    }
  }
  return found;
}

bool has_marker(int pkg, const char* name, bool want_dir) {
  struct stat st{};
  return beneath::stat(pkg, name, links::inside, st) && (want_dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
}

result<skill> load_package(const tree& t, const found_package& found) {
  skill s;
  s.relative_root = found.rel.empty() ? std::string{"."} : found.rel;
  s.package_root = host_path(t, s.relative_root);
  s.entry_file = found.entry;
  auto pkg = beneath::open(t.fd.get(), s.relative_root, O_PATH | O_DIRECTORY, links::none);
  if (!pkg)
    return os_error(errno, s.package_root);
  if (found.entry_escapes)
    return invalid("Skill entry file " + found.entry + " is outside the package root");
  // O_NONBLOCK: a FIFO under the entry's name must not hang a worker.
  auto entry = beneath::open(pkg.get(), found.entry, O_RDONLY | O_NONBLOCK, links::inside);
  if (!entry) {
    if (errno == EXDEV)
      return invalid("Skill entry file " + found.entry + " is outside the package root");
    return os_error(errno, s.package_root + "/" + found.entry);
  }
  struct stat st{};
  if (::fstat(entry.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return os_error(EISDIR, s.package_root + "/" + found.entry);
  bool too_big = false;
  auto raw = beneath::read_limited(entry.get(), limits::text_file_bytes, too_big);
  if (!raw)
    return os_error(errno, s.package_root + "/" + found.entry);
  if (too_big)
    return invalid("Skill entry file " + found.entry + " exceeds the 1048576-byte limit");
  if (!valid_utf8(*raw))
    return invalid("Skill entry file " + found.entry + " is not valid UTF-8 text");
  auto fm = parse_frontmatter(universal_newlines(*raw));
  if (!fm)
    return fm.error();
  const auto dir_name = basename(s.package_root);
  auto name = validate_name(fm->name.value_or(dir_name));
  if (!name)
    return name.error();
  s.name = *name;
  s.display_name = py::strip(fm->display_name.value_or(fm->name.value_or(dir_name)));
  s.description = py::strip(fm->description.value_or(""));
  s.instructions = std::move(fm->instructions);
  for (const char* marker : {"requirements.txt", "pyproject.toml", "setup.py", "setup.cfg"})
    s.python_project = s.python_project || has_marker(pkg.get(), marker, false);
  s.python_project = s.python_project || has_marker(pkg.get(), ".venv", true);
  s.created_at = iso_utc_offset(epoch_us(st.st_ctim));
  s.updated_at = iso_utc_offset(epoch_us(st.st_mtim));
  return s;
}

box_error write_text(int dir, const std::string& rel, std::string_view content, const std::string& shown) {
  auto fd = beneath::open(dir, rel, O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK, links::inside, 0644);
  if (!fd)
    return errno == EXDEV ? invalid("path must stay within the skill package root") : os_error(errno, shown);
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return os_error(EISDIR, shown);
  if (!beneath::write_all(fd.get(), content))
    return os_error(errno, shown);
  return {};
}

box_error write_skill_md(const tree& t, const std::string& rel, const std::string& name,
                         const std::optional<std::string>& display_name,
                         const std::optional<std::string>& description, const std::string& instructions) {
  if (auto e = beneath::make_dirs(t.fd.get(), rel, 0755, links::none); e != 0)
    return os_error(e, host_path(t, rel));
  auto pkg = beneath::open(t.fd.get(), rel, O_PATH | O_DIRECTORY, links::none);
  if (!pkg)
    return os_error(errno, host_path(t, rel));
  std::vector<std::pair<std::string, std::string>> fields{{"name", name}};
  if (display_name)
    fields.emplace_back("display_name", *display_name);
  if (description)
    fields.emplace_back("description", *description);
  return write_text(pkg.get(), "SKILL.md", build_skill_md(fields, instructions), host_path(t, rel) + "/SKILL.md");
}

std::optional<std::string> relative_in(const tree& t, const std::string& p) {
  auto real = realpath_py(p);
  if (!within(t.path, real))
    return std::nullopt;
  if (real == t.path)
    return std::string{"."};
  return real.substr(t.path.size() + (t.path == "/" ? 0 : 1));
}

std::string strip_extension(const std::string& base) {
  auto dot = base.rfind('.');
  if (dot == std::string::npos || dot == 0)
    return base;
  if (base.find_first_not_of('.') >= dot)
    return base;
  return base.substr(0, dot);
}

std::string target_stem(const std::string& filename) {
  auto stem = strip_extension(basename(py::strip(filename)));
  auto safe = std::string{strip_chars(safe_target_chars(stem), "-_")};
  return safe.empty() ? "uploaded-skill" : safe;
}

std::string clean_relative(std::string_view raw) {
  std::string s{py::strip(raw)};
  std::replace(s.begin(), s.end(), '\\', '/');
  return std::string{strip_chars(s, "/")};
}

std::optional<unique_fd> open_upload(const std::string& zip_path) {
  auto slash = zip_path.rfind('/');
  auto dir = beneath::open_root(slash == std::string::npos ? "." : (slash == 0 ? "/" : zip_path.substr(0, slash)));
  if (!dir)
    return std::nullopt;
  auto fd = beneath::open(dir.get(), zip_path.substr(slash == std::string::npos ? 0 : slash + 1), O_RDONLY | O_NONBLOCK,
                          links::none);
  if (!fd)
    return std::nullopt;
  return fd;
}

result<std::string> read_upload(const std::string& zip_path) {
  auto fd = open_upload(zip_path);
  if (!fd)
    return os_error(errno, zip_path);
  struct stat st{};
  if (::fstat(fd->get(), &st) != 0)
    return os_error(errno, zip_path);
  if (!S_ISREG(st.st_mode))
    return invalid("Uploaded file must be a valid .zip archive");
  if (st.st_size == 0)
    return invalid("Uploaded file is empty");
  if (static_cast<uint64_t>(st.st_size) > zip::max_upload_bytes)
    return invalid("Uploaded archive exceeds the compressed size limit (20971520 bytes)");
  bool too_big = false;
  auto data = beneath::read_limited(fd->get(), zip::max_upload_bytes, too_big);
  if (!data)
    return os_error(errno, zip_path);
  if (too_big)
    return invalid("Uploaded archive exceeds the compressed size limit (20971520 bytes)");
  if (data->empty())
    return invalid("Uploaded file is empty");
  return std::move(*data);
}

box_error unpack(const std::string& zip_path, const std::string& temp_parent, const char* prefix,
                 const std::string& source_subdir, unpacked& out) {
  auto bytes = read_upload(zip_path);
  if (!bytes)
    return bytes.error();
  auto parent = temp_parent.empty() ? fs::temp_directory_path().string() : temp_parent;
  std::string tmpl = parent + "/" + prefix + "XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr)
    return os_error(errno, tmpl);
  out.parent = beneath::open_root(realpath_py(parent));
  out.name = basename(tmpl);
  out.temp.path = realpath_py(tmpl);
  if (out.parent)
    out.temp.fd = beneath::open(out.parent.get(), out.name, O_PATH | O_DIRECTORY, links::none);
  if (!out.parent || !out.temp.fd)
    return os_error(errno, tmpl);
  if (auto err = zip::safe_extract(*bytes, out.temp.fd.get(), "extracted", out.temp.path + "/extracted"))
    return err;
  auto extracted = beneath::open(out.temp.fd.get(), "extracted", O_RDONLY | O_DIRECTORY, links::none);
  bool over = false;
  auto names = extracted ? beneath::list(extracted.get(), SIZE_MAX, over) : std::nullopt;
  std::string root = "extracted";
  struct stat st{};
  if (names && names->size() == 1 && ::fstatat(extracted.get(), names->front().c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0
      && S_ISDIR(st.st_mode))
    root = "extracted/" + names->front();
  const auto subdir = clean_relative(source_subdir);
  if (!subdir.empty()) {
    auto norm = normpath(subdir);
    if (norm.starts_with("..") || norm.starts_with("/"))
      return invalid("source_subdir must stay within the uploaded archive");
    // An archive holds no links (refused at extraction), so nothing is followed.
    auto target = rel_join(root, norm);
    struct stat sub{};
    if (!beneath::stat(out.temp.fd.get(), target, links::none, sub) || !S_ISDIR(sub.st_mode))
      return invalid("source_subdir does not exist in the uploaded archive: " + subdir);
    root = target;
  }
  out.root = root;
  return {};
}

result<std::vector<skill>> preview_candidates(const std::string& store_root, const unpacked& up,
                                              const std::string& filename, const std::string& target_suffix) {
  auto found = discover(up.temp, up.root, 2);
  if (!found)
    return found.error();
  if (found->empty())
    return invalid("No SKILL.md found in " + host_path(up.temp, up.root) + " or its subdirectories (max depth: 2)");
  const auto stem = target_stem(filename);
  // The suffix is caller text; keep it to one path component.
  const auto suffix = safe_target_chars(target_suffix);
  std::vector<skill> previews;
  for (const auto& f : *found) {
    auto s = load_package(up.temp, f);
    if (!s)
      return s.error();
    std::string rel = f.rel == up.root ? std::string{} : f.rel.substr(up.root.size() + 1);
    s->source_path = rel;
    s->has_source_path = true;
    auto leaf = basename(rel);
    auto target = stem;
    if (!leaf.empty() && leaf != stem)
      target += "-" + leaf;
    if (!suffix.empty())
      target += "-" + suffix;
    s->package_root = join(store_root, target);
    previews.push_back(std::move(*s));
  }
  std::stable_sort(previews.begin(), previews.end(),
                   [](const skill& a, const skill& b) { return a.source_path < b.source_path; });
  return previews;
}

std::string candidate_list(const std::vector<skill>& previews) {
  std::string out;
  for (const auto& p : previews) {
    if (!out.empty())
      out += ", ";
    out += p.source_path.empty() ? "." : p.source_path;
  }
  return out;
}

box_error copy_contents(int from, int to, const std::string& shown) {
  bool over = false;
  auto names = beneath::list(from, SIZE_MAX, over);
  if (!names)
    return os_error(errno, shown);
  for (const auto& n : *names) {
    struct stat st{};
    if (::fstatat(from, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      return os_error(errno, shown + "/" + n);
    if (S_ISDIR(st.st_mode)) {
      if (::mkdirat(to, n.c_str(), 0755) != 0)
        return os_error(errno, shown + "/" + n);
      unique_fd src{::openat(from, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)};
      unique_fd dst{::openat(to, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)};
      if (!src || !dst)
        return os_error(errno, shown + "/" + n);
      if (auto err = copy_contents(src.get(), dst.get(), shown + "/" + n))
        return err;
    } else if (S_ISREG(st.st_mode)) {
      unique_fd src{::openat(from, n.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)};
      unique_fd dst{::openat(to, n.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, st.st_mode & 0777)};
      if (!src || !dst)
        return os_error(errno, shown + "/" + n);
      char buf[65536];
      for (;;) {
        auto r = ::read(src.get(), buf, sizeof buf);
        if (r < 0 && errno == EINTR)
          continue;
        if (r < 0)
          return os_error(errno, shown + "/" + n);
        if (r == 0)
          break;
        if (!beneath::write_all(dst.get(), {buf, static_cast<size_t>(r)}))
          return os_error(errno, shown + "/" + n);
      }
      ::fchmod(dst.get(), st.st_mode & 0777);
    }
  }
  return {};
}

} // namespace boxrt::skills::detail
