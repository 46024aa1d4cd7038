// Internal to the session actor (session.cpp: the command stream; session_processes.cpp:
// the managed-process table and who is attached to each process's stdio).
#pragma once

#include "actors/session.hpp"
#include "actors/stream_gate.hpp"

#include <array>
#include <chrono>
#include <deque>
#include <list>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include <caf/all.hpp>

#include "messages/base/metrics.hpp"
#include "messages/time.hpp"

namespace boxrt::session_detail {

using clock_type = std::chrono::steady_clock;

/// The backend handle, shared with the one job that runs at a time for this session.
struct backend_box {
  std::shared_ptr<backend_session> handle;
};

/// A relay waiting to attach to a process whose stdio another relay holds.
struct attach_waiter {
  uint64_t token = 0;
  caf::actor_addr relay;
  caf::typed_response_promise<bool> rp;
  bool pump = false;
};

/// One managed process of this session.
struct process_record {
  process_spec spec;
  epoch_us started_at = 0;
  epoch_us exited_at = 0;
  std::shared_ptr<process_registry::entry> entry;
  /// The relay actor attached to the process's stdio (one at a time); null when free.
  /// The session monitors it: the relay's end lets go of the process.
  caf::actor_addr holder;
  /// The holder is a relay of another cluster node: the pump that carries the stdio to
  /// it (actors/cluster/stdio_pump.hpp); null otherwise. The session monitors it: the next relay
  /// is granted the process only once the last pump (and so its reading) has ended.
  stdio_pump_actor pump;
  caf::actor_addr draining;
  /// Relays waiting for the holder to let go, first come first served.
  std::deque<attach_waiter> waiting;
};

/// A managed-process job on the pool: what it fills in, who waits for it.
struct process_job {
  std::string process_id;
  bool start = true;
  process_spec spec;
  std::shared_ptr<std::shared_ptr<managed_process>> started;
  caf::typed_response_promise<process_info> start_rp;
  caf::typed_response_promise<std::string> stop_rp;
};

/// The managed processes of one session (§4.7) and their stdio attachments (§1.4).
struct process_table {
  /// By process_id.
  std::map<std::string, process_record> records;
  std::map<uint64_t, process_job> jobs;
  /// Starts waiting for a start of the same process_id to finish.
  std::vector<std::pair<process_spec, caf::typed_response_promise<process_info>>> deferred;
  /// Starts that arrived while the sandbox was still starting.
  std::vector<std::pair<process_spec, caf::typed_response_promise<process_info>>> early;
};

struct session_state {
  static inline const char* name = "boxrt.session";

  enum class phase { starting, ready, running, stopping };

  ~session_state() {
    if (phase_gauges[0] != nullptr)
      phase_gauges[static_cast<size_t>(current)]->add(-1);
  }

  /// Moves to `p`, keeping boxd_sessions{state,backend} in step.
  void enter(phase p) {
    if (phase_gauges[0] != nullptr) {
      phase_gauges[static_cast<size_t>(current)]->add(-1);
      phase_gauges[static_cast<size_t>(p)]->add(1);
    }
    current = p;
  }

  /// Starts counting this session in boxd_sessions (once its backend is known).
  void count_in(const std::string& backend) {
    static constexpr const char* names[] = {"starting", "idle", "running", "stopping"};
    for (size_t i = 0; i < phase_gauges.size(); ++i)
      phase_gauges[i] = &metrics::boxd().sessions.with({names[i], backend});
    phase_gauges[static_cast<size_t>(current)]->add(1);
  }

  session_args args;
  std::shared_ptr<backend_box> box = std::make_shared<backend_box>();
  session_info info;
  phase current = phase::starting;
  std::array<metrics::gauge*, 4> phase_gauges{};

  /// A streamed command (box_exec_stream): its settings, its consumer and its reply.
  struct stream_job {
    stream_params params;
    caf::typed_response_promise<stream_end> rp;
    stream_consumer_actor consumer;
    std::shared_ptr<stream_gate> gate;
  };

