// The Workspace-scoped skill store (§11). Packages are mounted into sandboxes, so a
// tenant can change them while the store works: every file operation below the store
// root goes through descriptors resolved beneath it (backends/linux/beneath.hpp), links
// followed only while they stay inside the package. Host paths given by the host (a
// package_root, a scan path) are judged as Python's os.path.realpath judges them, then
// opened beneath the root without following anything.
#include "backends/skill_store.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <locale.h>
#include <sys/stat.h>
#include <unistd.h>
#include <wctype.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <map>
#include <set>
#include <system_error>

#include <yaml-cpp/yaml.h>

#include <spdlog/spdlog.h>

#include "backends/linux/beneath.hpp"
#include "backends/session_dir.hpp"
#include "backends/skill_zip.hpp"
#include "messages/base/pytext.hpp"
#include "messages/json.hpp"
#include "messages/time.hpp"

namespace boxrt::skills {

namespace {

namespace fs = std::filesystem;

box_error invalid(std::string text) {
  return make_box_error(ec::validation, std::move(text));
}

/// Python's OSError text: "[Errno 2] No such file or directory: '<path>'".
box_error os_error(int err, const std::string& path) {
  return invalid(beneath::os_error_text(err, path));
}

// --- UTF-8 and Python str semantics -------------------------------------------------

using py::bad_code_point;
using py::decode_utf8;
using py::valid_utf8;
using py::code_points;

/// Letters and digits of every script, via iswalnum in the C.UTF-8 locale (glibc's
/// full Unicode table); ASCII only if that locale is missing.
bool is_alnum(char32_t cp) {
  static const locale_t utf8 = ::newlocale(LC_CTYPE_MASK, "C.UTF-8", locale_t{});
  if (cp < 0x80)
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
  if (cp == bad_code_point || utf8 == locale_t{})
    return false;
  return ::iswalnum_l(static_cast<wint_t>(cp), utf8) != 0;
}

/// Python's str.strip(chars) for ASCII `chars`.
std::string_view strip_chars(std::string_view s, std::string_view chars) {
  while (!s.empty() && chars.find(s.front()) != std::string_view::npos)
    s.remove_prefix(1);
  while (!s.empty() && chars.find(s.back()) != std::string_view::npos)
    s.remove_suffix(1);
  return s;
}

/// Text mode reading with universal newlines: "\r\n" and "\r" become "\n".
std::string universal_newlines(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out += '\n';
      if (i + 1 < s.size() && s[i + 1] == '\n')
        ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

/// Python's str.splitlines(keepends=True) on text without "\r".
std::vector<std::string_view> split_lines(std::string_view s) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  for (size_t i = 0; i < s.size();) {
    size_t next = i;
    const char32_t cp = decode_utf8(s, next);
    const bool boundary = cp == '\n' || cp == '\v' || cp == '\f' || cp == 0x1C || cp == 0x1D
                          || cp == 0x1E || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    i = next;
    if (boundary) {
      lines.push_back(s.substr(start, i - start));
      start = i;
    }
  }
  if (start < s.size())
    lines.push_back(s.substr(start));
  return lines;
}

/// "[A-Za-z0-9_-]+" per code point, everything else replaced by `-` (zip targets).
std::string safe_target_chars(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const size_t begin = i;
    const char32_t cp = decode_utf8(s, i);
    if (cp == '-' || cp == '_' || is_alnum(cp))
      out.append(s.substr(begin, i - begin));
    else
      out += '-';
  }
  return out;
}

// --- paths -------------------------------------------------------------------------

std::string cwd() {
  std::error_code err;
  auto p = fs::current_path(err);
  return err ? std::string{"/"} : p.string();
}

/// Python's os.path.abspath.
std::string abspath(std::string_view p) {
  if (p.starts_with("/"))
    return normpath(p);
  return normpath(cwd() + "/" + std::string{p});
}

std::string join(const std::string& a, std::string_view b) {
  if (b.starts_with("/"))
    return std::string{b};
  if (a.empty() || a.ends_with("/"))
    return a + std::string{b};
  return a + "/" + std::string{b};
}

std::string dirname(const std::string& p) {
  auto slash = p.rfind('/');
  if (slash == std::string::npos)
    return "";
  auto head = p.substr(0, slash + 1);
  auto stripped = strip_chars(head, "/");
  return stripped.empty() && !head.empty() ? std::string(head.size(), '/')
                                           : head.substr(0, head.find_last_not_of('/') + 1);
}

std::string basename(std::string_view p) {
  auto slash = p.rfind('/');
  return std::string{slash == std::string_view::npos ? p : p.substr(slash + 1)};
}

/// posixpath._joinrealpath (non-strict): resolves every symlink, dangling ones too.
std::string join_realpath(std::string path, std::string_view rest,
                          std::map<std::string, std::optional<std::string>>& seen,
                          bool& ok) {
  if (rest.starts_with("/")) {
    rest.remove_prefix(1);
    path = "/";
  }
  while (!rest.empty()) {
    auto slash = rest.find('/');
    auto name = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
    if (name.empty() || name == ".")
      continue;
    if (name == "..") {
      if (!path.empty()) {
        auto last = basename(path);
        path = dirname(path);
        if (last == "..")
          path = join(join(path, ".."), "..");
      } else {
        path = "..";
      }
      continue;
    }
    auto newpath = join(path, name);
    struct stat st{};
    if (::lstat(newpath.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) {
      path = newpath;
      continue;
    }
    if (auto it = seen.find(newpath); it != seen.end()) {
      if (it->second) {
        path = *it->second;
        continue;
      }
      ok = false;
      return join(newpath, rest);
    }
    seen[newpath] = std::nullopt;
    std::string target(PATH_MAX, '\0');
    auto n = ::readlink(newpath.c_str(), target.data(), target.size());
    target.resize(n < 0 ? 0 : static_cast<size_t>(n));
    path = join_realpath(path, target, seen, ok);
    if (!ok)
      return join(path, rest);
    seen[newpath] = path;
  }
  return path;
}

/// Python's os.path.realpath(os.path.abspath(p)).
std::string realpath_py(std::string_view p) {
  std::map<std::string, std::optional<std::string>> seen;
  bool ok = true;
  return abspath(join_realpath("", abspath(p), seen, ok));
}

/// True when `p` equals `root` or lies below it.
bool within(const std::string& root, const std::string& p) {
  return p == root || p.starts_with(root == "/" ? root : root + "/");
}


int64_t epoch_us(const struct timespec& ts) {
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + (ts.tv_nsec + 500) / 1000;
}

// --- YAML frontmatter --------------------------------------------------------------

enum class plain_kind { string, null, true_, false_, integer, number };

/// How PyYAML's safe_load (YAML 1.1) resolves an untagged plain scalar, as far as
/// str() of the result matters here.
plain_kind classify_plain(const std::string& v) {
  static const std::set<std::string> nulls{"", "~", "null", "Null", "NULL"};
  static const std::set<std::string> trues{"yes", "Yes", "YES", "true", "True",
                                           "TRUE", "on", "On", "ON", "y", "Y"};
  static const std::set<std::string> falses{"no", "No", "NO", "false", "False",
                                            "FALSE", "off", "Off", "OFF", "n", "N"};
  if (nulls.contains(v))
    return plain_kind::null;
  if (trues.contains(v))
    return plain_kind::true_;
  if (falses.contains(v))
    return plain_kind::false_;
  std::string_view d = v;
  if (d.starts_with("-") || d.starts_with("+"))
    d.remove_prefix(1);
  if (!d.empty() && std::all_of(d.begin(), d.end(), [](char c) {
        return (c >= '0' && c <= '9') || c == '_';
      }) && d.front() != '_')
    return plain_kind::integer;
  if (!d.empty() && ((d.front() >= '0' && d.front() <= '9') || d.front() == '.'))
    return plain_kind::number;
  return plain_kind::string;
}

/// str(value) of a frontmatter value, or nullopt when Python would find it falsy.
std::optional<std::string> python_str(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull())
    return std::nullopt;
  if (!node.IsScalar())
    return std::nullopt; // lists and mappings are not usable as text fields
  const std::string& v = node.Scalar();
  if (node.Tag() == "?") {
    switch (classify_plain(v)) {
      case plain_kind::null:
      case plain_kind::false_:
        return std::nullopt;
      case plain_kind::true_:
        return "True";
      case plain_kind::integer: {
        std::string digits;
        bool negative = v.starts_with("-");
        for (char c : v)
          if (c >= '0' && c <= '9')
            digits += c;
        auto nz = digits.find_first_not_of('0');
        if (nz == std::string::npos)
          return std::nullopt; // 0
        return (negative ? "-" : "") + digits.substr(nz);
      }
      case plain_kind::number:
      case plain_kind::string:
        break;
    }
  }
  if (v.empty())
    return std::nullopt;
  return v;
}

} // namespace

