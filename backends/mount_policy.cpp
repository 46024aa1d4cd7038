#include "backends/mount_policy.hpp"

#include <climits>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace boxrt {

namespace {

namespace fs = std::filesystem;

/// Resolves symlinks of the longest existing prefix, then appends the rest lexically.
std::string resolve(const std::string& path) {
  std::error_code err;
  fs::path p = fs::path{path}.lexically_normal();
  fs::path existing = p;
  fs::path rest;
  while (!existing.empty() && !fs::exists(existing, err)) {
    rest = existing.filename() / rest;
    existing = existing.parent_path();
  }
  auto canon = fs::canonical(existing.empty() ? fs::path{"/"} : existing, err);
  if (err)
    canon = existing;
  auto out = (canon / rest).lexically_normal().string();
  if (out.size() > 1 && out.back() == '/')
    out.pop_back();
  return out;
}

bool under(const std::string& path, const std::string& root) {
  if (root == "/")
    return true;
  return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0
                          && path[root.size()] == '/');
}

const char* const denied[] = {"/etc", "/proc", "/sys", "/dev", "/root", "/boot", "/run",
                              "/var/run", "/run/docker.sock", "/var/run/docker.sock"};

box_error check_one(const std::string& field, const std::string& raw, const local_config& local) {
  auto path = resolve(raw);
  if (path == "/")
    return blocked_for_security(field, raw);
  for (auto d : denied)
    if (under(path, d))
      return blocked_for_security(field, raw);
  if (local.allowed_mount_roots.empty())
    return {ec::validation, field + " mounting is disabled because no allowed_mount_roots are configured"};
  std::string joined;
  for (auto& r : local.allowed_mount_roots) {
    if (under(path, resolve(r)))
      return {};
    if (!joined.empty())
      joined += ", ";
    joined += r;
  }
  return {ec::validation, field + " is outside allowed_mount_roots: " + joined};
}

std::string absolute(const std::string& p) {
  std::error_code err;
  auto out = fs::absolute(fs::path{p}, err);
  return (err ? fs::path{p} : out).lexically_normal().string();
}

// -- the fence between workspaces ------------------------------------------------------
// Judged on paths as text first, so that a path the fence keeps out is refused the same
// way whether it exists or not; links are then followed one component at a time, each
// prefix judged before it is looked at.

/// `p` absolute and lexically normal, without a trailing slash.
std::string normal(const std::string& p) {
  auto out = absolute(p);
  while (out.size() > 1 && out.back() == '/')
    out.pop_back();
  return out;
}

std::vector<std::string> components(const std::string& path) {
  std::vector<std::string> out;
  for (auto& c : fs::path{path})
    if (auto s = c.string(); !s.empty() && s != "/")
      out.push_back(std::move(s));
  return out;
}

std::string parent_of(const std::string& path) {
  auto at = path.rfind('/');
  return at == 0 || at == std::string::npos ? std::string{"/"} : path.substr(0, at);
}

