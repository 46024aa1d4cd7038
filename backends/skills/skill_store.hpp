// The Workspace-scoped skill store (backends-and-skills.md §11): skill packages on
// disk, SKILL.md frontmatter, file access inside a package and zip uploads. Blocking
// filesystem code: callers run it on a worker pool, one operation at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "messages/error.hpp"

namespace boxrt::skills {

/// One skill package as the store reports it.
struct skill {
  std::string name;
  std::string display_name;
  std::string description;
  std::string instructions;
  std::string package_root;
  std::string entry_file;
  bool python_project = false;
  std::string created_at;
  std::string updated_at;
  /// Archive-relative directory; set only for zip previews.
  std::string source_path;
  bool has_source_path = false;
  /// The package folder below the tree it was found in (the store root, or an upload's
  /// temp folder for previews), "/"-separated and free of links: what the store opens
  /// it by. Never part of a reply.
  std::string relative_root;
};

/// Renders the public fields (+ `source_path` when set) as a JSON object.
std::string to_json(const skill& s);

/// Renders `{"skills": [...]}`.
std::string to_json(const std::vector<skill>& skills);

/// A request text field: nullopt = key missing, inner nullopt = JSON null.
using text_field = std::optional<std::optional<std::string>>;

/// The `skill` object of box_create_skill / box_update_skill.
struct create_request {
  std::string name;
  text_field display_name;
  text_field description;
  text_field instructions;
  std::string package_root;
};

/// The store's fixed limits (not per-tenant configurable).
namespace limits {
inline constexpr uint64_t text_file_bytes = 1'048'576;
inline constexpr uint64_t listing_text_bytes = 16ull << 20;
inline constexpr size_t discovery_entries = 10'000;
inline constexpr size_t discovery_packages = 1'000;
inline constexpr size_t directory_entries = 10'000;
inline constexpr int64_t max_list_entries = 1'000;
inline constexpr size_t name_chars = 64;
} // namespace limits

/// "<skills_root>/tenants/<ns>"; `ns` must be non-empty, hold no `/` or `\` and not be
/// `.`/`..` (ValueError "Invalid Box skill namespace").
result<std::string> scoped_root(std::string_view skills_root, std::string_view ns);

/// Strips and checks a skill name (§11.4); returns the stripped name. Letters and digits
/// are judged by iswalnum under the C.UTF-8 locale (Unicode letters and decimal digits
/// of every script pass; unlike Python, superscripts and vulgar fractions do not).
result<std::string> validate_name(std::string_view name);

/// Splits SKILL.md text into frontmatter and instructions (§11.3). A YAML syntax error
/// is an error; a non-mapping block gives no metadata. Only the three known keys are
/// returned, as Python would render them with str(); a key whose value is falsy
/// (null, false, 0, "") is absent.
struct frontmatter {
  std::optional<std::string> name;
  std::optional<std::string> display_name;
  std::optional<std::string> description;
  std::string instructions;
};
result<frontmatter> parse_frontmatter(std::string_view content);

/// Builds SKILL.md text: name, display_name, description (blank ones dropped) as a
/// block YAML mapping between `---` lines, a blank line, then the instructions.
std::string build_skill_md(const std::vector<std::pair<std::string, std::string>>& fields,
                           std::string_view instructions);

/// A skill store whose root is a Workspace-scoped directory.
class store {
 public:
  /// `root` is `<skills_root>/tenants/ws-<24hex>`; `temp_parent` is where zip uploads are
  /// unpacked (empty: the system temp directory).
  explicit store(std::string root, std::string temp_parent = {});

  /// All packages under the root (depth 6), most recently modified first.
  result<std::vector<skill>> list();

  /// The first listed skill called `name`, or nullopt.
  result<std::optional<skill>> get(const std::string& name);

  /// The skill called `name`; a validation error `Skill "<name>" not found` when none is.
  result<skill> existing(const std::string& name);

  /// Creates a managed skill or registers a package already inside the root.
  result<skill> create(const create_request& req);

  /// Rewrites SKILL.md of an existing skill (no renames, no package moves).
  result<skill> update(const std::string& name, const create_request& req);

  /// Removes the top-level directory holding the skill; returns the name. The folder
  /// leaves the store in one rename before the reply, then is removed (what a sandbox
  /// still holds open is removed at the next removal).
  result<std::string> remove(const std::string& name);

  /// Loads the single package at or below `path` (depth 2); writes nothing.
  result<skill> scan_directory(const std::string& path);

  /// Reply data of box_list_skill_files.
  result<std::string> list_files(const std::string& name, const std::string& path = ".",
                                 bool include_hidden = false, int64_t max_entries = 200);

  /// Reply data of box_read_skill_file.
  result<std::string> read_file(const std::string& name, const std::string& path);

  /// Reply data of box_write_skill_file.
  result<std::string> write_file(const std::string& name, const std::string& path,
                                 const std::string& content);

  /// Lists the packages of an uploaded archive with their planned targets.
  result<std::vector<skill>> preview_zip(const std::string& zip_path,
                                         const std::string& filename = "skill.zip",
                                         const std::string& source_subdir = "",
                                         const std::string& target_suffix = "upload");

  /// Installs the selected packages of an uploaded archive; all or nothing.
  result<std::vector<skill>> install_zip(const std::string& zip_path,
                                         const std::string& filename = "skill.zip",
                                         const std::string& source_subdir = "",
                                         const std::string& target_suffix = "upload",
                                         const std::vector<std::string>& source_paths = {},
                                         const std::string& source_path = "");

  /// The host directory to mount read-only at /workspace/.skills/<name>.
  result<std::string> resolve_package_root(const std::string& name);

  /// The resolved root.
  std::string root() const;

 private:
  /// Removes what earlier removals parked in the store's trash; logs what stays.
  void purge_trash();

  std::string root_;
  std::string temp_parent_;
  bool trash_checked_ = false;
};

} // namespace boxrt::skills