// --- public helpers ----------------------------------------------------------------

result<std::string> scoped_root(std::string_view skills_root, std::string_view ns) {
  if (ns.empty() || ns.find('/') != std::string_view::npos
      || ns.find('\\') != std::string_view::npos || ns == "." || ns == "..")
    return make_box_error(ec::value, "Invalid Box skill namespace");
  return std::string{skills_root} + "/tenants/" + std::string{ns};
}

result<std::string> validate_name(std::string_view raw) {
  auto name = py::strip(raw);
  if (name.empty())
    return invalid("Skill name is required");
  bool any = false;
  for (size_t i = 0; i < name.size();) {
    const char32_t cp = decode_utf8(name, i);
    if (cp == '-' || cp == '_')
      continue;
    if (!is_alnum(cp))
      return invalid("Skill name can only contain letters, numbers, hyphens and underscores");
    any = true;
  }
  if (!any)
    return invalid("Skill name can only contain letters, numbers, hyphens and underscores");
  if (code_points(name) > limits::name_chars)
    return invalid("Skill name cannot exceed 64 characters");
  return std::string{name};
}

result<frontmatter> parse_frontmatter(std::string_view content) {
  frontmatter out;
  out.instructions = std::string{content};
  if (!content.starts_with("---"))
    return out;
  auto lines = split_lines(content);
  if (lines.empty() || py::strip(lines[0]) != "---")
    return out;
  for (size_t i = 1; i < lines.size(); ++i) {
    if (py::strip(lines[i]) != "---")
      continue;
    std::string meta;
    for (size_t k = 1; k < i; ++k)
      meta.append(lines[k]);
    std::string rest;
    for (size_t k = i + 1; k < lines.size(); ++k)
      rest.append(lines[k]);
    out.instructions = rest.substr(std::min(rest.find_first_not_of('\n'), rest.size()));
    YAML::Node doc;
    try {
      doc = YAML::Load(meta);
    } catch (const YAML::Exception& e) {
      return invalid(e.what());
    }
    if (doc.IsMap()) {
      const YAML::Node& m = doc;
      out.name = python_str(m["name"]);
      out.display_name = python_str(m["display_name"]);
      out.description = python_str(m["description"]);
    }
    return out;
  }
  return out;
}