/// `ws-` and 24 lowercase hex digits: a workspace namespace (messages/tenancy).
bool is_workspace_name(std::string_view c) {
  return c.size() == 27 && c.starts_with("ws-")
         && c.substr(3).find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

/// True when `path` lies inside (or is) another workspace's tree: a folder of the
/// workspace tenants folder, or a `tenants/ws-<hex>` folder anywhere, of another
/// namespace, that does not hold the requester's own tree.
bool inside_other_workspace(const std::string& path, const mount_fence& f) {
  auto comps = components(path);
  std::string prefix;
  for (size_t i = 0; i + 1 < comps.size(); ++i) {
    prefix += "/" + comps[i];
    if (comps[i] != "tenants")
      continue;
    const auto& name = comps[i + 1];
    if (prefix != f.workspace_tenants && !is_workspace_name(name))
      continue;
    auto tree = prefix + "/" + name;
    if (name != f.own_ns && !(!f.own_tree.empty() && under(f.own_tree, tree)))
      return true;
  }
  return false;
}

bool inside_sealed(const std::string& path, const mount_fence& f) {
  for (auto& s : f.sealed)
    if (under(path, s))
      return true;
  return false;
}

/// Every rule of the fence for a whole source or manifest path.
bool fenced(const std::string& path, const mount_fence& f) {
  if (inside_sealed(path, f) || inside_other_workspace(path, f))
    return true;
  for (auto& s : f.sealed)
    if (under(s, path))
      return true; // holds boxd's state or the transfer folder
  if (!f.workspace_tenants.empty() && under(f.workspace_tenants, path))
    return true; // is or holds the workspace tenants folder
  auto comps = components(path);
  return !comps.empty() && comps.back() == "tenants"; // a tenants folder itself
}

/// Follows the links of `path` one component at a time, as realpath does (a missing
/// remainder kept as text), judging each prefix before it is looked at; false when the
/// fence refuses a prefix or the result, or the links loop.
bool follow(const std::string& path, const mount_fence& f, std::string& out) {
  std::deque<std::string> todo;
  for (auto& c : components(path))
    todo.push_back(c);
  std::string cur = "/";
  int links = 0;
  while (!todo.empty()) {
    auto name = std::move(todo.front());
    todo.pop_front();
    if (name == ".")
      continue;
    if (name == "..") {
      cur = parent_of(cur);
      continue;
    }
    auto next = cur == "/" ? "/" + name : cur + "/" + name;
    if (inside_sealed(next, f) || inside_other_workspace(next, f))
      return false;
    struct stat st{};
    if (::lstat(next.c_str(), &st) != 0) {
      for (auto& rest : todo)
        next += "/" + rest;
      out = normal(next);
      return !fenced(out, f);
    }
    if (S_ISLNK(st.st_mode)) {
      if (++links > 40)
        return false;
      std::error_code err;
      auto target = fs::read_symlink(next, err);
      if (err)
        return false;
      auto parts = components(target.string());
      todo.insert(todo.begin(), parts.begin(), parts.end());
      if (target.is_absolute())
        cur = "/";
      continue;
    }
    cur = std::move(next);
  }
  out = cur;
  return !fenced(out, f);
}

/// LangBot 4.11's immutable revision of workspace `f.own_ns` with digest `hex`, outside
/// every workspace tree (the requester's own is tenant-writable) and the fence.
bool is_published_revision(const std::string& path, const std::string& hex, const mount_fence& f) {
  auto comps = components(path);
  const std::string tail[] = {"tenants", f.own_ns, ".langbot-skill-store", "revisions", hex, "package"};
  if (f.own_ns.empty() || comps.size() < std::size(tail))
    return false;
  for (size_t i = 0; i < std::size(tail); ++i)
    if (comps[comps.size() - std::size(tail) + i] != tail[i])
      return false;
  if (!f.workspace_tenants.empty() && under(path, f.workspace_tenants))
    return false;
  return !fenced(path, f);
}

} // namespace

mount_fence make_mount_fence(const local_config& resolved, std::string own_ns, const std::string& own_tree,
                             const std::string& transfer_dir) {
  mount_fence f;
  f.own_ns = std::move(own_ns);
  if (!own_tree.empty())
    f.own_tree = resolve(absolute(own_tree));
  if (!resolved.default_workspace.empty())
    f.workspace_tenants = resolved.default_workspace + "/tenants";
  if (!resolved.host_root.empty()) {
    f.sealed.push_back(state_dir_of(resolved));
    f.sealed.push_back(cluster_images_dir_of(resolved));
  }
  if (!transfer_dir.empty())
    f.sealed.push_back(resolve(absolute(transfer_dir)));
  return f;
}

