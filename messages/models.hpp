// Plain structs of the Box protocol (protocol.md §3, admission.md §2) and of the
// replies boxrt adds. No CAF and no JSON library here: codecs live in codec.hpp,
// actor registration in type_ids.hpp.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <boxrt/messages/error.hpp>

namespace boxrt {

inline constexpr const char* default_box_image = "rockchin/langbot-sandbox:latest";
inline constexpr const char* default_mount_path = "/workspace";

/// Microseconds since the Unix epoch, UTC (wall clock).
using epoch_us = int64_t;

enum class network_mode : uint8_t { off, on };
enum class mount_mode : uint8_t { none, ro, rw };
enum class exec_status : uint8_t { completed, timed_out };
enum class process_status : uint8_t { running, exited };
enum class entitlement_status : uint8_t { active, suspended, cancelled };

std::string_view to_string(network_mode x) noexcept;
std::string_view to_string(mount_mode x) noexcept;
std::string_view to_string(exec_status x) noexcept;
std::string_view to_string(process_status x) noexcept;
std::string_view to_string(entitlement_status x) noexcept;

/// Upper bounds of resource values in specs and policies (contract §4.12): anything above
/// is refused before a session starts, so no computation on them can overflow
/// (memory_mb * 2^20, pids_limit + overhead, cpus * period, quota_mb * 2^20).
namespace resource_bounds {
inline constexpr int64_t memory_mb = 1048576;    // 1 TiB
inline constexpr int64_t pids_limit = 4194304;   // the kernel's PID_MAX_LIMIT
inline constexpr int64_t quota_mb = 16777216;    // 16 TiB
/// The number of online CPUs of this host (at least 1).
int64_t cpus();
} // namespace resource_bounds

/// One extra bind mount of a session (BoxMountSpec).
struct mount_spec {
  std::string host_path;
  std::string mount_path;
  mount_mode mode = mount_mode::rw;
  /// langbot-plugin 0.7.13: "sha256:<64 lowercase hex>" of an immutable artifact tree
  /// ("" = none), and the absolute host path of its sha256-tree-v1 manifest ("" = none).
  std::string content_digest{};
  std::string manifest_path{};
  /// Set by boxd only (never decoded): a mount of boxd's own storage, a skill of the
  /// workspace's store, to which the host mount policy does not apply.
  bool runtime_owned = false;

  friend bool operator==(const mount_spec&, const mount_spec&) = default;
  friend auto operator<=>(const mount_spec&, const mount_spec&) = default;
};

/// Where langbot-plugin 0.7.13+ mounts immutable artifacts: `<root>/<64 hex>`.
inline constexpr std::string_view artifact_mount_root = "/opt/langbot-artifacts";

/// A read-only mount of an artifact tree at `<artifact_mount_root>/<its digest's hex>`,
/// with its digest and manifest (0.7.13's `is_content_addressed`).
inline bool is_content_addressed(const mount_spec& m) {
  return m.mode == mount_mode::ro && m.content_digest.size() == 71 && !m.manifest_path.empty()
         && m.mount_path.size() == artifact_mount_root.size() + 65 && m.mount_path.starts_with(artifact_mount_root)
         && m.mount_path[artifact_mount_root.size()] == '/'
         && std::string_view{m.mount_path}.substr(artifact_mount_root.size() + 1)
              == std::string_view{m.content_digest}.substr(7);
}

/// A session/exec request (BoxSpec). Empty `host_path` / `skill_name` mean null.
struct box_spec {
  std::string cmd;
  std::string workdir = default_mount_path;
  int64_t timeout_sec = 30;
  network_mode network = network_mode::off;
  std::string session_id;
  std::map<std::string, std::string> env;
  std::string image = default_box_image;
  std::string host_path;
  mount_mode host_path_mode = mount_mode::rw;
  std::string mount_path = default_mount_path;
  std::vector<mount_spec> extra_mounts;
  std::string skill_name;
  bool persistent = false;
  double cpus = 1.0;
  int64_t memory_mb = 512;
  int64_t pids_limit = 128;
  bool read_only_rootfs = true;
  int64_t workspace_quota_mb = 0;
  /// The workspace a network-on sandbox belongs to (its ws-<24 hex>), whose egress
  /// policy it follows. Set by the session actor just before the sandbox starts; never
  /// on the wire.
  std::string network_scope;

