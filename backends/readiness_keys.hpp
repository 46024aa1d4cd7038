// The readiness keys a backend reports (backends-and-skills.md §4.1, plus boxrt's
// resource_limits), and a report with every one of them false.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "messages/models.hpp"

namespace boxrt {

inline constexpr std::array<std::string_view, 9> backend_readiness_keys{
  "cgroup_v2",           "resource_limits",          "namespace_isolation",
  "mount_isolation",     "network_isolation",        "hard_workspace_quota",
  "hard_skill_storage_quota", "bounded_ephemeral_storage", "inode_quota",
};

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
