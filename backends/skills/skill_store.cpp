// The Workspace-scoped skill store (§11). Packages are mounted into sandboxes, so a
// tenant can change them while the store works: every file operation below the store
// root goes through descriptors resolved beneath it (backends/linux/beneath.hpp), links
// followed only while they stay inside the package. Host paths given by the host (a
// package_root, a scan path) are judged as Python's os.path.realpath judges them, then
// opened beneath the root without following anything.
#include "backends/skills/store_detail.hpp"

namespace boxrt::skills {

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

result<skill> store::existing(const std::string& name) {
  auto found = get(name);
  if (!found)
    return found.error();
  if (!*found)
    return invalid("Skill \"" + name + "\" not found");
  return std::move(**found);
}

result<skill> store::update(const std::string& name, const create_request& req) {
  auto current = existing(name);
  if (!current)
    return current.error();
  const auto& s = *current;
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
  auto current = existing(name);
  if (!current)
    return current.error();
  const auto& rel = current->relative_root;
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
  skill owner;          // the skill named
  tree store;           // the store root
  unique_fd package;    // the package folder
  std::string relative; // normalized relative form, "/"-separated ("." = the package)
  std::string given;    // the stripped request path
  std::string shown;    // its host path, for messages
};

/// The skill called `name` (a validation error when there is none) and `path` inside it,
/// beneath the store at `store_root` (the configured root, as the store opens it).
result<resolved_path> resolve_in_package(store& skills, const std::string& store_root, const std::string& name,
                                         const std::string& path, bool expect_directory) {
  auto current = skills.existing(name);
  if (!current)
    return current.error();
  const skill& s = *current;
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
  out.owner = std::move(*current);
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
  auto where = resolve_in_package(*this, root_, name, path, true);
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
  skill_ref(w, where->owner.name);
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
  auto where = resolve_in_package(*this, root_, name, path, false);
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
  skill_ref(w, where->owner.name);
  w.key("path").value(where->relative).key("content").value(universal_newlines(*data));
  w.end_object();
  return w.take();
}

result<std::string> store::write_file(const std::string& name, const std::string& path, const std::string& content) {
  auto where = resolve_in_package(*this, root_, name, path, false);
  if (!where)
    return where.error();
  if (content.size() > limits::text_file_bytes)
    return invalid("Skill file " + where->relative + " exceeds the 1048576-byte limit");
  auto slash = where->relative.rfind('/');
  if (slash != std::string::npos) {
    auto parent = where->relative.substr(0, slash);
    if (auto e = beneath::make_dirs(where->package.get(), parent, 0755, links::inside); e != 0)
      return e == EXDEV ? invalid("path must stay within the skill package root")
                        : os_error(e, where->owner.package_root + "/" + parent);
  }
  if (auto err = write_text(where->package.get(), where->relative, content, where->shown))
    return err;
  json::writer w;
  w.begin_object();
  skill_ref(w, where->owner.name);
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
  auto current = existing(*valid);
  if (!current)
    return current.error();
  const auto& rel = current->relative_root;
  auto t = open_store(root_, false);
  struct stat st{};
  if (!t || rel.empty() || rel == "." || !beneath::stat(t->fd.get(), rel, links::none, st) || !S_ISDIR(st.st_mode))
    return invalid("Skill \"" + *valid + "\" package directory is unavailable");
  return current->package_root;
}

} // namespace boxrt::skills