  friend bool operator==(const box_spec&, const box_spec&) = default;
};

/// True for a skill mount: `<mount_path>/.skills/<name>`, one level deep. Sandboxes
/// take those per exec, so they never force a new session (no churn when the skill
/// changes between calls).
bool is_skill_mount(const box_spec& spec, const mount_spec& m);

/// A mount a sandbox takes per exec, never forcing a new session: a skill mount or a
/// content-addressed artifact (langbot-plugin 0.7.13's execution-scoped mounts).
bool is_exec_scoped_mount(const box_spec& spec, const mount_spec& m);

/// The extra mounts whose mode is not none, execution-scoped ones excepted: what a
/// running session cannot change.
std::vector<mount_spec> extra_mount_key(const box_spec& spec);

/// A long-running process to start inside a session (BoxManagedProcessSpec).
struct process_spec {
  std::string process_id = "default";
  std::string command;
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  std::string cwd = default_mount_path;
  int64_t memory_mb = 0;

  friend bool operator==(const process_spec&, const process_spec&) = default;
};

/// A managed process as reported (BoxManagedProcessInfo). exit_code valid when exited.
struct process_info {
  std::string session_id;
  std::string process_id = "default";
  process_status status = process_status::running;
  std::string command;
  std::vector<std::string> args;
  std::string cwd = default_mount_path;
  std::vector<std::string> env_keys;
  bool attached = false;
  epoch_us started_at = 0;
  epoch_us exited_at = 0;
  int64_t exit_code = 0;
  std::string stderr_preview;

  friend bool operator==(const process_info&, const process_info&) = default;
};

/// A session as reported to callers (BoxSessionInfo).
struct session_info {
  std::string session_id;
  std::string backend_name;
  std::string backend_session_id;
  std::string image = default_box_image;
  network_mode network = network_mode::off;
  std::string host_path;
  mount_mode host_path_mode = mount_mode::rw;
  std::string mount_path = default_mount_path;
  bool persistent = false;
  double cpus = 1.0;
  int64_t memory_mb = 512;
  int64_t pids_limit = 128;
  bool read_only_rootfs = true;
  int64_t workspace_quota_mb = 0;
  epoch_us created_at = 0;
  epoch_us last_used_at = 0;
  /// Its managed processes (box_get_session adds them as `managed_processes`, keyed by
  /// process_id, and `managed_process` for "default", when there are any).
  std::vector<process_info> managed_processes;

  friend bool operator==(const session_info&, const session_info&) = default;
};

/// Copies the compat fields of `spec` into a fresh session_info.
session_info session_info_from_spec(const box_spec& spec);

/// Result of one exec (BoxExecutionResult). `exit_code` is meaningless when timed out.
struct exec_result {
  std::string session_id;
  std::string backend_name;
  exec_status status = exec_status::completed;
  int64_t exit_code = 0;
  std::string stdout_text;
  std::string stderr_text;
  int64_t duration_ms = 0;

  friend bool operator==(const exec_result&, const exec_result&) = default;
};


/// A streamed exec's settings (box_exec_stream; docs/streaming.md), the server's, never
/// the tenant's: they travel with the request to the session that runs the command.
struct stream_params {
  /// The connection's own number for the stream (seq ids are the client's).
  uint64_t token = 0;
  /// Frames the session may send before the consumer gives credit back (the SDK's
  /// STREAM_WINDOW for a caller with flow control).
  int64_t credit = 8;
  /// A quiet command gets a keepalive frame after this long (server.stream_keepalive_ms).
  int64_t keepalive_ms = 5000;
  /// Raw output bytes of one data frame; its encoded JSON stays within 1 MiB even when
  /// every byte is escaped as \u00XX.
  int64_t max_chunk_bytes = 128 * 1024;
  /// Both streams together; past it the command is ended (server.max_stream_output_bytes).
  int64_t max_output_bytes = int64_t{1} << 30;
  /// Between the TERM and the KILL that end a cancelled or timed-out command.
  int64_t stop_grace_ms = 2000;

  friend bool operator==(const stream_params&, const stream_params&) = default;
};

/// One frame of a streamed exec: output of `stream` ("stdout", "stderr") as text, its
/// first byte at raw byte `offset` of that stream; or a keepalive ("keepalive", no data).
struct stream_chunk {
  std::string stream;
  std::string data;
  int64_t offset = 0;

  friend bool operator==(const stream_chunk&, const stream_chunk&) = default;
};

/// How a streamed exec ended: box_exec's result (status, exit_code, duration_ms; the
/// output went as frames), why it ended ("exit", "timeout", "cancel", "closed",
/// "output_limit", "stopped"), the raw bytes per stream, and how many frames came first.
struct stream_end {
  exec_result result;
  std::string ended = "exit";
  int64_t stdout_bytes = 0;
  int64_t stderr_bytes = 0;
  int64_t frames = 0;

