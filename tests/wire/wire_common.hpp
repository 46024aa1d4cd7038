// What several wire suites share: the control token, the scripted boxd configs, the
// tenant context and entitlement snapshots they send, and a connected client.
#pragma once

#include <string>

#include "net/ws/client.hpp"
#include "tests/wire/boxd_process.hpp"

namespace boxrt::test::wire {

inline const std::string token = "wire-test-token-0123456789abcdef0123456789";

/// Admission mode on the scripted backend (which server.testing lets make it ready).
inline const std::string admission_box = R"({
  "backend": "scripted",
  "scripted": {"available": true, "ready_keys": ["cgroup_v2", "resource_limits",
    "namespace_isolation", "mount_isolation", "network_isolation", "hard_workspace_quota",
    "hard_skill_storage_quota", "bounded_ephemeral_storage", "inode_quota"]},
  "local": {"host_root": "box"},
  "admission": {"required": true, "required_backend": "scripted", "max_sessions": 1,
    "max_managed_processes": 0, "max_grant_ttl_sec": 300, "max_timeout_sec": 60,
    "cpus": 0.5, "memory_mb": 256, "pids_limit": 64, "workspace_quota_mb": 32,
    "readiness_cache_sec": 0}})";

/// The same admission policy on real bubblewrap sandboxes (limits, quota image).
inline const std::string admission_bwrap_box = R"({
  "backend": "bwrap",
  "local": {"host_root": "box"},
  "admission": {"required": true, "required_backend": "bwrap", "max_sessions": 1,
    "max_managed_processes": 0, "max_grant_ttl_sec": 300, "max_timeout_sec": 60,
    "cpus": 0.5, "memory_mb": 256, "pids_limit": 64, "workspace_quota_mb": 32,
    "readiness_cache_sec": 0}})";

/// The same admission policy on real nsjail sandboxes (the driver `make build` provides
/// beside boxd), as LangBot's Cloud mode requires it.
inline const std::string admission_nsjail_box = R"({
  "backend": "nsjail",
  "local": {"host_root": "box"},
  "admission": {"required": true, "required_backend": "nsjail", "max_sessions": 1,
    "max_managed_processes": 0, "max_grant_ttl_sec": 300, "max_timeout_sec": 60,
    "cpus": 0.5, "memory_mb": 256, "pids_limit": 64, "workspace_quota_mb": 32,
    "readiness_cache_sec": 0}})";

inline const std::string standard_box = R"({"backend": "scripted", "local": {"host_root": "box"}})";

inline std::string ctx(const std::string& ws, int gen = 1) {
  return R"({"instance_uuid":"instance-a","workspace_uuid":")" + ws
         + R"(","placement_generation":)" + std::to_string(gen) + "}";
}

inline std::string snapshot(const std::string& ws, int rev, bool eligible) {
  return R"({"instance_uuid":"instance-a","workspace_uuid":")" + ws
         + R"(","entitlement_revision":)" + std::to_string(rev)
         + R"(,"status":"active","not_before":1,"expires_at":4000000000,"features":{"managed_sandbox":)"
         + (eligible ? "true" : "false") + R"(},"limits":{"managed_sandbox_sessions":)"
         + (eligible ? "1" : "0") + "}}";
}

inline net::rpc_client connect(const boxd_process& boxd, const std::string& instance = "instance-a") {
  net::rpc_client c;
  c.connect({boxd.url(), token, instance});
  return c;
}

} // namespace boxrt::test::wire
