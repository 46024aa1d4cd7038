#include "actors/session_detail.hpp"

#include <spdlog/spdlog.h>

#include "actors/caf_support.hpp"
#include "actors/pool_job.hpp"
#include "backends/mount_policy.hpp"
#include "messages/base/log.hpp"

namespace boxrt {

namespace session_detail {

box_error deleting_error(const session_state& st) {
  return box_error{ec::session_not_found, "session " + st.args.logical_id + " is being deleted"};
}

} // namespace session_detail

namespace {

using namespace session_detail;

int64_t ms_since(clock_type::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t).count();
}

void submit_start(self_ptr self) {
  auto& st = self->state;
  st.enter(session_state::phase::starting);
  st.start_requested = clock_type::now();
  auto job = [box = st.box, backend = st.args.backend, spec = st.args.spec, local = st.args.local,
              ns = st.args.workspace_ns] {
    start_outcome out;
    auto fence = make_mount_fence(*local, ns, spec->host_path, {});
    if (auto err = check_spec_mounts(*spec, *local, &fence)) {
      out.error = std::move(err);
      return out;
    }
    if (box->handle) {
      // A dead sandbox is replaced: stop what is left of it first.
      backend->stop_session(*box->handle);
      box->handle.reset();
    }
    auto scoped = *spec;
    scoped.network_scope = ns;  // its workspace's egress policy (backends/linux/egress.hpp)
    auto started = backend->start_session(scoped);
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
  if (st.args.spec->persistent || st.args.ttl_sec <= 0 || st.reap_scheduled)
    return;
  st.reap_scheduled = true;
  auto due = st.last_used + std::chrono::seconds{st.args.ttl_sec};
  auto delay = std::max(due - clock_type::now(), clock_type::duration{std::chrono::milliseconds{1}});
  self->delayed_send(self, std::chrono::duration_cast<std::chrono::milliseconds>(delay), reap_atom_v);
}

void begin_stop(self_ptr self, box_error reason);

/// Runs `spec` as the session's one running command, answering `rp`.
void submit_exec(self_ptr self, box_spec spec, caf::typed_response_promise<exec_result> rp,
                 std::shared_ptr<session_state::stream_job> stream = nullptr);

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
  st.last_mounts = next.spec.extra_mounts;
  submit_exec(self, std::move(next.spec), std::move(next.rp), std::move(next.stream));
}

void submit_exec(self_ptr self, box_spec spec, caf::typed_response_promise<exec_result> rp,
                 std::shared_ptr<session_state::stream_job> stream) {
  auto& st = self->state;
  st.enter(session_state::phase::running);
  st.running_token = st.next_token++;
  st.running_rp = std::move(rp);
  st.running_stream = stream;
  if (stream) {
    // Frames come back to this actor (in order, before the job's end) and go on to the
    // consumer from here, so that the reply never overtakes a frame. A consumer that
    // goes away stops the command.
    stream->gate = std::make_shared<stream_gate>(
      stream->params.credit,
      [me = caf::actor_cast<session_actor>(self), token = st.running_token](stream_chunk c) {
        caf::anon_send(me, stream_atom_v, token, std::move(c));
      });
    self->monitor(stream->consumer);
    self->send(stream->consumer, stream_atom_v, stream->params.token);
  }
  auto job = [box = st.box, backend = st.args.backend, limits = st.args.limits,
              local = st.args.local, ns = st.args.workspace_ns, spec = std::move(spec), stream] {
    exec_outcome out;
    // Skill mounts may change per exec on a warm session: every exec's mounts pass the
    // same policy as a start's (allowed roots, denylist, other workspaces' trees), here
    // off the actor thread.
    if (!spec.extra_mounts.empty()) {
      auto fence = make_mount_fence(*local, ns, spec.host_path, {});
      if (auto err = check_spec_mounts(spec, *local, &fence)) {
        out.error = err;
        return out;
      }
    }
    if (stream) {
      auto r = backend->exec_stream(*box->handle, spec, limits, stream->params, *stream->gate);
      if (r)
        out.stream = std::move(r.value());
      else
        out.error = r.error();
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
  end_processes(self, reason);
  for (auto& q : st.queue)
    if (q.stream)
      q.stream->rp.deliver(err);
    else
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
  st.enter(session_state::phase::stopping);
  // Usage readings still on the pool are answered now, as unknown: a stopping
  // session's figures mean nothing, and box_status must not wait for its teardown.
  for (auto& [token, w] : st.stats_waiters)
    w.first.deliver(std::move(w.second));
  st.stats_waiters.clear();
  for (auto& [token, rp] : st.file_waiters)
    rp.deliver(to_caf_error(reason));
  st.file_waiters.clear();
  st.stop_reason = std::move(reason);
  fail_pending(self, st.stop_reason);
  if (previous == session_state::phase::running) {
    if (auto run = std::exchange(st.running_stream, nullptr)) {
      run->gate->stop("stopped");
      run->rp.deliver(to_caf_error(st.stop_reason));
    }
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

/// One physical session: its command stream, one command at a time, and its managed
/// processes.
session_actor::behavior_type session_behavior(self_ptr self, session_args a) {
  auto& st = self->state;
  st.args = std::move(a);
  st.info = session_info_from_spec(*st.args.spec);
  st.info.session_id = st.args.logical_id;
  st.info.backend_name = st.args.backend->name();
  st.count_in(st.info.backend_name);
  st.info.created_at = wall_now_us();
  st.info.last_used_at = st.info.created_at;
  // The relays this session monitors (attached or waiting): an ended one lets go.
  self->set_down_handler([self](caf::down_msg& msg) {
    auto& run = self->state.running_stream;
    if (run && msg.source == run->consumer.address()) {
      run->gate->stop("closed");
      return;
    }
    relay_gone(self, msg.source);
  });
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
      st.queue.push_back({std::move(spec), rp, nullptr, std::move(requester)});
      run_next(self);
      return rp;
    },
    [self](xstream_atom, box_spec& spec,
           stream_params& params) -> caf::typed_response_promise<stream_end> {
      auto& st = self->state;
      auto requester = self->current_sender();
      auto rp = self->make_response_promise<stream_end>();
      ++st.commands_seen;
      if (st.current == session_state::phase::stopping) {
        rp.deliver(to_caf_error(st.stop_reason));
        return rp;
      }
      auto job = std::make_shared<session_state::stream_job>();
      job->params = params;
      job->rp = rp;
      job->consumer = caf::actor_cast<stream_consumer_actor>(requester);
      if (!job->consumer) {
        rp.deliver(to_caf_error(box_error{ec::validation, "box_exec_stream needs a consumer"}));
        return rp;
      }
      st.queue.push_back({std::move(spec), {}, std::move(job), std::move(requester)});
      run_next(self);
      return rp;
    },
    [self](stream_atom, uint64_t token, stream_chunk& chunk) {
      auto& st = self->state;
      if (token == st.running_token && st.running_stream)
        self->send(st.running_stream->consumer, stream_atom_v, st.running_stream->params.token,
                   std::move(chunk));
    },
    [self](credit_atom, uint64_t token, int64_t n) {
      auto& run = self->state.running_stream;
      // Only the stream's own consumer speaks for it.
      if (run && token == run->params.token && n > 0
          && self->current_sender() == caf::actor_cast<caf::strong_actor_ptr>(run->consumer))
        run->gate->add_credit(n);
    },
    [self](cancel_atom, uint64_t token) {
      auto& run = self->state.running_stream;
      if (run && token == run->params.token
          && self->current_sender() == caf::actor_cast<caf::strong_actor_ptr>(run->consumer))
        run->gate->stop("cancel");
    },
    [self](stats_atom) -> caf::typed_response_promise<session_stats> {
      auto& st = self->state;
      auto rp = self->make_response_promise<session_stats>();
      session_stats out;
      out.session_id = st.args.logical_id;
      out.backend_name = st.info.backend_name;
      // The handle is only replaced by a start job: while ready or running it is stable,
      // and the backend reads usage safely beside a running command.
      auto ready = st.current == session_state::phase::ready
                   || st.current == session_state::phase::running;
      if (!ready || !st.box->handle) {
        rp.deliver(std::move(out));
        return rp;
      }
      auto token = st.next_token++;
      st.stats_waiters.emplace(token, std::make_pair(rp, out));
      auto job = [handle = st.box->handle, backend = st.args.backend, out]() mutable {
        auto u = backend->session_usage(*handle);
        out.cpu_usec = u.cpu_usec;
        out.memory_bytes = u.memory_bytes;
        out.workspace_bytes = u.workspace_bytes;
        return out;
      };
      pool_job(*st.args.pool, caf::actor_cast<session_actor>(self), std::move(job), stats_atom_v,
               token);
      return rp;
    },
    [self](stats_atom, uint64_t token, session_stats& out) {
      auto& waiters = self->state.stats_waiters;
      if (auto i = waiters.find(token); i != waiters.end()) {
        i->second.first.deliver(std::move(out));
        waiters.erase(i);
      }
    },
    [self](file_atom, file_op& op, file_limits& limits) -> caf::typed_response_promise<file_result> {
      auto& st = self->state;
      auto rp = self->make_response_promise<file_result>();
      // Beside a running command, never behind it (docs/files.md): the handle is only
      // replaced by a start job, so while ready or running it is stable.
      auto ready = st.current == session_state::phase::ready
                   || st.current == session_state::phase::running;
      if (st.current == session_state::phase::stopping) {
        rp.deliver(to_caf_error(st.stop_reason));
        return rp;
      }
      if (!ready || !st.box->handle) {
        rp.deliver(to_caf_error(box_error{ec::box_error, "session " + st.args.logical_id + " is starting"}));
        return rp;
      }
      auto token = st.next_token++;
      st.file_waiters.emplace(token, rp);
      auto job = [handle = st.box->handle, backend = st.args.backend, op = std::move(op), limits]() {
        file_outcome out;
        auto r = backend->file_action(*handle, op, limits);
        if (r)
          out.result = std::move(r.value());
        else
          out.error = r.error();
        return out;
      };
      pool_job(*st.args.pool, caf::actor_cast<session_actor>(self), std::move(job), fdone_atom_v, token);
      return rp;
    },
    [self](fdone_atom, uint64_t token, file_outcome& out) {
      auto& waiters = self->state.file_waiters;
      auto i = waiters.find(token);
      if (i == waiters.end())
        return;
      if (out.error)
        i->second.deliver(to_caf_error(out.error));
      else
        i->second.deliver(std::move(out.result));
      waiters.erase(i);
    },
    [self](probe_atom, box_spec& spec) -> caf::typed_response_promise<exec_result> {
      auto& st = self->state;
      auto rp = self->make_response_promise<exec_result>();
      // Only an idle, live sandbox is probed: nothing waits behind a probe, nothing is
      // started for one, and a busy session is reported, not queued.
      if (st.current != session_state::phase::ready || !st.queue.empty() || !st.box->handle
          || !st.box->handle->alive()) {
        rp.deliver(to_caf_error(box_error{ec::box_error, "session " + st.args.logical_id + " is busy"}));
        return rp;
      }
      // The mounts of the last command stay as they are.
      spec.extra_mounts = st.last_mounts;
      st.probing = true;
      submit_exec(self, std::move(spec), rp);
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
      add_process_infos(st, info);
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
        metrics::boxd().session_starts.with({st.info.backend_name, "error"}).inc();
        logs::event(logs::level::warn, "session_start_failed",
                    {{"ws", st.args.workspace_ns},
                     {"session", st.args.physical_id},
                     {"backend", st.info.backend_name},
                     {"duration_ms", ms_since(st.start_requested)},
                     {"error", out.error.to_wire()}});
        // The error goes to every waiting caller; the supervisor forgets us.
        self->send(st.args.supervisor, closing_atom_v,
                   st.args.physical_id);
        st.enter(session_state::phase::stopping);
        st.stop_reason = out.error;
        fail_pending(self, out.error);
        submit_stop(self);
        return;
      }
      st.info.backend_session_id = out.backend_session_id;
      st.started_at = clock_type::now();
      metrics::boxd().session_starts.with({st.info.backend_name, "ok"}).inc();
      logs::event(logs::level::info, "session_start",
                  {{"ws", st.args.workspace_ns},
                   {"session", st.args.physical_id},
                   {"backend", st.info.backend_name},
                   {"duration_ms", ms_since(st.start_requested)}});
      st.enter(session_state::phase::ready);
      st.last_used = clock_type::now();
      for (auto& w : st.create_waiters)
        w.deliver(st.info);
      st.create_waiters.clear();
      start_early_processes(self);
      schedule_reap(self);
      run_next(self);
    },
    [self](done_atom, uint64_t token, exec_outcome& out) {
      auto& st = self->state;
      if (token != st.running_token)
        return;
      st.running_token = 0;
      // A probe is no use of the session: its idle time runs on.
      if (!std::exchange(st.probing, false)) {
        st.last_used = clock_type::now();
        st.info.last_used_at = wall_now_us();
      }
      if (st.current == session_state::phase::stopping) {
        submit_stop(self);
        return;
      }
      if (auto run = std::exchange(st.running_stream, nullptr)) {
        self->demonitor(run->consumer.address());
        if (out.error) {
          run->rp.deliver(to_caf_error(out.error));
        } else {
          out.stream.result.session_id = st.args.logical_id;
          if (out.stream.result.status == exec_status::timed_out)
            metrics::boxd().exec_timeouts.inc();
          run->rp.deliver(std::move(out.stream));
        }
        st.running_rp.reset();
        st.enter(session_state::phase::ready);
        run_next(self);
        return;
      }
      if (out.error) {
        st.running_rp->deliver(to_caf_error(out.error));
        st.running_rp.reset();
      } else {
        out.result.session_id = st.args.logical_id;
        if (out.result.status == exec_status::timed_out) {
          metrics::boxd().exec_timeouts.inc();
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
      st.enter(session_state::phase::ready);
      run_next(self);
    },
    [self](stopped_atom) {
      auto& st = self->state;
      if (st.started_at != clock_type::time_point{})
        logs::event(logs::level::info, "session_stop",
                    {{"ws", st.args.workspace_ns},
                     {"session", st.args.physical_id},
                     {"backend", st.info.backend_name},
                     {"lifetime_ms", ms_since(st.started_at)},
                     {"reason", st.stop_reason ? st.stop_reason.to_wire() : std::string{}}});
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
    [self](pstart_atom, process_spec& spec) { return request_process(self, std::move(spec)); },
    [self](pget_atom, std::string& pid) { return get_process(self, pid); },
    [self](pstop_atom, std::string& pid) { return stop_process(self, pid); },
    [self](pdone_atom, uint64_t token, process_outcome& out) {
      process_job_done(self, token, out);
    },
    [self](attach_atom, std::string& pid, uint64_t wait_ms, bool pump) {
      return attach_relay(self, pid, wait_ms, pump);
    },
    [self](expire_atom, uint64_t token) { attach_expired(self, token); },
    [self](reap_atom) {
      auto& st = self->state;
      st.reap_scheduled = false;
      if (st.current == session_state::phase::stopping)
        return;
      auto idle_for = clock_type::now() - st.last_used;
      // A running managed process holds its session (§4.6), as does a job in flight.
      if (st.current == session_state::phase::ready && st.queue.empty() && !processes_busy(st)
          && idle_for >= std::chrono::seconds{st.args.ttl_sec}) {
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
