#include "actors/session.hpp"

#include <chrono>
#include <deque>
#include <algorithm>
#include <map>
#include <optional>
#include <functional>
#include <utility>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/caf_support.hpp"
#include "actors/pool_job.hpp"
#include "backends/mount_policy.hpp"
#include "messages/time.hpp"

namespace boxrt {

namespace {

using clock_type = std::chrono::steady_clock;

/// The backend handle, shared with the one job that runs at a time for this session.
struct backend_box {
  std::shared_ptr<backend_session> handle;
};

struct session_state {
  static inline const char* name = "boxrt.session";

  enum class phase { starting, ready, running, stopping };

  session_args args;
  std::shared_ptr<backend_box> box = std::make_shared<backend_box>();
  session_info info;
  phase current = phase::starting;

  struct queued_exec {
    box_spec spec;
    caf::typed_response_promise<exec_result> rp;
    /// Who asked (delegation keeps the original sender: the connection actor).
    caf::strong_actor_ptr requester;
  };
  std::deque<queued_exec> queue;
  /// Queued commands dropped because their requester was gone before they started.
  uint64_t dropped_commands = 0;
  std::vector<caf::typed_response_promise<session_info>> create_waiters;

  uint64_t next_token = 1;
  uint64_t running_token = 0;
  std::optional<caf::typed_response_promise<exec_result>> running_rp;
  /// A timed-out result waits for the session to stop before it is delivered.
  std::optional<exec_result> timed_out_result;

  box_error stop_reason;
  std::vector<caf::typed_response_promise<bool>> stop_waiters;
  bool stop_submitted = false;

  /// Managed processes of this session by process_id.
  struct process_record {
    process_spec spec;
    epoch_us started_at = 0;
    epoch_us exited_at = 0;
    std::shared_ptr<process_registry::entry> entry;
  };
  std::map<std::string, process_record> processes;
  /// A managed-process job on the pool: what it fills in, who waits for it.
  struct process_job {
    std::string process_id;
    bool start = true;
    process_spec spec;
    std::shared_ptr<std::shared_ptr<managed_process>> started;
    caf::typed_response_promise<process_info> start_rp;
    caf::typed_response_promise<std::string> stop_rp;
  };
  std::map<uint64_t, process_job> process_jobs;
  /// Starts waiting for a start of the same process_id to finish.
  std::vector<std::pair<process_spec, caf::typed_response_promise<process_info>>> deferred_starts;
  /// Starts that arrived while the sandbox was still starting.
  std::vector<std::pair<process_spec, caf::typed_response_promise<process_info>>> early_starts;