  struct queued_exec {
    box_spec spec;
    /// box_exec's reply; not pending for a streamed command (stream has its own).
    caf::typed_response_promise<exec_result> rp;
    std::shared_ptr<stream_job> stream;
    /// Who asked (delegation keeps the original sender: the connection actor).
    caf::strong_actor_ptr requester;
  };
  /// A list, not a deque: an empty deque still holds a node (here about 450 bytes),
  /// and most sessions have nothing queued most of the time.
  std::list<queued_exec> queue;
  /// Queued commands dropped because their requester was gone before they started.
  uint64_t dropped_commands = 0;
  std::vector<caf::typed_response_promise<session_info>> create_waiters;

  /// Tokens of pool jobs (commands, process jobs) and of attach waits.
  uint64_t next_token = 1;
  uint64_t running_token = 0;
  std::optional<caf::typed_response_promise<exec_result>> running_rp;
  /// The running command is streamed: its job (running_rp is then not pending).
  std::shared_ptr<stream_job> running_stream;
  /// A timed-out result waits for the session to stop before it is delivered.
  std::optional<exec_result> timed_out_result;

  box_error stop_reason;
  std::vector<caf::typed_response_promise<bool>> stop_waiters;
  bool stop_submitted = false;

  process_table processes;

  /// box_status usage readings on the worker pool, by token, with what each answers
  /// (unknowns) if the session stops first.
  std::map<uint64_t, std::pair<caf::typed_response_promise<session_stats>, session_stats>>
    stats_waiters;

  /// File actions on the worker pool (docs/files.md), by token; a stopping session
  /// answers them with its reason.
  std::map<uint64_t, caf::typed_response_promise<file_result>> file_waiters;

  /// The running command is a storage probe (no use of the session).
  bool probing = false;
  /// The extra mounts of the last command run (a probe keeps them).
  std::vector<mount_spec> last_mounts;

  uint64_t commands_seen = 0;
  /// When the sandbox was asked for and when it was ready (the log's durations).
  clock_type::time_point start_requested = clock_type::now();
  clock_type::time_point started_at{};
  clock_type::time_point last_used = clock_type::now();
  bool reap_scheduled = false;
};

using self_ptr = session_actor::stateful_pointer<session_state>;

/// "session <id> is being deleted" (BoxSessionNotFoundError).
box_error deleting_error(const session_state& st);

// The managed-process table (session_processes.cpp). The sandbox is up whenever a
// start reaches the backend: starts that arrive earlier wait in `early`.

/// box_start_managed_process: refused while stopping, held while the sandbox starts.
caf::typed_response_promise<process_info> request_process(self_ptr self, process_spec spec);
/// Starts (or replaces) the process on the pool.
void start_process(self_ptr self, process_spec spec, caf::typed_response_promise<process_info> rp);
/// Starts that waited for the sandbox go now.
void start_early_processes(self_ptr self);
/// box_get_managed_process.
caf::result<process_info> get_process(self_ptr self, const std::string& pid);
/// box_stop_managed_process: the record goes at once, termination runs on the pool.
caf::typed_response_promise<std::string> stop_process(self_ptr self, const std::string& pid);
/// A process job finished on the pool.
void process_job_done(self_ptr self, uint64_t token, process_outcome& out);
/// Every process's info, for box_get_session.
void add_process_infos(session_state& st, session_info& info);
/// True while a process runs or a process job is in flight: the session is not idle.
bool processes_busy(const session_state& st);
/// The sandbox is going: waiting starts and attaches fail with `reason`, the records
/// leave the registry (a fence advance marks them stale first).
void end_processes(self_ptr self, const box_error& reason);

/// A relay actor (the sender) asks to hold the stdio of process `pid`: granted at once
/// when free, else after the holder lets go, or refused once `wait_ms` runs out.
caf::typed_response_promise<bool> attach_relay(self_ptr self, const std::string& pid,
                                               uint64_t wait_ms, bool pump);
/// The attach wait with this token ran out.
void attach_expired(self_ptr self, uint64_t token);
/// A monitored relay actor ended: it lets go of its process, or stops waiting; or a
/// monitored pump ended, and the next relay may have the process.
void relay_gone(self_ptr self, const caf::actor_addr& relay);

} // namespace boxrt::session_detail
