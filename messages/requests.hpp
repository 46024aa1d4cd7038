// Requests and replies exchanged between actors that are not protocol models
// themselves. Plain structs (no CAF); registered in messages/type_ids.hpp.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "messages/error.hpp"
#include "messages/models.hpp"

namespace boxrt {

/// box_exec / box_create_session. A decode failure still travels so that
/// admission-mode forged-field rules (checked on the raw payload) can win over it.
struct exec_request {
  action_context ctx;
  box_spec spec;
  payload_facts facts;
  box_error decode_error;
};

/// box_get_session / box_delete_session. `session_id` is the value as sent.
struct session_request {
  action_context ctx;
  std::string session_id;
  box_error decode_error;
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
};

/// Instance-level settings pushed from the directory to every workspace supervisor.
struct instance_settings {
  box_config config;
  std::string trusted_instance;
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
};

/// Reply of box_health / box_get_backend_info / readiness.
struct health_info {
  instance_settings settings;
  int64_t sessions = 0;
  int64_t workspaces = 0;
};

} // namespace boxrt
