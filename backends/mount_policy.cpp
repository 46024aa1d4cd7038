#include "backends/mount_policy.hpp"

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <set>
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
    return {ec::validation, field + " " + raw + " is blocked for security"};
  for (auto d : denied)
    if (under(path, d))
      return {ec::validation, field + " " + raw + " is blocked for security"};
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

} // namespace

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
  auto base = out.host_root.empty() ? absolute("data/box") : out.host_root;
  auto skills = in.skills_root.empty() ? std::string{"skills"} : in.skills_root;
  out.skills_root = skills.front() == '/' ? resolve(skills) : resolve(base + "/" + skills);
  return out;
}

box_error check_spec_mounts(const box_spec& spec, const local_config& local) {
  if (!spec.host_path.empty() && spec.host_path_mode != mount_mode::none)
    if (auto err = check_one("host_path", spec.host_path, local))
      return err;
  for (size_t i = 0; i < spec.extra_mounts.size(); ++i) {
    const auto& m = spec.extra_mounts[i];
    if (m.mode == mount_mode::none || m.runtime_owned)
      continue;
    if (auto err = check_one("extra_mounts[" + std::to_string(i) + "].host_path", m.host_path, local))
      return err;
    // A content-addressed mount names its manifest: it lies under the same roots and
    // exists (the tree is not verified against it, as the reference's nsjail backend).
    if (!m.manifest_path.empty()) {
      auto field = "extra_mounts[" + std::to_string(i) + "].manifest_path";
      if (auto err = check_one(field, m.manifest_path, local))
        return err;
      std::error_code err;
      if (!fs::is_regular_file(resolve(m.manifest_path), err))
        return {ec::validation, field + " " + m.manifest_path + " is not a file"};
    }
  }
  return {};
}

result<std::vector<mount_spec>> admit_read_only_mounts(const std::vector<mount_spec>& mounts,
                                                       const std::vector<std::string>& roots) {
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
    std::error_code err;
    auto source = real(m.host_path);
    if (source.empty() || !fs::is_directory(source, err))
      return refuse("Managed sandbox read-only mount source is unavailable");
    if (!inside(source))
      return refuse("Managed sandbox read-only mount source is outside allowed_mount_roots");
    std::string manifest;
    if (!m.manifest_path.empty()) {
      if (m.content_digest.empty())
        return refuse("Managed sandbox mount manifests require content_digest");
      manifest = real(m.manifest_path);
      if (manifest.empty() || !fs::is_regular_file(manifest, err))
        return refuse("Managed sandbox read-only mount manifest is unavailable");
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
