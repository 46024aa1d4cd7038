// The scripted test backend: records what it was asked to do, and runs a tiny command
// language so tests can script delays, failures, timeouts and deaths. It isolates
// nothing and never says otherwise; it exists for actor and admission tests and for
// benchmarks of the actor core (it takes the same worker-pool path as real backends).
//
// Command language of exec (spec.cmd):
//   echo <text>   stdout <text>, exit 0
//   fail <n>      exit code n, stderr "failed"
//   gate <name>   blocks until release_gate(name) or the session is interrupted
//   timeout       status timed_out, stderr "Command timed out after <t> seconds."
//   die           the session reports alive() == false afterwards, exit 1
//   timeout_sec   stdout = the exec's timeout_sec (what reached the backend)
//   bytes <n>     stdout = n bytes of 'x' (clipped to the output limit), exit 0
//   anything else stdout = the command, exit 0 (zero cost)
//
// Managed processes are real host children, whatever the command: `cat` (an echo
// server: every stdin line comes back on stdout), or, for command `exit` with args
// [n], a process that exits n at once. Stopping or interrupting the session kills them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <optional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "backends/backend.hpp"

namespace boxrt {

class scripted_backend : public backend {
 public:
  explicit scripted_backend(scripted_config config = {});

  std::string name() const override { return "scripted"; }
  bool isolating() const override { return false; }
  readiness_report probe_readiness(const std::string& workspace_path, bool strict) override;
  result<std::shared_ptr<backend_session>> start_session(const box_spec& spec) override;
  result<exec_result> exec(backend_session& session, const box_spec& spec,
                           const exec_limits& limits) override;
  void stop_session(backend_session& session) override;
  result<std::shared_ptr<managed_process>> start_managed_process(backend_session& session,
                                                                 const process_spec& spec) override;

  // -- scripting (thread-safe) --------------------------------------------------------

  /// Makes every start of a session whose id contains `needle` block until
  /// release_starts(needle).
  void hold_starts(const std::string& needle);
  void release_starts(const std::string& needle);

  /// Opens gate `name` for every exec blocked on it (and for later ones).
  void release_gate(const std::string& name);

  /// The next start fails with `err`.
  void fail_next_start(box_error err);

  /// Replaces the readiness this backend reports.
  void set_config(scripted_config config);

  // -- records (thread-safe) ----------------------------------------------------------

  /// Records keep at least the most recent `record_limit` entries each (a boxd that
  /// runs the scripted backend for long must not grow with every start); the counts
  /// count everything.
  static constexpr size_t record_limit = 1024;

  std::vector<box_spec> started_specs() const;
  std::vector<std::string> stopped_ids() const;
  size_t start_count() const;
  size_t stop_count() const;
  size_t exec_count() const;
  /// Specs of every managed process started, in order.
  std::vector<process_spec> managed_specs() const;
  /// Number of execs currently blocked in `gate` or starts blocked in hold_starts.
  size_t blocked() const;
  /// Blocks the calling (test) thread until blocked() >= n or `timeout` passes.
  bool wait_blocked(size_t n, std::chrono::milliseconds timeout) const;
  /// Blocks the calling (test) thread until stop_count() >= n or `timeout` passes.
  bool wait_stops(size_t n, std::chrono::milliseconds timeout) const;

 private:
  mutable std::mutex mtx_;
  mutable std::condition_variable cv_;
  scripted_config config_;
  std::set<std::string> held_;
  std::set<std::string> open_gates_;
  std::optional<box_error> next_start_error_;
  std::vector<box_spec> started_;
  std::vector<std::string> stopped_;
  std::vector<process_spec> managed_;
  size_t starts_ = 0;
  size_t stops_ = 0;
  size_t execs_ = 0;
  size_t blocked_ = 0;
  uint64_t next_id_ = 1;
};

} // namespace boxrt