std::string build_skill_md(const std::vector<std::pair<std::string, std::string>>& fields,
                           std::string_view instructions) {
  YAML::Emitter emitter;
  emitter << YAML::BeginMap;
  bool any = false;
  for (const auto& [key, value] : fields) {
    if (py::strip(value).empty())
      continue;
    any = true;
    emitter << YAML::Key << key << YAML::Value;
    // Quote whatever a YAML 1.1 loader would not read back as this very string.
    // Control characters are escaped on one line, so no value can forge a "---" line.
    const bool needs_quotes =
        classify_plain(value) != plain_kind::string || value != py::strip(value)
        || std::any_of(value.begin(), value.end(),
                       [](char c) { return static_cast<unsigned char>(c) < 0x20; });
    if (needs_quotes)
      emitter << YAML::DoubleQuoted;
    emitter << value;
  }
  emitter << YAML::EndMap;
  if (!any)
    return std::string{instructions};
  std::string out = "---\n";
  out += py::strip(emitter.c_str());
  out += "\n---\n\n";
  out += instructions;
  return out;
}

std::string to_json(const skill& s) {
  json::writer w;
  w.begin_object()
    .key("name").value(s.name)
    .key("display_name").value(s.display_name)
    .key("description").value(s.description)
    .key("instructions").value(s.instructions)
    .key("package_root").value(s.package_root)
    .key("entry_file").value(s.entry_file)
    .key("python_project").value(s.python_project)
    .key("created_at").value(s.created_at)
    .key("updated_at").value(s.updated_at);
  if (s.has_source_path)
    w.key("source_path").value(s.source_path);
  w.end_object();
  return w.take();
}

std::string to_json(const std::vector<skill>& skills) {
  json::writer w;
  w.begin_object().key("skills").begin_array();
  for (const auto& s : skills)
    w.raw(to_json(s));
  w.end_array().end_object();
  return w.take();
}

// --- packages ----------------------------------------------------------------------

