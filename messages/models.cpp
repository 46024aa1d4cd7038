// Enum names and the small derivations of the protocol models.
#include "messages/models.hpp"

#include <unistd.h>

#include <algorithm>

namespace boxrt {

int64_t resource_bounds::cpus() {
  static const int64_t n = [] {
    auto online = ::sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? static_cast<int64_t>(online) : int64_t{1};
  }();
  return n;
}

std::string_view to_string(network_mode x) noexcept {
  return x == network_mode::on ? "on" : "off";
}

std::string_view to_string(mount_mode x) noexcept {
  switch (x) {
    case mount_mode::none: return "none";
    case mount_mode::ro: return "ro";
    case mount_mode::rw: return "rw";
  }
  return "rw";
}

std::string_view to_string(exec_status x) noexcept {
  return x == exec_status::timed_out ? "timed_out" : "completed";
}

std::string_view to_string(process_status x) noexcept {
  return x == process_status::exited ? "exited" : "running";
}

std::string_view to_string(entitlement_status x) noexcept {
  switch (x) {
    case entitlement_status::active: return "active";
    case entitlement_status::suspended: return "suspended";
    case entitlement_status::cancelled: return "cancelled";
  }
  return "cancelled";
}

bool is_skill_mount(const box_spec& spec, const mount_spec& m) {
  auto prefix = spec.mount_path + "/.skills/";
  if (m.mode == mount_mode::none || !m.mount_path.starts_with(prefix))
    return false;
  auto name = std::string_view{m.mount_path}.substr(prefix.size());
  return !name.empty() && name.find('/') == std::string_view::npos && name != "." && name != "..";
}

bool is_exec_scoped_mount(const box_spec& spec, const mount_spec& m) {
  return is_skill_mount(spec, m) || is_content_addressed(m);
}

std::vector<mount_spec> extra_mount_key(const box_spec& spec) {
  std::vector<mount_spec> key;
  key.reserve(spec.extra_mounts.size());
  for (const auto& m : spec.extra_mounts)
    if (m.mode != mount_mode::none && !is_exec_scoped_mount(spec, m))
      key.push_back(m);
  std::sort(key.begin(), key.end());
  key.erase(std::unique(key.begin(), key.end()), key.end());
  return key;
}

session_info session_info_from_spec(const box_spec& spec) {
  session_info info;
  info.session_id = spec.session_id;
  info.image = spec.image;
  info.network = spec.network;
  info.host_path = spec.host_path;
  info.host_path_mode = spec.host_path_mode;
  info.mount_path = spec.mount_path;
  info.persistent = spec.persistent;
  info.cpus = spec.cpus;
  info.memory_mb = spec.memory_mb;
  info.pids_limit = spec.pids_limit;
  info.read_only_rootfs = spec.read_only_rootfs;
  info.workspace_quota_mb = spec.workspace_quota_mb;
  return info;
}

} // namespace boxrt