  uint64_t commands_seen = 0;
  clock_type::time_point last_used = clock_type::now();
  bool reap_scheduled = false;
};

using self_ptr = session_actor::stateful_pointer<session_state>;

box_error process_missing(const session_state& st, const std::string& pid) {
  return box_error{ec::process_not_found, "session " + st.args.logical_id
                                            + " has no managed process with process_id=" + pid};
}

process_info info_of(const session_state& st, session_state::process_record& r) {
  process_info info;
  info.session_id = st.args.logical_id;
  info.process_id = r.spec.process_id;
  info.command = r.spec.command;
  info.args = r.spec.args;
  info.cwd = r.spec.cwd;
  for (auto& [k, v] : r.spec.env)
    info.env_keys.push_back(k);
  info.started_at = r.started_at;
  auto& p = r.entry->process;
  if (auto code = p->exit_code()) {
    if (r.exited_at == 0)
      r.exited_at = wall_now_us();
    info.status = process_status::exited;
    info.exit_code = *code;
    info.exited_at = r.exited_at;
  }
  info.attached = r.entry->attached.load();
  info.stderr_preview = p->stderr_preview();
  return info;
}

/// Forgets exited processes kept longer than the retention, then the oldest exited ones
/// beyond max_completed_processes (§4.6), as the reference does on each start.
void reap_completed(session_state& st) {
  auto now = wall_now_us();
  auto keep_us = st.args.completed_process_retention_sec * 1'000'000;
  std::vector<std::pair<epoch_us, std::string>> exited;
  for (auto it = st.processes.begin(); it != st.processes.end();) {
    auto& r = it->second;
    if (r.entry->process->exit_code()) {
      if (r.exited_at == 0)
        r.exited_at = now;
      if (now - r.exited_at >= keep_us) {
        st.args.processes->remove(st.args.physical_id, it->first);
        it = st.processes.erase(it);
        continue;
      }
      exited.emplace_back(r.exited_at, it->first);
    }
    ++it;
  }
  std::sort(exited.begin(), exited.end());
  auto max = static_cast<size_t>(std::max<int64_t>(st.args.max_completed_processes, 0));
  for (size_t i = 0; exited.size() > max && i < exited.size() - max; ++i) {
    st.args.processes->remove(st.args.physical_id, exited[i].second);
    st.processes.erase(exited[i].second);
  }
}

/// Starts (or replaces) a managed process on the pool; the sandbox must be up.
void start_process(self_ptr self, process_spec spec, caf::typed_response_promise<process_info> rp) {
  auto& st = self->state;
  if (!st.args.processes) {
    rp.deliver(to_caf_error({ec::box_error, st.args.backend->name() + " backend does not support managed processes"}));
    return;
  }
  reap_completed(st);
  // One start per process_id at a time: a second waits for the first (then replaces it).
  for (auto& [t, j] : st.process_jobs)
    if (j.start && j.process_id == spec.process_id) {
      st.deferred_starts.emplace_back(std::move(spec), rp);
      return;
    }
  // The global cap counts running processes and starts in flight, not the one replaced.
  size_t replacing = 0;
  if (auto i = st.processes.find(spec.process_id); i != st.processes.end() && !i->second.entry->process->exit_code())
    replacing = 1;
  auto max = static_cast<size_t>(std::max<int64_t>(st.args.max_managed_processes, 0));
  if (st.args.processes->running() + st.args.processes->starting() - replacing >= max) {
    rp.deliver(to_caf_error({ec::capacity_exceeded, "Box managed process capacity reached ("
                                                      + std::to_string(max) + ")"}));
    return;
  }
  auto token = st.next_token++;
  auto slot = std::make_shared<std::shared_ptr<managed_process>>();
  std::shared_ptr<managed_process> old;
  if (auto i = st.processes.find(spec.process_id); i != st.processes.end())
    old = i->second.entry->process;
  st.process_jobs[token] = {spec.process_id, true, spec, slot, rp, {}};
  st.args.processes->begin_start();
  pool_job(
    *st.args.pool, caf::actor_cast<session_actor>(self),
    [box = st.box, backend = st.args.backend, spec, slot, old] {
      process_outcome out;
      if (old)
        old->terminate(); // a running process of the same id is replaced (§4.7 step 5)
      auto r = box->handle ? backend->start_managed_process(*box->handle, spec)
                           : result<std::shared_ptr<managed_process>>{box_error{ec::box_error, "session is not running"}};
      if (r)
        *slot = std::move(r.value());
      else
        out.error = r.error();
      return out;
    },
    pdone_atom_v, token);
}

box_error deleting_error(const session_state& st) {
  return box_error{ec::session_not_found, "session " + st.args.logical_id + " is being deleted"};
}

void submit_start(self_ptr self) {
  auto& st = self->state;
  st.current = session_state::phase::starting;
  auto job = [box = st.box, backend = st.args.backend, spec = st.args.spec, local = st.args.local] {
    start_outcome out;
    if (auto err = check_spec_mounts(spec, local)) {
      out.error = std::move(err);
      return out;
    }
    if (box->handle) {
      // A dead sandbox is replaced: stop what is left of it first.
      backend->stop_session(*box->handle);
      box->handle.reset();
    }
    auto started = backend->start_session(spec);
    if (started) {
      box->handle = std::move(started.value());
      out.backend_session_id = box->handle->id();
    } else {
      out.error = started.error();
    }
    return out;
  };
  pool_job(*st.args.pool, caf::actor_cast<session_actor>(self), std::move(job), started_atom_v);
}

void submit_stop(self_ptr self) {
  auto& st = self->state;
  if (st.stop_submitted)
    return;
  st.stop_submitted = true;
  pool_job(
    *st.args.pool, caf::actor_cast<session_actor>(self),
    [box = st.box, backend = st.args.backend] {
      if (box->handle)
        backend->stop_session(*box->handle);
    },
    stopped_atom_v);
}

void schedule_reap(self_ptr self) {
  auto& st = self->state;
  if (st.args.spec.persistent || st.args.ttl_sec <= 0 || st.reap_scheduled)
    return;
  st.reap_scheduled = true;
  auto due = st.last_used + std::chrono::seconds{st.args.ttl_sec};
  auto delay = std::max(due - clock_type::now(), clock_type::duration{std::chrono::milliseconds{1}});
  self->delayed_send(self, std::chrono::duration_cast<std::chrono::milliseconds>(delay), reap_atom_v);
}

void begin_stop(self_ptr self, box_error reason);

/// True when the actor that asked for a command is gone: its reply has nowhere to go, so
/// the command is never started (a client that disconnects leaves no work behind, and
/// reconnecting cannot pile up more than one connection's in-flight cap at a time).
bool requester_gone(const caf::strong_actor_ptr& who) {
  if (!who)
    return false;  // an anonymous send: nobody to ask
  // monitorable_actor::cleanup sets this flag once the actor has terminated.
  return who->get()->getf(caf::abstract_actor::is_cleaned_up_flag);
}

void run_next(self_ptr self) {
  auto& st = self->state;
  size_t dropped = 0;
  while (!st.queue.empty() && requester_gone(st.queue.front().requester)) {
    st.queue.pop_front();
    ++dropped;
  }
  if (dropped > 0) {
    st.dropped_commands += dropped;
    spdlog::debug("session {}: {} queued command(s) dropped: their client is gone",
                  st.args.physical_id, dropped);
  }
  if (st.current != session_state::phase::ready || st.queue.empty())
    return;
  if (st.box->handle && !st.box->handle->alive()) {
    spdlog::info("session {}: sandbox died, starting a new one", st.args.physical_id);
    submit_start(self);
    return;
  }
  auto next = std::move(st.queue.front());
  st.queue.pop_front();
  st.current = session_state::phase::running;
  st.running_token = st.next_token++;
  st.running_rp = std::move(next.rp);
  auto job = [box = st.box, backend = st.args.backend, limits = st.args.limits,
              local = st.args.local, spec = std::move(next.spec)] {
    exec_outcome out;
    // Skill mounts may change per exec on a warm session: every exec's mounts pass the
    // same policy as a start's (allowed roots, denylist), here off the actor thread.
    if (!spec.extra_mounts.empty())
      if (auto err = check_spec_mounts(spec, local)) {
        out.error = err;
        return out;
      }
    auto r = backend->exec(*box->handle, spec, limits);
    if (r)
      out.result = std::move(r.value());
    else
      out.error = r.error();
    return out;
  };
  pool_job(*st.args.pool, caf::actor_cast<session_actor>(self), std::move(job), done_atom_v,
           st.running_token);
}

void fail_pending(self_ptr self, const box_error& reason) {
  auto& st = self->state;
  auto err = to_caf_error(reason);
  for (auto& [spec, rp] : st.early_starts)
    rp.deliver(err);
  st.early_starts.clear();
  for (auto& [spec, rp] : st.deferred_starts)
    rp.deliver(err);
  st.deferred_starts.clear();
  // The processes end with the sandbox; the relay finds none from now on, and one that
  // is attached learns why when the reason is a fence advance.
  if (st.args.processes)
    for (auto& [pid, r] : st.processes) {
      if (reason.code == ec::permission)
        r.entry->stale = true;
      st.args.processes->remove(st.args.physical_id, pid);
    }
  for (auto& q : st.queue)
    q.rp.deliver(err);
  st.queue.clear();
  for (auto& w : st.create_waiters)
    w.deliver(err);
  st.create_waiters.clear();
}

void begin_stop(self_ptr self, box_error reason) {
  auto& st = self->state;
  if (st.current == session_state::phase::stopping)
    return;
  auto previous = st.current;
  st.current = session_state::phase::stopping;
  st.stop_reason = std::move(reason);
  fail_pending(self, st.stop_reason);
  if (previous == session_state::phase::running) {
    if (st.running_rp && !st.timed_out_result) {
      st.running_rp->deliver(to_caf_error(st.stop_reason));
      st.running_rp.reset();
    }
    if (st.box->handle)
      st.box->handle->interrupt();
    return; // the stop job is submitted once the running command returns
  }
  if (previous == session_state::phase::starting)
    return; // the stop job is submitted once the start returns
  submit_stop(self);
}

} // namespace

namespace {

/// One physical session: its command stream, one command at a time, and its managed
/// processes.
session_actor::behavior_type session_behavior(self_ptr self, session_args a) {
  auto& st = self->state;
  st.args = std::move(a);
  st.info = session_info_from_spec(st.args.spec);
  st.info.session_id = st.args.logical_id;
  st.info.backend_name = st.args.backend->name();
  st.info.created_at = wall_now_us();
  st.info.last_used_at = st.info.created_at;
  submit_start(self);
  return {
    [self](exec_atom, box_spec& spec) -> caf::typed_response_promise<exec_result> {
      auto& st = self->state;
      // Read before make_response_promise, which takes the sender into the promise.
      auto requester = self->current_sender();
      auto rp = self->make_response_promise<exec_result>();
      ++st.commands_seen;
      if (st.current == session_state::phase::stopping) {
        rp.deliver(to_caf_error(st.stop_reason));
        return rp;
      }
      st.queue.push_back({std::move(spec), rp, std::move(requester)});
      run_next(self);
      return rp;
    },
    [self](create_atom) -> caf::typed_response_promise<session_info> {
      auto& st = self->state;
      auto rp = self->make_response_promise<session_info>();
      ++st.commands_seen;
      switch (st.current) {
        case session_state::phase::stopping:
          rp.deliver(to_caf_error(st.stop_reason));
          break;
        case session_state::phase::starting:
          st.create_waiters.push_back(rp);
          break;
        default:
          st.last_used = clock_type::now();
          st.info.last_used_at = wall_now_us();
          rp.deliver(st.info);
      }
      return rp;
    },
    [self](caf::get_atom) -> session_info {
      auto& st = self->state;
      auto info = st.info;
      for (auto& [pid, r] : st.processes)
        info.managed_processes.push_back(info_of(st, r));
      return info;
    },
    [self](stop_atom, box_error& reason) -> caf::typed_response_promise<bool> {
      auto rp = self->make_response_promise<bool>();
      self->state.stop_waiters.push_back(rp);
      begin_stop(self, std::move(reason));
      return rp;
    },
    [self](started_atom, start_outcome& out) {
      auto& st = self->state;
      if (st.current == session_state::phase::stopping) {
        submit_stop(self);
        return;
      }
      if (out.error) {
        spdlog::warn("session {}: backend start failed: {}", st.args.physical_id,
                     out.error.message);
        // The error goes to every waiting caller; the supervisor forgets us.
        self->send(st.args.supervisor, closing_atom_v,
                   st.args.physical_id);
        st.current = session_state::phase::stopping;
        st.stop_reason = out.error;
        fail_pending(self, out.error);
        submit_stop(self);
        return;
      }
      st.info.backend_session_id = out.backend_session_id;
      st.current = session_state::phase::ready;
      st.last_used = clock_type::now();
      for (auto& w : st.create_waiters)
        w.deliver(st.info);
      st.create_waiters.clear();
      for (auto& [spec, rp] : std::exchange(st.early_starts, {}))
        start_process(self, std::move(spec), rp);
      schedule_reap(self);
      run_next(self);
    },
    [self](done_atom, uint64_t token, exec_outcome& out) {
      auto& st = self->state;
      if (token != st.running_token)
        return;
      st.running_token = 0;
      st.last_used = clock_type::now();
      st.info.last_used_at = wall_now_us();
      if (st.current == session_state::phase::stopping) {
        submit_stop(self);
        return;
      }
      if (out.error) {
        st.running_rp->deliver(to_caf_error(out.error));
        st.running_rp.reset();
      } else {
        out.result.session_id = st.args.logical_id;
        if (out.result.status == exec_status::timed_out) {
          // As the reference does: a timed-out command ends its session, and the
          // result is returned once the sandbox is gone.
          st.timed_out_result = std::move(out.result);
          self->send(st.args.supervisor, closing_atom_v,
                     st.args.physical_id);
          begin_stop(self, deleting_error(st));
          submit_stop(self);
          return;
        }
        st.running_rp->deliver(std::move(out.result));
        st.running_rp.reset();
      }
      st.current = session_state::phase::ready;
      run_next(self);
    },
    [self](stopped_atom) {
      auto& st = self->state;
      st.box->handle.reset();
      if (st.timed_out_result && st.running_rp) {
        st.running_rp->deliver(std::move(*st.timed_out_result));
        st.running_rp.reset();
      }
      for (auto& w : st.stop_waiters)
        w.deliver(true);
      st.stop_waiters.clear();
      self->quit();
    },
    [self](pstart_atom, process_spec& spec) -> caf::typed_response_promise<process_info> {
      auto& st = self->state;
      auto rp = self->make_response_promise<process_info>();
      st.last_used = clock_type::now();
      if (st.current == session_state::phase::stopping)
        rp.deliver(to_caf_error(deleting_error(st)));
      else if (st.current == session_state::phase::starting)
        st.early_starts.emplace_back(std::move(spec), rp);
      else
        start_process(self, std::move(spec), rp);
      return rp;
    },
    [self](pget_atom, std::string& pid) -> caf::result<process_info> {
      auto& st = self->state;
      if (st.args.processes)
        reap_completed(st);
      auto i = st.processes.find(pid);
      if (i == st.processes.end())
        return to_caf_error(process_missing(st, pid));
      return info_of(st, i->second);
    },
    [self](pstop_atom, std::string& pid) -> caf::typed_response_promise<std::string> {
      auto& st = self->state;
      auto rp = self->make_response_promise<std::string>();
      auto i = st.processes.find(pid);
      if (i == st.processes.end()) {
        rp.deliver(to_caf_error(process_missing(st, pid)));
        return rp;
      }
      // The record goes at once (a later get is not-found); termination runs on the pool.
      auto entry = i->second.entry;
      st.processes.erase(i);
      st.args.processes->remove(st.args.physical_id, pid);
      st.last_used = clock_type::now();
      auto token = st.next_token++;
      st.process_jobs[token] = {pid, false, {}, nullptr, {}, rp};
      pool_job(
        *st.args.pool, caf::actor_cast<session_actor>(self),
        [entry] {
          entry->process->terminate();
          return process_outcome{};
        },
        pdone_atom_v, token);
      return rp;
    },
    [self](pdone_atom, uint64_t token, process_outcome& out) {
      auto& st = self->state;
      auto i = st.process_jobs.find(token);
      if (i == st.process_jobs.end())
        return;
      auto job = std::move(i->second);
      st.process_jobs.erase(i);
      if (!job.start) {
        job.stop_rp.deliver(job.process_id);
        return;
      }
      st.args.processes->end_start();
      // A start of the same id that waited for this one goes next.
      auto run_deferred = [self, pid = job.process_id] {
        auto& st = self->state;
        for (auto it = st.deferred_starts.begin(); it != st.deferred_starts.end(); ++it)
          if (it->first.process_id == pid) {
            auto next = std::move(*it);
            st.deferred_starts.erase(it);
            if (st.current == session_state::phase::stopping)
              next.second.deliver(to_caf_error(deleting_error(st)));
            else
              start_process(self, std::move(next.first), next.second);
            return;
          }
      };
      struct on_exit {
        std::function<void()> f;
        ~on_exit() { f(); }
      } deferred{run_deferred};
      if (out.error) {
        job.start_rp.deliver(to_caf_error(out.error));
        return;
      }
      if (st.current == session_state::phase::stopping) {
        st.args.pool->submit([p = *job.started] { p->terminate(std::chrono::milliseconds{0}); });
        job.start_rp.deliver(to_caf_error(deleting_error(st)));
        return;
      }
      session_state::process_record r;
      r.spec = job.spec;
      r.started_at = wall_now_us();
      r.entry = st.args.processes->put(st.args.physical_id, job.process_id, *job.started);
      auto& rec = st.processes[job.process_id] = std::move(r);
      job.start_rp.deliver(info_of(st, rec));
    },
    [self](reap_atom) {
      auto& st = self->state;
      st.reap_scheduled = false;
      if (st.current == session_state::phase::stopping)
        return;
      auto idle_for = clock_type::now() - st.last_used;
      bool process_running = false;
      for (auto& [pid, r] : st.processes)
        process_running = process_running || !r.entry->process->exit_code();
      // A running managed process holds its session (§4.6), as does a job in flight.
      if (st.current == session_state::phase::ready && st.queue.empty() && !process_running
          && st.process_jobs.empty() && idle_for >= std::chrono::seconds{st.args.ttl_sec}) {
        // The supervisor answers with a stop when nothing is in flight towards us;
        // otherwise a later command renews the timer.
        self->send(st.args.supervisor, idle_atom_v,
                   st.args.physical_id, st.commands_seen);
        st.reap_scheduled = true;
        self->delayed_send(self, std::chrono::seconds{st.args.ttl_sec}, reap_atom_v);
        return;
      }
      schedule_reap(self);
    },
  };
}

} // namespace

session_actor spawn_session(caf::local_actor* parent, session_args args) {
  return parent->spawn(session_behavior, std::move(args));
}

} // namespace boxrt