namespace {

using beneath::links;

/// An open tree: the store's root or an upload's private temp folder. Every path
/// below it is resolved beneath `fd`; `path` only names things in replies.
struct tree {
  unique_fd fd;
  std::string path;
};

/// The host path of `rel` below `t` ("." = the root itself).
std::string host_path(const tree& t, std::string_view rel) {
  if (rel.empty() || rel == ".")
    return t.path;
  return t.path == "/" ? "/" + std::string{rel} : t.path + "/" + std::string{rel};
}

/// `rel` joined below `base` (both relative, "." = none).
std::string rel_join(std::string_view base, std::string_view name) {
  if (base.empty() || base == ".")
    return std::string{name};
  return std::string{base} + "/" + std::string{name};
}

/// Name of the folder in the store root where removed packages wait to be deleted
/// (never listed: discovery skips it).
constexpr std::string_view trash_name = ".boxrt-trash";

/// A package found by discovery: its folder below the tree and its entry file.
struct found_package {
  std::string rel;
  std::string entry;
  /// The entry is a link that leaves the package: loading it fails.
  bool entry_escapes = false;
};

/// The entry file of the folder `rel` (§11.2): SKILL.md or skill.md, a regular file
/// once in-package links are followed, as os.path.isfile sees it.
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

/// Breadth-first discovery (§11.2) from the folder `start` below `t`; directory
/// symlinks are never followed: each level is opened beneath the tree with none.
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

/// Whether `name` is a regular file (or, for `.venv`, a folder) in the package once
/// in-package links are followed.
bool has_marker(int pkg, const char* name, bool want_dir) {
  struct stat st{};
  return beneath::stat(pkg, name, links::inside, st) && (want_dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
}

/// Loads one package (§11.3); any failure is an error the listing skips.
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

/// Writes `content` as the regular file `rel` below the folder `dir` (in-package links
/// followed, as Python's open(path, "w") follows them inside the package).
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

/// The folder below `t` that the host path `p` names, as the reference judges it:
/// os.path.realpath, then containment in the tree. The folder is then opened beneath
/// the tree without following any link, so a link swapped in afterwards fails the
/// open instead of redirecting it. nullopt: `p` lies outside; "" rel: the root.
std::optional<std::string> relative_in(const tree& t, const std::string& p) {
  auto real = realpath_py(p);
  if (!within(t.path, real))
    return std::nullopt;
  if (real == t.path)
    return std::string{"."};
  return real.substr(t.path.size() + (t.path == "/" ? 0 : 1));
}

/// Python's os.path.splitext(...)[0] of a basename.
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

/// `raw` trimmed, backslashes as slashes, outer slashes stripped.
std::string clean_relative(std::string_view raw) {
  std::string s{py::strip(raw)};
  std::replace(s.begin(), s.end(), '\\', '/');
  return std::string{strip_chars(s, "/")};
}

/// Opens an uploaded file: the folder it lies in is opened by its host path (a folder
/// boxd made), the file beneath it with no link followed. nullopt with errno.
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

/// Reads an uploaded archive, refusing empty and oversized files before reading.
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

/// An archive unpacked into a private temp folder that is always removed.
struct unpacked {
  unique_fd parent;  // the temp folder's parent
  std::string name;  // the temp folder's name in it
  tree temp;         // the temp folder itself
  std::string root;  // the archive root below `temp` (after the single-folder rule and source_subdir)
  ~unpacked() {
    if (parent && !name.empty())
      if (auto err = beneath::remove_tree(parent.get(), name))
        spdlog::warn("skills: cannot remove {}: {}", host_path(temp, "."), beneath::os_error_text(err.error, err.detail));
  }
};

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

/// Copies the regular files and folders below `from` into the empty folder `to`
/// (anything else is skipped), descriptor by descriptor, never following a link.
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

} // namespace

// --- store -------------------------------------------------------------------------

store::store(std::string root, std::string temp_parent)
  : root_(std::move(root)), temp_parent_(std::move(temp_parent)) {
}

std::string store::root() const {
  return realpath_py(root_);
}

namespace {

/// Opens the store's root (creating it first when `create`).
result<tree> open_store(const std::string& root_path, bool create) {
  tree t;
  t.path = realpath_py(root_path);
  if (create) {
    std::error_code err;
    fs::create_directories(t.path, err);
    if (err && !fs::is_directory(t.path))
      return os_error(err.value(), t.path);
  }
  t.fd = beneath::open_root(t.path, O_RDONLY | O_DIRECTORY);
  if (!t.fd)
    return os_error(errno, t.path);
  return t;
}

} // namespace

void store::purge_trash() {
  auto t = open_store(root_, false);
  if (!t)
    return;
  struct stat st{};
  if (::fstatat(t->fd.get(), std::string{trash_name}.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return;
  if (auto err = beneath::remove_tree(t->fd.get(), std::string{trash_name}))
    spdlog::warn("skills: removed packages under {} are not all gone yet ({}: {}); retried at the next removal",
                 host_path(*t, trash_name), err.detail, std::strerror(err.error));
}

result<std::vector<skill>> store::list() {
  if (!trash_checked_) {
    trash_checked_ = true;
    purge_trash();
  }
  auto t = open_store(root_, true);
  if (!t)
    return t.error();
  auto found = discover(*t, ".", 6);
  if (!found)
    return found.error();
  std::vector<skill> skills;
  uint64_t text = 0;
  for (const auto& f : *found) {
    auto s = load_package(*t, f);
    if (!s)
      continue;
    for (const auto* field : {&s->name, &s->display_name, &s->description, &s->instructions, &s->package_root,
                              &s->entry_file, &s->created_at, &s->updated_at})
      text += field->size();
    if (text > limits::listing_text_bytes)
      return invalid("Skill listing exceeds the configured text limit");
    skills.push_back(std::move(*s));
  }
  std::stable_sort(skills.begin(), skills.end(),
                   [](const skill& a, const skill& b) { return a.updated_at > b.updated_at; });
  return skills;
}

result<std::optional<skill>> store::get(const std::string& name) {
  auto all = list();
  if (!all)
    return all.error();
  for (auto& s : *all)
    if (s.name == name)
      return std::optional<skill>{std::move(s)};
  return std::optional<skill>{};
}

namespace {

/// The create-time value of a text field (§11.5).
std::string create_field(const text_field& requested, const std::optional<skill>& imported,
                         std::string skill::*member) {
  const bool given = requested && *requested;
  if (!given || (imported && py::strip(**requested).empty()))
    return imported ? (*imported).*member : std::string{};
  return **requested;
}

} // namespace

result<skill> store::create(const create_request& req) {
  auto name = validate_name(req.name);
  if (!name)
    return name.error();
  auto existing = get(*name);
  if (!existing)
    return existing.error();
  if (*existing)
    return invalid("Skill with name \"" + *name + "\" already exists");
  auto t = open_store(root_, true);
  if (!t)
    return t.error();
  std::string target = *name;
  std::optional<skill> imported;
  const auto requested_root = std::string{py::strip(req.package_root)};
  if (!requested_root.empty()) {
    // Scoped store: a package is only ever registered in place, never copied in.
    auto rel = relative_in(*t, requested_root);
    if (!rel || *rel == ".")
      return invalid("package_root must stay within the Workspace skill root");
    const auto package_root = host_path(*t, *rel);
    auto dir = beneath::open(t->fd.get(), *rel, O_RDONLY | O_DIRECTORY, links::none);
    if (!dir) {
      if (errno == ENOENT || errno == ENOTDIR)
        return invalid("Directory does not exist: " + package_root);
      return invalid("package_root must stay within the Workspace skill root");
    }
    auto entry = find_entry(*t, dir.get(), *rel);
    if (!entry)
      return invalid("No SKILL.md found in " + package_root);
    auto loaded = load_package(*t, *entry);
    if (!loaded)
      return loaded.error();
    imported = std::move(*loaded);
    target = *rel;
  }
  const auto display_name = create_field(req.display_name, imported, &skill::display_name);
  const auto description = create_field(req.description, imported, &skill::description);
  const auto instructions = create_field(req.instructions, imported, &skill::instructions);
  if (auto err = write_skill_md(*t, target, *name, display_name, description, instructions))
    return err;
  auto created = get(*name);
  if (!created)
    return created.error();
  if (!*created)
    return invalid("Failed to create skill \"" + *name + "\"");
  return std::move(**created);
}

result<skill> store::update(const std::string& name, const create_request& req) {
  auto current = get(name);
  if (!current)
    return current.error();
  if (!*current)
    return invalid("Skill \"" + name + "\" not found");
  const auto& s = **current;
  const auto requested_name = py::strip(req.name.empty() ? s.name : req.name);
  if (requested_name != s.name)
    return invalid("Renaming skills is not supported");
  const auto requested_root = py::strip(req.package_root);
  if (!requested_root.empty() && realpath_py(requested_root) != realpath_py(s.package_root))
    return invalid("Updating package_root is not supported; recreate the skill to import a "
                   "different package");
  const auto keep = [](const text_field& f, const std::string& current_value) {
    return f ? *f : std::optional<std::string>{current_value};
  };
  const auto display_name = keep(req.display_name, s.display_name);
  const auto description = keep(req.description, s.description);
  const auto instructions = keep(req.instructions, s.instructions).value_or("");
  auto t = open_store(root_, false);
  if (!t)
    return t.error();
  if (auto err = write_skill_md(*t, s.relative_root, s.name, display_name, description, instructions))
    return err;
  auto updated = get(name);
  if (!updated)
    return updated.error();
  if (!*updated)
    return invalid("Skill \"" + name + "\" not found after update");
  return std::move(**updated);
}

result<std::string> store::remove(const std::string& name) {
  auto current = get(name);
  if (!current)
    return current.error();
  if (!*current)
    return invalid("Skill \"" + name + "\" not found");
  const auto& rel = (*current)->relative_root;
  if (rel.empty() || rel == ".")
    return invalid("Only managed skills under the Box skills root can be deleted");
  auto t = open_store(root_, false);
  if (!t)
    return t.error();
  const auto top = rel.substr(0, rel.find('/'));
  // The package leaves the store in one rename, so the reply is true the moment it is
  // sent, whatever a sandbox still writes into the folder; the folder is then removed
  // from the trash (and again at the next removal while something keeps it alive).
  if (::mkdirat(t->fd.get(), std::string{trash_name}.c_str(), 0700) != 0 && errno != EEXIST)
    return os_error(errno, host_path(*t, trash_name));
  auto trash = beneath::open(t->fd.get(), trash_name, O_PATH | O_DIRECTORY, links::none);
  if (!trash)
    return os_error(errno, host_path(*t, trash_name));
  const auto parked = top + "-" + random_hex(12);
  if (::renameat(t->fd.get(), top.c_str(), trash.get(), parked.c_str()) != 0)
    return os_error(errno, host_path(*t, top));
  purge_trash();
  return name;
}

result<skill> store::scan_directory(const std::string& path) {
  auto t = open_store(root_, true);
  if (!t)
    return t.error();
  auto rel = relative_in(*t, path);
  if (!rel)
    return invalid("scan path must stay within the Workspace skill root");
  struct stat st{};
  if (!beneath::stat(t->fd.get(), *rel, links::none, st) || !S_ISDIR(st.st_mode))
    return invalid("Directory does not exist: " + path);
  auto found = discover(*t, *rel, 2);
  if (!found)
    return found.error();
  if (found->empty())
    return invalid("No SKILL.md found in " + path + " or its subdirectories (max depth: 2)");
  if (found->size() > 1) {
    std::string candidates;
    for (const auto& f : *found)
      candidates += (candidates.empty() ? "" : ", ") + host_path(*t, f.rel);
    return invalid("Multiple skill directories found in " + path + ". Please choose a more specific path: "
                   + candidates);
  }
  return load_package(*t, found->front());
}

namespace {

/// A request path inside a package (§11.6), resolved beneath the package's folder.
struct resolved_path {
  tree store;           // the store root
  unique_fd package;    // the package folder
  std::string relative; // normalized relative form, "/"-separated ("." = the package)
  std::string given;    // the stripped request path
  std::string shown;    // its host path, for messages
};

result<resolved_path> resolve_in_package(const std::string& store_root, const skill& s, const std::string& path,
                                         bool expect_directory) {
  if (s.package_root.empty())
    return invalid("Skill \"" + s.name + "\" has no package_root");
  resolved_path out;
  out.given = py::strip(path);
  if (out.given.empty())
    out.given = ".";
  if (out.given.starts_with("/"))
    return invalid("path must be relative to the skill package root");
  out.relative = normpath(out.given);
  if (out.relative.starts_with(".."))
    return invalid("path must stay within the skill package root");
  // A file's parent must lie in the package: the package root itself has its parent
  // outside (as in the reference).
  if (!expect_directory && out.relative == ".")
    return invalid("path must stay within the skill package root");
  auto t = open_store(store_root, false);
  if (!t)
    return t.error();
  out.store = std::move(*t);
  out.package = beneath::open(out.store.fd.get(), s.relative_root, O_PATH | O_DIRECTORY, links::none);
  if (!out.package)
    return invalid("Skill \"" + s.name + "\" package directory is unavailable");
  out.shown = s.package_root + (out.relative == "." ? "" : "/" + out.relative);
  return out;
}

void skill_ref(json::writer& w, const std::string& name) {
  w.key("skill").begin_object().key("name").value(name).end_object();
}

} // namespace

result<std::string> store::list_files(const std::string& name, const std::string& path, bool include_hidden,
                                      int64_t max_entries) {
  if (max_entries <= 0)
    return invalid("max_entries must be a positive integer");
  max_entries = std::min(max_entries, limits::max_list_entries);
  auto current = get(name);
  if (!current)
    return current.error();
  if (!*current)
    return invalid("Skill \"" + name + "\" not found");
  auto where = resolve_in_package(root_, **current, path, true);
  if (!where)
    return where.error();
  auto dir = beneath::open(where->package.get(), where->relative, O_RDONLY | O_DIRECTORY, links::inside);
  if (!dir) {
    if (errno == EXDEV)
      return invalid("path must stay within the skill package root");
    return invalid("Skill directory not found: " + where->given);
  }
  bool over = false;
  auto names = beneath::list(dir.get(), limits::directory_entries, over);
  if (!names)
    return os_error(errno, where->shown);
  if (over)
    return invalid("Skill directory exceeds the configured entry limit");
  const bool at_root = where->relative == ".";
  json::writer w;
  w.begin_object();
  skill_ref(w, (*current)->name);
  w.key("base_path").value(at_root ? std::string{"."} : where->relative);
  w.key("entries").begin_array();
  int64_t count = 0;
  for (const auto& n : *names) {
    if (!include_hidden && n.starts_with("."))
      continue;
    struct stat st{};
    // A link is followed only while it stays inside the package; one that leaves it
    // (or dangles) is reported as itself, as the reference reports escaping links.
    if (!beneath::stat(where->package.get(), rel_join(where->relative, n), links::inside, st)
        && ::fstatat(dir.get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      continue;
    const bool is_dir = S_ISDIR(st.st_mode);
    w.begin_object()
      .key("path").value(at_root ? n : where->relative + "/" + n)
      .key("name").value(n)
      .key("is_dir").value(is_dir)
      .key("size");
    if (is_dir)
      w.null();
    else
      w.value(static_cast<int64_t>(st.st_size));
    w.end_object();
    if (++count >= max_entries)
      break;
  }
  w.end_array();
  w.key("truncated").value(count >= max_entries);
  w.end_object();
  return w.take();
}

result<std::string> store::read_file(const std::string& name, const std::string& path) {
  auto current = get(name);
  if (!current)
    return current.error();
  if (!*current)
    return invalid("Skill \"" + name + "\" not found");
  auto where = resolve_in_package(root_, **current, path, false);
  if (!where)
    return where.error();
  // O_NONBLOCK: a FIFO under the name must not hang a worker; it is refused below.
  auto fd = beneath::open(where->package.get(), where->relative, O_RDONLY | O_NONBLOCK, links::inside);
  if (!fd && errno == EXDEV)
    return invalid("path must stay within the skill package root");
  struct stat st{};
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return invalid("Skill file not found: " + where->relative);
  bool too_big = false;
  auto data = beneath::read_limited(fd.get(), limits::text_file_bytes, too_big);
  if (!data)
    return os_error(errno, where->shown);
  if (too_big)
    return invalid("Skill file " + where->relative + " exceeds the 1048576-byte limit");
  if (!valid_utf8(*data))
    return invalid("Skill file " + where->relative + " is not valid UTF-8 text");
  json::writer w;
  w.begin_object();
  skill_ref(w, (*current)->name);
  w.key("path").value(where->relative).key("content").value(universal_newlines(*data));
  w.end_object();
  return w.take();
}

result<std::string> store::write_file(const std::string& name, const std::string& path, const std::string& content) {
  auto current = get(name);
  if (!current)
    return current.error();
  if (!*current)
    return invalid("Skill \"" + name + "\" not found");
  auto where = resolve_in_package(root_, **current, path, false);
  if (!where)
    return where.error();
  if (content.size() > limits::text_file_bytes)
    return invalid("Skill file " + where->relative + " exceeds the 1048576-byte limit");
  auto slash = where->relative.rfind('/');
  if (slash != std::string::npos) {
    auto parent = where->relative.substr(0, slash);
    if (auto e = beneath::make_dirs(where->package.get(), parent, 0755, links::inside); e != 0)
      return e == EXDEV ? invalid("path must stay within the skill package root")
                        : os_error(e, (*current)->package_root + "/" + parent);
  }
  if (auto err = write_text(where->package.get(), where->relative, content, where->shown))
    return err;
  json::writer w;
  w.begin_object();
  skill_ref(w, (*current)->name);
  w.key("path").value(where->relative);
  w.key("bytes_written").value(static_cast<int64_t>(content.size()));
  w.end_object();
  return w.take();
}

result<std::vector<skill>> store::preview_zip(const std::string& zip_path, const std::string& filename,
                                              const std::string& source_subdir, const std::string& target_suffix) {
  unpacked up;
  if (auto err = unpack(zip_path, temp_parent_, "langbot_box_skill_preview_", source_subdir, up))
    return err;
  return preview_candidates(root(), up, filename, target_suffix);
}

result<std::vector<skill>> store::install_zip(const std::string& zip_path, const std::string& filename,
                                              const std::string& source_subdir, const std::string& target_suffix,
                                              const std::vector<std::string>& source_paths,
                                              const std::string& source_path) {
  unpacked up;
  if (auto err = unpack(zip_path, temp_parent_, "langbot_box_skill_upload_", source_subdir, up))
    return err;
  auto t = open_store(root_, true);
  if (!t)
    return t.error();
  auto previews = preview_candidates(t->path, up, filename, target_suffix);
  if (!previews)
    return previews.error();

  std::vector<std::string> wanted;
  for (const auto& p : source_paths) {
    auto n = clean_relative(p);
    if (std::find(wanted.begin(), wanted.end(), n) == wanted.end())
      wanted.push_back(n);
  }
  if (auto legacy = clean_relative(source_path);
      !legacy.empty() && std::find(wanted.begin(), wanted.end(), legacy) == wanted.end())
    wanted.push_back(legacy);
  std::vector<skill> selected;
  if (previews->size() == 1 && wanted.empty()) {
    selected = *previews;
  } else if (wanted.empty()) {
    return invalid("Multiple skills found. Please choose one or more source_paths: " + candidate_list(*previews));
  } else {
    for (const auto& w : wanted) {
      auto it = std::find_if(previews->begin(), previews->end(), [&](const skill& p) { return p.source_path == w; });
      if (it == previews->end())
        return invalid("Invalid source_path \"" + w + "\". Available: " + candidate_list(*previews));
      selected.push_back(*it);
    }
  }

  // Each target is one folder name in the store root (stem, leaf and suffix are single
  // components), created there with mkdirat and filled by descriptor.
  std::vector<std::string> targets;
  for (const auto& p : selected) {
    auto target = basename(p.package_root);
    if (std::find(targets.begin(), targets.end(), target) != targets.end())
      return invalid("Duplicate target directory selected: " + p.package_root);
    struct stat st{};
    if (::fstatat(t->fd.get(), target.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
      return invalid("Skill directory already exists: " + p.package_root);
    if (target.empty() || target == "." || target == ".." || target == trash_name
        || join(t->path, target) != p.package_root)
      return invalid("Archive contains an unsafe path: " + p.package_root);
    targets.push_back(target);
  }
  std::vector<std::string> created;
  const auto undo = [&] {
    for (const auto& dir : created)
      if (auto err = beneath::remove_tree(t->fd.get(), dir))
        spdlog::warn("skills: cannot undo {}: {}", host_path(*t, dir), std::strerror(err.error));
  };
  std::vector<skill> installed;
  for (size_t i = 0; i < selected.size(); ++i) {
    const auto& p = selected[i];
    if (::mkdirat(t->fd.get(), targets[i].c_str(), 0755) != 0) {
      auto err = errno == EEXIST ? invalid("Skill directory already exists: " + p.package_root)
                                 : os_error(errno, p.package_root);
      undo();
      return err;
    }
    created.push_back(targets[i]);
    auto source = beneath::open(up.temp.fd.get(), p.relative_root, O_RDONLY | O_DIRECTORY, links::none);
    unique_fd dest{::openat(t->fd.get(), targets[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)};
    box_error err;
    if (!source || !dest)
      err = os_error(errno, p.package_root);
    else
      err = copy_contents(source.get(), dest.get(), p.package_root);
    if (err) {
      undo();
      return err;
    }
    auto scanned = scan_directory(p.package_root);
    if (!scanned) {
      undo();
      return scanned.error();
    }
    installed.push_back(std::move(*scanned));
  }
  return installed;
}

result<std::string> store::resolve_package_root(const std::string& name) {
  auto valid = validate_name(name);
  if (!valid)
    return valid.error();
  auto current = get(*valid);
  if (!current)
    return current.error();
  if (!*current)
    return invalid("Skill \"" + *valid + "\" not found");
  const auto& rel = (*current)->relative_root;
  auto t = open_store(root_, false);
  struct stat st{};
  if (!t || rel.empty() || rel == "." || !beneath::stat(t->fd.get(), rel, links::none, st) || !S_ISDIR(st.st_mode))
    return invalid("Skill \"" + *valid + "\" package directory is unavailable");
  return (*current)->package_root;
}

} // namespace boxrt::skills
