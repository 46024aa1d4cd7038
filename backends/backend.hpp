// The backend interface every sandbox driver implements (backends-and-skills.md §2).
// All methods but `name`, `isolating`, `alive` and `interrupt` block; callers run them
// on the worker pool, never on an actor scheduler thread.
#pragma once

#include <memory>
#include <string>

#include "messages/error.hpp"
#include "messages/models.hpp"

namespace boxrt {

/// One live sandbox, owned by exactly one session actor.
class backend_session {
 public:
  virtual ~backend_session() = default;

  /// Identifies the backend resources (reported as backend_session_id).
  virtual std::string id() const = 0;

  /// Cheap, non-blocking liveness check.
  virtual bool alive() const = 0;

  /// Thread-safe: kills the process tree of a running exec now, and makes every later
  /// exec on this session return at once (the caller interrupts only a session it is
  /// stopping, and its exec job may not have reached the backend yet). The exec call then
  /// returns promptly; its result is discarded by the caller.
  virtual void interrupt() = 0;
};

/// Limits a backend applies to every exec.
struct exec_limits {
  int64_t max_output_bytes = 1048576;
};

class backend {
 public:
  virtual ~backend() = default;

  /// Name used in config, replies and readiness ("bwrap", "scripted", ...).
  virtual std::string name() const = 0;

  /// True only for backends that really isolate (never process or scripted).
  virtual bool isolating() const = 0;

  /// Probes readiness; `strict` runs a throw-away sandbox where the backend can.
  virtual readiness_report probe_readiness(const std::string& workspace_path, bool strict) = 0;

  /// Creates the sandbox of a session.
  virtual result<std::shared_ptr<backend_session>> start_session(const box_spec& spec) = 0;

  /// Runs spec.cmd in the session (workdir created, timeout honoured, output capped).
  virtual result<exec_result> exec(backend_session& session, const box_spec& spec,
                                   const exec_limits& limits) = 0;

  /// Destroys the sandbox; tolerates resources that are already gone.
  virtual void stop_session(backend_session& session) = 0;

  /// Removes what an earlier run of this boxd left behind (own state only).
  virtual void cleanup_orphans() {}
};

using backend_ptr = std::shared_ptr<backend>;

} // namespace boxrt