  friend bool operator==(const stream_end&, const stream_end&) = default;
};

/// The tenant envelope (ActionContext). `entitlement_revision` < 0 means absent.
struct action_context {
  std::string instance_uuid;
  std::string workspace_uuid;
  int64_t placement_generation = 1;
  int64_t entitlement_revision = -1;

  friend bool operator==(const action_context&, const action_context&) = default;
};

/// `box.admission` (SandboxAdmissionPolicy). boxrt allows `required_backend` bwrap or nsjail.
struct admission_policy {
  bool required = false;
  std::string logical_session_id = "global";
  std::string required_backend = "bwrap";
  int64_t max_sessions = 1;
  int64_t max_managed_processes = 0;
  int64_t max_grant_ttl_sec = 300;
  int64_t max_timeout_sec = 120;
  double cpus = 1.0;
  int64_t memory_mb = 512;
  int64_t pids_limit = 128;
  bool read_only_rootfs = true;
  int64_t workspace_quota_mb = 0;
  int64_t readiness_cache_sec = 15;
  /// boxrt: optional JSON file with an array of entitlement snapshots (README §3); "" = none.
  std::string entitlements_file;

  friend bool operator==(const admission_policy&, const admission_policy&) = default;
};

/// A host-pushed or snapshot-derived admission grant (SandboxAdmissionGrant).
struct admission_grant {
  std::string instance_uuid;
  std::string workspace_uuid;
  int64_t execution_generation = 1;
  int64_t entitlement_revision = 1;
  epoch_us expires_at = 0;
  int64_t max_sessions = 0;
  int64_t max_managed_processes = 0;

  friend bool operator==(const admission_grant&, const admission_grant&) = default;
};

/// SandboxAdmissionRevocation.
struct admission_revocation {
  std::string instance_uuid;
  std::string workspace_uuid;
  int64_t entitlement_revision = 1;

  friend bool operator==(const admission_revocation&, const admission_revocation&) = default;
};

/// A workspace entitlement snapshot (admission.md §2.1), parsed strictly.
struct entitlement_snapshot {
  std::string instance_uuid;
  std::string workspace_uuid;
  int64_t entitlement_revision = 1;
  entitlement_status status = entitlement_status::active;
  int64_t not_before = 0;   // epoch seconds
  int64_t expires_at = 0;   // epoch seconds, exclusive
  std::map<std::string, bool> features;
  std::map<std::string, int64_t> limits;
  std::string plan_name;    // empty = absent; display only
  /// LangBot 4.11's billing facts, display only; -1 = absent.
  int64_t subscription_started_at = -1; // >= 0
  int64_t plan_revision = -1;           // >= 1
  int64_t monthly_bonus_credits = -1;   // >= 0
  /// Canonical JSON of the whole snapshot (sorted keys, no spaces): equivocation check.
  std::string fingerprint;

