// Internal to backends/skills/: the Python behaviour the store reproduces (str,
// os.path, PyYAML scalars) and the package helpers that the store's methods
// (skill_store.cpp), frontmatter and JSON (frontmatter.cpp), package discovery and
// uploads (packages.cpp) share.
#pragma once

#include "backends/skills/skill_store.hpp"

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
#include "backends/linux/session_dir.hpp"
#include "backends/skills/skill_zip.hpp"
#include "messages/base/pytext.hpp"
#include "messages/base/json.hpp"
#include "messages/time.hpp"

namespace boxrt::skills {

namespace fs = std::filesystem;

namespace detail {

box_error invalid(std::string text);

/// Python's OSError text: "[Errno 2] No such file or directory: '<path>'".
box_error os_error(int err, const std::string& path);

// --- UTF-8 and Python str semantics -------------------------------------------------

using py::bad_code_point;
using py::decode_utf8;
using py::valid_utf8;
using py::code_points;

/// Letters and digits of every script, via iswalnum in the C.UTF-8 locale (glibc's
/// full Unicode table); ASCII only if that locale is missing.
bool is_alnum(char32_t cp);

/// Python's str.strip(chars) for ASCII `chars`.
std::string_view strip_chars(std::string_view s, std::string_view chars);

/// Text mode reading with universal newlines: "\r\n" and "\r" become "\n".
std::string universal_newlines(std::string_view s);

/// Python's str.splitlines(keepends=True) on text without "\r".
std::vector<std::string_view> split_lines(std::string_view s);

/// "[A-Za-z0-9_-]+" per code point, everything else replaced by `-` (zip targets).
std::string safe_target_chars(std::string_view s);

// --- paths -------------------------------------------------------------------------

std::string cwd();

/// Python's os.path.abspath.
std::string abspath(std::string_view p);

std::string join(const std::string& a, std::string_view b);

std::string dirname(const std::string& p);

std::string basename(std::string_view p);

/// posixpath._joinrealpath (non-strict): resolves every symlink, dangling ones too.
std::string join_realpath(std::string path, std::string_view rest,
                          std::map<std::string, std::optional<std::string>>& seen,
                          bool& ok);

/// Python's os.path.realpath(os.path.abspath(p)).
std::string realpath_py(std::string_view p);

/// True when `p` equals `root` or lies below it.
bool within(const std::string& root, const std::string& p);

int64_t epoch_us(const struct timespec& ts);

// --- YAML frontmatter --------------------------------------------------------------

enum class plain_kind { string, null, true_, false_, integer, number };

/// How PyYAML's safe_load (YAML 1.1) resolves an untagged plain scalar, as far as
/// str() of the result matters here.
plain_kind classify_plain(const std::string& v);

/// str(value) of a frontmatter value, or nullopt when Python would find it falsy.
std::optional<std::string> python_str(const YAML::Node& node);

// --- packages ----------------------------------------------------------------------

using beneath::links;

/// An open tree: the store's root or an upload's private temp folder. Every path
/// below it is resolved beneath `fd`; `path` only names things in replies.
struct tree {
  unique_fd fd;
  std::string path;
};

/// The host path of `rel` below `t` ("." = the root itself).
std::string host_path(const tree& t, std::string_view rel);

/// `rel` joined below `base` (both relative, "." = none).
std::string rel_join(std::string_view base, std::string_view name);

/// Name of the folder in the store root where removed packages wait to be deleted
/// (never listed: discovery skips it).
inline constexpr std::string_view trash_name = ".boxrt-trash";

/// A package found by discovery: its folder below the tree and its entry file.
struct found_package {
  std::string rel;
  std::string entry;
  /// The entry is a link that leaves the package: loading it fails.
  bool entry_escapes = false;
};

/// The entry file of the folder `rel` (§11.2): SKILL.md or skill.md, a regular file
/// once in-package links are followed, as os.path.isfile sees it.
std::optional<found_package> find_entry(const tree& t, int dir, const std::string& rel);

/// Breadth-first discovery (§11.2) from the folder `start` below `t`; directory
/// symlinks are never followed: each level is opened beneath the tree with none.
result<std::vector<found_package>> discover(const tree& t, const std::string& start, int max_depth);

/// Whether `name` is a regular file (or, for `.venv`, a folder) in the package once
/// in-package links are followed.
bool has_marker(int pkg, const char* name, bool want_dir);

/// Loads one package (§11.3); any failure is an error the listing skips.
result<skill> load_package(const tree& t, const found_package& found);

/// Writes `content` as the regular file `rel` below the folder `dir` (in-package links
/// followed, as Python's open(path, "w") follows them inside the package).
box_error write_text(int dir, const std::string& rel, std::string_view content, const std::string& shown);

box_error write_skill_md(const tree& t, const std::string& rel, const std::string& name,
                         const std::optional<std::string>& display_name,
                         const std::optional<std::string>& description, const std::string& instructions);

/// The folder below `t` that the host path `p` names, as the reference judges it:
/// os.path.realpath, then containment in the tree. The folder is then opened beneath
/// the tree without following any link, so a link swapped in afterwards fails the
/// open instead of redirecting it. nullopt: `p` lies outside; "" rel: the root.
std::optional<std::string> relative_in(const tree& t, const std::string& p);

/// Python's os.path.splitext(...)[0] of a basename.
std::string strip_extension(const std::string& base);

std::string target_stem(const std::string& filename);

/// `raw` trimmed, backslashes as slashes, outer slashes stripped.
std::string clean_relative(std::string_view raw);

/// Opens an uploaded file: the folder it lies in is opened by its host path (a folder
/// boxd made), the file beneath it with no link followed. nullopt with errno.
std::optional<unique_fd> open_upload(const std::string& zip_path);

/// Reads an uploaded archive, refusing empty and oversized files before reading.
result<std::string> read_upload(const std::string& zip_path);

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
                 const std::string& source_subdir, unpacked& out);

result<std::vector<skill>> preview_candidates(const std::string& store_root, const unpacked& up,
                                              const std::string& filename, const std::string& target_suffix);

std::string candidate_list(const std::vector<skill>& previews);

/// Copies the regular files and folders below `from` into the empty folder `to`
/// (anything else is skipped), descriptor by descriptor, never following a link.
box_error copy_contents(int from, int to, const std::string& shown);

} // namespace detail

using namespace detail;

} // namespace boxrt::skills