local_config resolve_local(const local_config& in) {
  local_config out = in;
  if (!in.host_root.empty())
    out.host_root = resolve(absolute(in.host_root));
  if (in.default_workspace.empty()) {
    if (!out.host_root.empty())
      out.default_workspace = out.host_root + "/default";
  } else if (in.default_workspace.front() != '/' && !out.host_root.empty()) {
    out.default_workspace = resolve(out.host_root + "/" + in.default_workspace);
  } else {
    out.default_workspace = resolve(absolute(in.default_workspace));
  }
  out.allowed_mount_roots.clear();
  for (auto& r : in.allowed_mount_roots)
    if (!r.empty())
      out.allowed_mount_roots.push_back(resolve(absolute(r)));
  if (out.allowed_mount_roots.empty() && !out.host_root.empty())
    out.allowed_mount_roots.push_back(out.host_root);
  auto base = out.host_root.empty() ? absolute(default_host_root) : out.host_root;
  auto skills = in.skills_root.empty() ? std::string{"skills"} : in.skills_root;
  out.skills_root = skills.front() == '/' ? resolve(skills) : resolve(base + "/" + skills);
  return out;
}

box_error check_spec_mounts(const box_spec& spec, const local_config& local, const mount_fence* fence) {
  // Another workspace's tree, as written or as its links resolve.
  auto others = [&](const std::string& field, const std::string& raw) -> box_error {
    if (fence && (inside_other_workspace(normal(raw), *fence) || inside_other_workspace(resolve(raw), *fence)))
      return blocked_for_security(field, raw);
    return {};
  };
  if (!spec.host_path.empty() && spec.host_path_mode != mount_mode::none)
    if (auto err = check_one("host_path", spec.host_path, local))
      return err;
  for (size_t i = 0; i < spec.extra_mounts.size(); ++i) {
    const auto& m = spec.extra_mounts[i];
    if (m.mode == mount_mode::none || m.runtime_owned)
      continue;
    auto source = "extra_mounts[" + std::to_string(i) + "].host_path";
    if (auto err = check_one(source, m.host_path, local))
      return err;
    if (auto err = others(source, m.host_path))
      return err;
    // A content-addressed mount names its manifest: it lies under the same roots and
    // exists (the tree is not verified against it, as the reference's nsjail backend).
    if (!m.manifest_path.empty()) {
      auto field = "extra_mounts[" + std::to_string(i) + "].manifest_path";
      if (auto err = check_one(field, m.manifest_path, local))
        return err;
      if (auto err = others(field, m.manifest_path))
        return err;
      std::error_code err;
      if (!fs::is_regular_file(resolve(m.manifest_path), err))
        return {ec::validation, field + " " + m.manifest_path + " is not a file"};
    }
  }
  return {};
}