  friend bool operator==(const entitlement_snapshot&, const entitlement_snapshot&) = default;
};

/// Reply of box_put_workspace_entitlement.
struct entitlement_receipt {
  std::string workspace_uuid;
  int64_t entitlement_revision = 0;
  int64_t revoked_sessions = 0;
};

/// box_set_network_policy / box_get_network_policy (docs/network.md): the workspace
/// the request names (its own instance_uuid and workspace_uuid; "" is the workspace of
/// requests without a context).
struct network_policy_request {
  std::string instance_uuid;
  std::string workspace_uuid;
  bool set = false;     // false: read it back
  std::string policy;   // canonical JSON (messages/network_policy.hpp); "" = clear it
  std::string profile;  // or a box.network_profiles name, resolved by the supervisor
};

/// Their reply: the workspace's own policy, the one in force (its own, else the
/// operator's default) and where that comes from (workspace, default or none).
struct network_policy_reply {
  std::string workspace_uuid;
  std::string policy;
  std::string effective;
  std::string source;
};

/// Reply of box_upsert_sandbox_admission_grant.
struct grant_receipt {
  std::string workspace_uuid;
  int64_t execution_generation = 0;
  int64_t entitlement_revision = 0;
  int64_t max_sessions = 0;
  int64_t max_managed_processes = 0;
  epoch_us expires_at = 0;
};

/// Reply of box_revoke_sandbox_admission_grant.
struct revocation_receipt {
  std::string workspace_uuid;
  int64_t entitlement_revision = 0;
};

/// `box.limits`: the reference's limits plus boxrt's own (all validated, all configurable).
struct runtime_limits {
  int64_t max_sessions = 64;                     // 0..5000
  int64_t max_managed_processes = 64;            // 0..1024
  int64_t max_completed_processes = 256;         // 0..10000
  int64_t max_admission_records = 100000;        // 1..250000
  int64_t max_rpc_file_bytes = 20971520;         // 1..104857600
  int64_t completed_process_retention_sec = 300; // 0..86400
  // boxrt additions
  int64_t session_ttl_sec = 300;                 // 0..86400 (0 disables TTL reaping)
  int64_t max_output_bytes = 1048576;            // 1024..16777216 per stream
  int64_t max_timeout_sec = 3600;                // 1..86400, exec timeout ceiling
  int64_t max_sessions_per_workspace = 64;       // 1..5000
  /// Disk I/O caps per session on its quota image's device (0 = none; the default).
  int64_t io_read_bps = 0;                       // 0..2^40
  int64_t io_write_bps = 0;                      // 0..2^40
  int64_t io_read_iops = 0;                      // 0..2^30
  int64_t io_write_iops = 0;                     // 0..2^30
  /// Supervisors of workspaces with nothing to remember (no session, grant, fence or
  /// revision) kept alive for a quick next use; past this the least recently idle one
  /// leaves. Bounds what first uses refused in new workspaces leave behind.
  int64_t max_idle_workspaces = 256;             // 0..250000
  /// Sandboxes (bwrap, nsjail) started ahead, without a workspace, for new workspaces
  /// to adopt at their first use (docs/sandbox.md "Warm pool"); 0 disables.
  int64_t warm_pool = 2;                         // 0..16
  /// How long a request between boxd's actors may take past the action's own time
  /// limit (an exec's timeout_sec; none for other actions) before the action is answered
  /// `BoxRuntimeUnavailableError: <action> timed out inside the runtime`. The wait
  /// includes the time a command queues behind others of its session.
  int64_t action_margin_sec = 300;               // 1..86400

  friend bool operator==(const runtime_limits&, const runtime_limits&) = default;
};

/// `box.local`.
struct local_config {
  std::string host_root;
  std::string default_workspace;
  std::vector<std::string> allowed_mount_roots;
  std::string skills_root;
  int64_t skills_quota_mb = 64;
  /// The nsjail program (boxrt's own key): "" finds `nsjail` beside boxd, then on PATH.
  /// A box_init whose `local` leaves it out keeps the operator's value.
  std::string nsjail_path;

  friend bool operator==(const local_config&, const local_config&) = default;
};

/// The data folder when `box.local.host_root` is not set (relative: boxd's working folder).
inline constexpr const char* default_host_root = "data/box";

/// boxd's data folder layout, in one place: `<host_root>/state` holds boxd's own state
/// (admission, uids, mount records, session folders), `<host_root>/images` a cluster's
/// quota images (on one node they sit in `<state>/images`).
inline std::string host_root_of(const local_config& l) {
  return l.host_root.empty() ? std::string{default_host_root} : l.host_root;
}
inline std::string state_dir_of(const local_config& l) { return host_root_of(l) + "/state"; }
inline std::string cluster_images_dir_of(const local_config& l) { return host_root_of(l) + "/images"; }

/// `box.scripted`: readiness and behaviour of the scripted test backend.
struct scripted_config {
  bool available = true;
  /// Readiness keys reported true (e.g. "namespace_isolation"); the rest are false.
  std::vector<std::string> ready_keys;

  friend bool operator==(const scripted_config&, const scripted_config&) = default;
};

/// `box.network_policy`, `box.network_profiles` and `box.network_egress` (docs/network.md):
/// the egress policy of network-on sandboxes whose workspace has none of its own, the
/// named policies a host may give a workspace, and the filter's resolvers and limits.
/// Policies are kept as their canonical JSON (messages/network_policy.hpp).
struct network_settings {
  std::string default_policy;                    // "" = none: sandboxes go anywhere but the host
  std::map<std::string, std::string> profiles;   // name -> policy
  std::vector<std::string> resolvers;            // upstream DNS; empty = boxd's /etc/resolv.conf
  int64_t max_connections = 256;                 // 1..65536 per sandbox
  int64_t max_connections_total = 2048;          // 1..1048576 across all sandboxes
  int64_t max_lookups = 64;                      // 1..4096 per sandbox
  int64_t header_timeout_ms = 10000;             // 100..300000
  int64_t connect_timeout_ms = 10000;            // 100..300000
  int64_t lookup_timeout_ms = 3000;              // 100..60000

