// The session actor: one per physical session. Its mailbox serializes the command
// stream; blocking backend work runs on the worker pool and comes back as messages.
#pragma once

#include <memory>
#include <string>

#include "actors/actors.hpp"
#include "actors/process_registry.hpp"
#include "backends/backend.hpp"
#include "messages/base/worker_pool.hpp"

namespace boxrt {

/// What a session needs at spawn; none of it travels as a message.
struct session_args {
  backend_ptr backend;
  std::shared_ptr<worker_pool> pool;
  supervisor_actor supervisor;  // receives closing/idle reports
  std::string physical_id;
  std::string logical_id;
  std::string workspace_ns;   // ws-<24 hex>, for the log
  /// The spec of the first use (session_id = physical id), shared with the supervisor.
  std::shared_ptr<const box_spec> spec;
  exec_limits limits;
  int64_t ttl_sec = 300;      // non-persistent sessions only; 0 disables the TTL
  /// Mount policy (allowed roots): the node's settings' own, shared, never copied.
  std::shared_ptr<const local_config> local;
  std::shared_ptr<process_registry> processes;  // null: managed processes unavailable
  int64_t max_managed_processes = 64;           // across every session (§4.7)
  int64_t max_completed_processes = 256;        // exited records kept (per session here)
  int64_t completed_process_retention_sec = 300;
};

/// Spawns a session actor that starts its backend session at once.
session_actor spawn_session(caf::local_actor* parent, session_args args);

} // namespace boxrt