result<std::vector<mount_spec>> admit_read_only_mounts(const std::vector<mount_spec>& mounts,
                                                       const std::vector<std::string>& roots,
                                                       const mount_fence& fence) {
  auto refuse = [](const char* text) { return box_error{ec::admission, text}; };
  if (mounts.size() > max_admitted_read_only_mounts)
    return refuse("Managed sandbox accepts at most 256 read-only mounts");
  if (mounts.empty())
    return mounts;
  if (roots.empty())
    return refuse("Managed sandbox read-only mounts require allowed_mount_roots");
  auto inside = [&](const std::string& path) {
    for (auto& r : roots)
      if (under(path, r))
        return true;
    return false;
  };
  // Symlinks followed all the way, as Path.resolve(); "" when the path cannot be.
  auto real = [](const std::string& path) -> std::string {
    char buf[PATH_MAX];
    return ::realpath(path.c_str(), buf) ? std::string{buf} : std::string{};
  };
  std::vector<mount_spec> out;
  out.reserve(mounts.size());
  std::set<std::string> targets;
  for (const auto& m : mounts) {
    if (m.mode != mount_mode::ro)
      return refuse("Managed sandbox additional mounts must be read-only");
    // The fence before anything is looked at: as written, then as its links lead, then
    // (below) as realpath finds it, should a link have changed in between.
    const bool addressed = is_content_addressed(m);
    const auto hex = addressed ? m.content_digest.substr(7) : std::string{};
    auto admissible = [&](const std::string& path) {
      return addressed ? is_published_revision(path, hex, fence) : !fenced(path, fence);
    };
    const auto written = normal(m.host_path);
    std::string walked;
    if (!admissible(written) || !follow(written, fence, walked) || !admissible(walked))
      return refuse(foreign_mount_text);
    std::error_code err;
    auto source = real(m.host_path);
    if (source.empty() || !fs::is_directory(source, err))
      return refuse("Managed sandbox read-only mount source is unavailable");
    if (!admissible(source))
      return refuse(foreign_mount_text);
    if (!inside(source))
      return refuse("Managed sandbox read-only mount source is outside allowed_mount_roots");
    std::string manifest;
    if (!m.manifest_path.empty()) {
      if (m.content_digest.empty())
        return refuse("Managed sandbox mount manifests require content_digest");
      // A revision's manifest is its sibling manifest.json, nothing else.
      const auto sibling = [](const std::string& package) { return parent_of(package) + "/manifest.json"; };
      const auto named = normal(m.manifest_path);
      std::string manifest_walked;
      bool allowed = addressed ? named == sibling(written) && follow(named, fence, manifest_walked)
                                   && manifest_walked == sibling(walked)
                               : !fenced(named, fence) && follow(named, fence, manifest_walked);
      if (!allowed)
        return refuse(foreign_mount_text);
      manifest = real(m.manifest_path);
      if (manifest.empty() || !fs::is_regular_file(manifest, err))
        return refuse("Managed sandbox read-only mount manifest is unavailable");
      if (addressed ? manifest != sibling(source) : fenced(manifest, fence))
        return refuse(foreign_mount_text);
      if (!inside(manifest))
        return refuse("Managed sandbox read-only mount manifest is outside allowed_mount_roots");
    }
    if (!is_content_addressed(m) && !m.mount_path.starts_with("/workspace/"))
      return refuse("Managed sandbox additional mount targets must stay under /workspace");
    if (!targets.insert(m.mount_path).second)
      return refuse("Managed sandbox additional mount targets must be unique");
    auto admitted = m;
    admitted.host_path = std::move(source);
    admitted.manifest_path = std::move(manifest);
    out.push_back(std::move(admitted));
  }
  return out;
}

std::string check_managed_workspace_root(const box_config& config) {
  const auto& local = config.local;
  if (local.default_workspace.empty())
    return "Managed sandbox admission requires box.local.default_workspace";
  auto root = resolve(local.default_workspace);
  bool inside = false;
  for (auto& r : local.allowed_mount_roots)
    inside = inside || under(root, resolve(r));
  if (!inside)
    return "Managed sandbox workspace is outside box.local.allowed_mount_roots";
  std::error_code err;
  if (!fs::is_directory(root, err))
    return "Managed sandbox workspace path is not a directory";
  if (::access(root.c_str(), R_OK | W_OK | X_OK) != 0)
    return "Managed sandbox workspace path is not writable";
  return {};
}

box_error ensure_default_workspace(const local_config& local) {
  const auto& path = local.default_workspace;
  if (path.empty())
    return {};
  std::error_code err;
  if (fs::is_directory(path, err))
    return {};
  if (fs::exists(path, err))
    return {ec::validation,
            "box.local.default_workspace must point to a directory on the Box runtime host"};
  if (local.allowed_mount_roots.empty())
    return {ec::validation, "box.local.default_workspace cannot be created because no "
                            "allowed_mount_roots are configured"};
  for (const auto& root : local.allowed_mount_roots) {
    if (!under(path, root))
      continue;
    fs::create_directories(path, err);
    if (err && !fs::is_directory(path))
      return {ec::validation,
              "box.local.default_workspace cannot be created: " + err.message()};
    return {};
  }
  std::string joined;
  for (const auto& root : local.allowed_mount_roots) {
    if (!joined.empty())
      joined += ", ";
    joined += root;
  }
  return {ec::validation, "box.local.default_workspace is outside allowed_mount_roots: " + joined};
}

} // namespace boxrt
