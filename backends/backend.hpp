// The backend interface every sandbox driver implements (backends-and-skills.md §2).
// All methods but `name`, `isolating`, `alive` and `interrupt` block; callers run them
// on the worker pool, never on an actor scheduler thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "backends/files/workspace_files.hpp"
#include "backends/stream/exec_sink.hpp"
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

/// One long-running process inside a session's sandbox (a stdio server such as an MCP
/// server; protocol.md §4.7). Thread-safe. Destroying the object SIGKILLs the process if
/// it still runs (no grace); call terminate() first for the orderly stop.
class managed_process {
 public:
  virtual ~managed_process() = default;
  /// Read end of the process's stdout, non-blocking, owned by this object (dup it to keep it).
  virtual int stdout_fd() const = 0;
  /// Writes `data` to the process's stdin (blocking until written or the pipe is gone);
  /// false when stdin is closed.
  virtual bool write_stdin(std::string_view data) = 0;
  /// Exit code once the process has ended (128+signal when killed), nullopt while
  /// running. Non-blocking. A process that ended with its sandbox (session stopped or
  /// interrupted) reports 137.
  virtual std::optional<int64_t> exit_code() = 0;
  /// The rolling stderr preview (§4.7), drained continuously by the backend.
  virtual std::string stderr_preview() const = 0;
  /// Close stdin, SIGTERM, wait up to `grace`, SIGKILL; blocking (worker pool only). Idempotent.
  virtual void terminate(std::chrono::milliseconds grace = std::chrono::seconds{5}) = 0;
};

/// Limits a backend applies to every exec.
struct exec_limits {
  int64_t max_output_bytes = 1048576;
};

/// An exec that reached a session already interrupted (its stop is under way): nothing
/// runs, and the result is 137 "interrupted", as for a command the stop killed.
inline exec_result interrupted_exec(const box_spec& spec, std::string backend_name) {
  exec_result out;
  out.session_id = spec.session_id;
  out.backend_name = std::move(backend_name);
  out.exit_code = 137;
  out.stderr_text = "interrupted";
  return out;
}

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

  /// box_exec_stream: runs spec.cmd as exec() does, its output going through `sink` as
  /// frames (docs/streaming.md). The command ends early when the sink says stop, on the
  /// timeout, or past params.max_output_bytes: TERM, then KILL after
  /// params.stop_grace_ms; the end says which. This default is not live: it runs the
  /// command whole (exec's output cap applies), then frames its output; the sandbox
  /// backend streams as the command writes.
  virtual result<stream_end> exec_stream(backend_session& session, const box_spec& spec,
                                         const exec_limits& limits, const stream_params& params,
                                         exec_sink& sink);

  /// A file action on the session's workspace (docs/files.md), done by the host through
  /// descriptors beneath the workspace root as the workspace's uid (files::run). It runs
  /// beside a command of the session, never behind it. Blocking (worker pool only).
  virtual result<file_result> file_action(backend_session& session, const file_op& op, const files::limits& lim) {
    (void)session;
    (void)op;
    (void)lim;
    return box_error{ec::box_error, "the " + name() + " backend has no file actions"};
  }

  /// Starts `spec.command` with `spec.args` (no shell) as a managed process in the
  /// session's sandbox, `spec.cwd` created first. A command that cannot be executed
  /// still starts: it exits 127 with the reason in its stderr preview, as the
  /// reference's `sh -c 'exec ...'` does. Blocking (worker pool only).
  virtual result<std::shared_ptr<managed_process>> start_managed_process(backend_session& session,
                                                                         const process_spec& spec) {
    (void)session;
    (void)spec;
    return make_box_error(ec::box_error, name() + " backend does not support managed processes");
  }

  /// Destroys the sandbox (and every managed process in it); tolerates resources that
  /// are already gone.
  virtual void stop_session(backend_session& session) = 0;

  /// What the session uses now: CPU time and memory of its cgroup, and the bytes used
  /// on its quota image (statfs, never a walk). -1 where the backend has no such
  /// accounting. Blocking (worker pool only); safe beside a running exec.
  struct usage {
    int64_t cpu_usec = -1;
    int64_t memory_bytes = -1;
    int64_t workspace_bytes = -1;
  };
  virtual usage session_usage(backend_session& session) {
    (void)session;
    return {};
  }

  /// Removes what an earlier run of this boxd left behind (own state only).
  virtual void cleanup_orphans() {}

  /// The runtime shuts down (its sessions are stopped): sandboxes the backend keeps of
  /// its own (the warm pool) are torn down and none is started ahead any more. Blocking.
  virtual void shutdown() {}

  /// A spec this backend could never start (BoxValidationError), judged from the spec
  /// alone: cheap and non-blocking, so the supervisor refuses it before it replaces or
  /// reserves a session. The sandbox backend refuses nested and reserved mount targets.
  virtual box_error check_spec(const box_spec& spec) const {
    (void)spec;
    return {};
  }

  /// Where a workspace's skill store lives, and what keeps that storage ready.
  struct skill_storage {
    std::string root;
    std::shared_ptr<void> hold;  // null: nothing to hold
  };

  /// Makes the skill storage of one workspace ready for the skill store. `dir` is its
  /// place under the skills root (`<skills_root>/tenants/ws-<24 hex>`), where the store
  /// lives unless the backend keeps it elsewhere: the sandbox backend mounts the
  /// workspace's skill-storage quota image in its own state folder, never over a
  /// folder a host may keep files in. Blocking.
  virtual result<skill_storage> acquire_skill_storage(const std::string& dir) {
    return skill_storage{dir, nullptr};
  }
};

using backend_ptr = std::shared_ptr<backend>;

} // namespace boxrt