  friend bool operator==(const network_settings&, const network_settings&) = default;
};

/// The whole `box` section (box_init data / LANGBOT_BOX_CONFIG / --config "box").
struct box_config {
  std::string backend;  // "", "auto", "bwrap", "nsjail", "process", "scripted"
  runtime_limits limits;
  local_config local;
  admission_policy admission;
  /// Set when the admission section was malformed: admission then fails closed.
  std::string admission_error;
  scripted_config scripted;
  network_settings network;

  /// Grant-enforced mode: required by policy, or forced by a malformed admission
  /// section (fail closed). The one definition of "is admission mode on".
  bool admission_mode() const noexcept { return admission.required || !admission_error.empty(); }

  friend bool operator==(const box_config&, const box_config&) = default;
};

/// Readiness of the selected backend and the runtime (protocol.md §4.9.6).
struct readiness_report {
  std::string backend_name;
  bool available = false;
  bool isolating = false;
  /// Backend readiness keys (cgroup_v2, namespace_isolation, ...), true only when enforced.
  std::map<std::string, bool> details;
  std::string limits_mechanism;  // cgroup_v2, cgroup_v1, rlimit or ""
  /// Facts of the backend that are text (nsjail_path, nsjail_version), beside `details`.
  std::map<std::string, std::string> text_details;
  std::string error;

  friend bool operator==(const readiness_report&, const readiness_report&) = default;
};

/// Reply of box_status for one placement.
/// What one session uses now (box_status `session_stats`): -1 = unknown. CPU time and
/// memory come from its cgroup, workspace bytes from statfs of its quota image (-1
/// without one: a tenant tree is never walked for this).
struct session_stats {
  std::string session_id;
  std::string backend_name;
  int64_t cpu_usec = -1;
  int64_t memory_bytes = -1;
  int64_t workspace_bytes = -1;

  friend bool operator==(const session_stats&, const session_stats&) = default;
};

/// One session of `box_list_all_sessions` (boxctl ps): whose it is, and what it uses.
struct ps_entry {
  std::string instance_uuid;
  std::string workspace_uuid;
  int64_t generation = 0;
  session_stats stats;
  /// The memory cap of its sandbox (MiB; -1 unknown).
  int64_t memory_mb = -1;
  epoch_us created_at = 0;
  epoch_us last_used_at = 0;

  friend bool operator==(const ps_entry&, const ps_entry&) = default;
};

/// Reply of box_list_all_sessions: this node's sessions, at most the request's limit.
struct ps_report {
  std::vector<ps_entry> sessions;
  int64_t workspaces = 0;
  bool truncated = false;

  friend bool operator==(const ps_report&, const ps_report&) = default;
};

struct status_info {
  std::string backend_name;
  bool backend_available = false;
  int64_t active_sessions = 0;
  int64_t managed_processes = 0;
  int64_t session_ttl_sec = 0;
  runtime_limits limits;
  /// The workspace's session capacity (`capacity` of box_status): `limit` is the cap
  /// that applies to it, `used` its sessions, `remaining` what it may still start,
  /// the instance-wide cap included.
  int64_t capacity_limit = 0;
  int64_t capacity_used = 0;
  int64_t capacity_remaining = 0;
  /// One entry per session of this placement, by session id.
  std::vector<session_stats> sessions;
};

/// One entry of box_get_storage_analysis (langbot-plugin's storage.py shape).
struct storage_entry {
  std::string key;
  std::string path;
  std::string kind;        // "root" (counted in the total) or "detail"
  std::string parent_key;  // "" = none
  std::string scope;       // "runtime_host" or "sandbox_sessions"
  bool exists = false;
  int64_t size_bytes = 0;
  int64_t file_count = 0;
  int64_t error_count = 0;
};

/// box_get_storage_analysis of one workspace: its host folders and, measured inside
/// each of its sandboxes, their /workspace, /root/.cache and /tmp.
struct storage_report {
  std::vector<storage_entry> directories;
  int64_t active_sessions = 0;
  int64_t managed_processes = 0;
};

/// Facts taken from the raw tenant payload before decoding, for the forged-field
/// rules of admission mode (admission.md §4.4). Decoding ignores unknown keys;
/// these facts keep what admission must still see.
struct payload_facts {
  /// Host-controlled keys present (plan, subscription, ...), sorted.
  std::vector<std::string> host_controlled_keys;
  bool has_session_id = false;
  std::string session_id;         // stripped raw value when it is a string
  bool network_not_off = false;   // network present and not missing/null/""/"off"
  std::string mount_path;         // raw stripped value; "" when missing/null
  std::string host_path;          // raw stripped value; "" when missing/null
  bool timeout_not_int = false;   // timeout_sec present and not a non-bool integer

  friend bool operator==(const payload_facts&, const payload_facts&) = default;
};

} // namespace boxrt
