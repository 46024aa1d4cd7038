// The readiness keys a backend reports (backends-and-skills.md §4.1, plus boxrt's
// resource_limits), and a report with every one of them false.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "messages/models.hpp"

namespace boxrt {

/// The readiness keys, each spelled here and nowhere else in product code.
namespace readiness {
inline constexpr const char* cgroup_v2 = "cgroup_v2";
inline constexpr const char* resource_limits = "resource_limits";
inline constexpr const char* namespace_isolation = "namespace_isolation";
inline constexpr const char* mount_isolation = "mount_isolation";
inline constexpr const char* network_isolation = "network_isolation";
inline constexpr const char* hard_workspace_quota = "hard_workspace_quota";
inline constexpr const char* hard_skill_storage_quota = "hard_skill_storage_quota";
/// langbot-plugin 0.7.13's name for hard_skill_storage_quota (the read-only mounts'
/// quota); reported beside it, always with its value (with_aliases).
inline constexpr const char* hard_read_only_mount_quota = "hard_read_only_mount_quota";
inline constexpr const char* bounded_ephemeral_storage = "bounded_ephemeral_storage";
inline constexpr const char* inode_quota = "inode_quota";
/// Whether the backend's I/O limits (blkio) were read back as set (a detail, not a
/// required key).
inline constexpr const char* io_limits = "io_limits";
/// Admission mode's check that a workspace has at most one session.
inline constexpr const char* session_cap = "session_cap";
/// Admission mode's check that managed processes are off (max_managed_processes 0).
inline constexpr const char* managed_process_cap = "managed_process_cap";
/// Text facts (readiness_report::text_details): which nsjail runs, and its version.
inline constexpr const char* nsjail_path = "nsjail_path";
inline constexpr const char* nsjail_version = "nsjail_version";

/// The isolation keys admission mode requires, in the readiness error's order.
inline constexpr std::array<std::string_view, 4> isolation_keys{
  resource_limits, namespace_isolation, mount_isolation, network_isolation,
};

/// The storage keys admission mode requires, in the readiness error's order.
inline constexpr std::array<std::string_view, 4> storage_keys{
  hard_workspace_quota, hard_skill_storage_quota, bounded_ephemeral_storage, inode_quota,
};
} // namespace readiness

/// Every key a backend reports.
inline constexpr std::array<std::string_view, 9> backend_readiness_keys{
  readiness::cgroup_v2,
  readiness::resource_limits,
  readiness::namespace_isolation,
  readiness::mount_isolation,
  readiness::network_isolation,
  readiness::hard_workspace_quota,
  readiness::hard_skill_storage_quota,
  readiness::bounded_ephemeral_storage,
  readiness::inode_quota,
};

/// Adds the keys that newer clients know under another name, with the older key's value.
inline void with_aliases(readiness_report& report) {
  auto it = report.details.find(readiness::hard_skill_storage_quota);
  report.details[readiness::hard_read_only_mount_quota] = it != report.details.end() && it->second;
}

/// A report for `name` whose every readiness key is false.
inline readiness_report unready_report(std::string name, bool available, bool isolating) {
  readiness_report report;
  report.backend_name = std::move(name);
  report.available = available;
  report.isolating = isolating;
  for (auto key : backend_readiness_keys)
    report.details.emplace(std::string{key}, false);
  return report;
}

} // namespace boxrt
