// Requests and replies exchanged between actors that are not protocol models
// themselves. Plain structs (no CAF); registered in messages/type_ids.hpp.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <boxrt/messages/error.hpp>
#include <boxrt/messages/models.hpp>

namespace boxrt {

/// box_exec / box_create_session. A decode failure still travels so that
/// admission-mode forged-field rules (checked on the raw payload) can win over it.
struct exec_request {
  action_context ctx;
  box_spec spec;
  payload_facts facts;
  box_error decode_error;
};

/// box_exec_stream: box_exec's request and the server's stream settings.
struct exec_stream_request {
  exec_request exec;
  stream_params params;
};

/// box_get_session / box_delete_session. `session_id` is the value as sent.
struct session_request {
  action_context ctx;
  std::string session_id;
  box_error decode_error;
};

/// A skill action of one workspace (protocol.md §2.4), as the dispatcher decoded its
/// envelope: the action name, its data as JSON text (decoded on the worker pool, never
/// on an actor thread) and, for zip actions, the uploaded file already resolved to a
/// path of the caller's transfer folder.
struct skill_request {
  action_context ctx;
  std::string action;
  std::string data_json = "{}";
  std::string file_path;
  box_error decode_error;
  /// A cluster node forwarding the request to the workspace's owner carries the upload's
  /// bytes here (the file stays on neither node's path); the owner lands them in a file
  /// of its own (docs/cluster.md). Empty otherwise.
  std::string file_bytes;
};

/// What a supervisor hands to its workspace's skill-store actor: the request after the
/// gate, with the admission-mode rules already settled.
struct skill_job {
  std::string action;
  std::string data_json = "{}";
  std::string file_path;
  bool admission = false;
};

/// Outcome of one skill job, posted from the worker pool to the skill-store actor.
struct skill_outcome {
  box_error error;
  std::string data_json;
};

/// Admission mode's read-only extra mounts after the policy (realpaths resolved), or
/// the refusal.
struct mounts_outcome {
  box_error error;
  std::vector<mount_spec> mounts;
};

/// A managed-process action (box_start/get/stop_managed_process) of one workspace.
struct process_request {
  action_context ctx;
  std::string session_id;   // logical
  std::string process_id = "default";
  process_spec spec;        // start only
  box_error decode_error;
};

/// What the stdio relay asks before it upgrades (protocol.md §1.4, checks 4 to 9).
struct relay_request {
  std::string instance_uuid;
  std::string workspace_uuid;
  int64_t generation = 0;
  std::string session_id;   // physical
  std::string process_id = "default";
  /// Attach only: how long to wait for another relay to let go.
  uint64_t attach_wait_ms = 0;
  /// Attach only: the relay is not beside the process (a cluster node whose registry
  /// does not hold it): the session carries the stdio through a pump
  /// (actors/cluster/stdio_pump.hpp).
  bool pump = false;
};

/// The verdict: status 0 = go ahead, else the HTTP status (401, or 400 with the error).
struct relay_verdict {
  int32_t status = 0;
  box_error error;
};

/// Outcome of a managed-process job, posted from the worker pool to the session actor.
struct process_outcome {
  box_error error;
};

/// Outcome of a backend start, posted from the worker pool to the session actor.
struct start_outcome {
  box_error error;
  std::string backend_session_id;
};

/// Outcome of a backend exec, posted from the worker pool to the session actor.
struct exec_outcome {
  box_error error;
  exec_result result;
  /// A streamed exec's end (its result is in here, not in `result`).
  stream_end stream;
};

/// Instance-level settings pushed from the directory to every workspace supervisor.
struct instance_settings {
  box_config config;
  std::string backend_name;
  bool backend_available = false;
  /// Why no backend is usable ("" when one is).
  std::string backend_reason;
  readiness_report backend_report;
  /// Instance readiness (protocol.md §4.9.6): checks in admission mode included.
  bool ready = false;
  bool admission_mode = false;
  std::map<std::string, bool> checks;
  std::string readiness_error;
  /// False until the first background probe finished.
  bool probed = false;
  /// LANGBOT_BOX_ALLOW_UNSAFE_SOFT_STORAGE_LIMITS forced the storage checks true.
  bool unsafe_soft_storage = false;
  /// boxd's transfer folder (`__file_chunk` uploads), which no mount may reach; "" = none.
  std::string transfer_dir;

  friend bool operator==(const instance_settings&, const instance_settings&) = default;
};

/// Reply of box_health / box_get_backend_info / readiness.
struct health_info {
  instance_settings settings;
  int64_t sessions = 0;
  int64_t workspaces = 0;
};

/// The instance and workspace a tenant request is for (views into the request).
struct tenant_scope {
  std::string_view instance;
  std::string_view workspace;
};

inline tenant_scope scope_of(const action_context& c) { return {c.instance_uuid, c.workspace_uuid}; }

/// A request that carries its action context.
template <class Request>
  requires requires(const Request& r) { r.ctx.instance_uuid; }
tenant_scope scope_of(const Request& r) {
  return scope_of(r.ctx);
}

inline tenant_scope scope_of(const exec_stream_request& r) { return scope_of(r.exec.ctx); }

/// A request that names its instance and workspace itself (admission pushes, relays).
template <class Request>
  requires requires(const Request& r) {
    r.instance_uuid;
    r.workspace_uuid;
  }
tenant_scope scope_of(const Request& r) {
  return {r.instance_uuid, r.workspace_uuid};
}

/// What a request of another instance than the trusted one is answered (protocol.md
/// §2.5, the reference's texts): a tenant action's refusal, and each admission push's.
inline box_error untrusted_refusal(const action_context&) {
  return {ec::permission, "Box action context does not match the trusted instance"};
}
template <class Request>
  requires requires(const Request& r) { r.ctx.instance_uuid; }
box_error untrusted_refusal(const Request& r) {
  return untrusted_refusal(r.ctx);
}
inline box_error untrusted_refusal(const exec_stream_request& r) {
  return untrusted_refusal(r.exec.ctx);
}
inline box_error untrusted_refusal(const relay_request&) {
  return untrusted_refusal(action_context{});
}
inline box_error untrusted_refusal(const entitlement_snapshot&) {
  return {ec::entitlement_unavailable, "Entitlement scope does not match the Workspace execution context"};
}
inline box_error untrusted_refusal(const admission_grant&) {
  return {ec::permission, "Sandbox admission grant does not match the trusted instance"};
}
inline box_error untrusted_refusal(const network_policy_request&) {
  return {ec::permission, "Network policy request does not match the trusted instance"};
}
inline box_error untrusted_refusal(const admission_revocation&) {
  return {ec::permission, "Sandbox admission revocation does not match the trusted instance"};
}

} // namespace boxrt
