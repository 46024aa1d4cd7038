// The managed processes of one session (§4.7) and the stdio relays attached to them
// (§1.4), kept by the session actor beside its command stream.
#include "actors/session_detail.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "actors/caf_support.hpp"
#include "actors/cluster/stdio_pump.hpp"
#include "actors/pool_job.hpp"

namespace boxrt::session_detail {

namespace {

/// The relay's close reason when the wait for another relay to let go runs out.
constexpr const char* relay_busy_text = "managed process is attached to another relay";

box_error process_missing(const session_state& st, const std::string& pid) {
  return box_error{ec::process_not_found, "session " + st.args.logical_id
                                            + " has no managed process with process_id=" + pid};
}

process_info info_of(const session_state& st, process_record& r) {
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
  info.attached = static_cast<bool>(r.holder);
  info.stderr_preview = p->stderr_preview();
  return info;
}

/// The record leaves the table and the registry; relays waiting for it learn `why`
/// (the one attached reads the process's end on its own stdout).
void forget(session_state& st, std::map<std::string, process_record>::iterator it,
            const box_error& why) {
  for (auto& w : it->second.waiting)
    w.rp.deliver(to_caf_error(why));
  if (st.args.processes)
    st.args.processes->remove(st.args.physical_id, it->first);
  st.processes.records.erase(it);
}

box_error exited_error(const std::string& pid) {
  return {ec::process_not_found, "managed process " + pid + " exited"};
}

/// Forgets exited processes kept longer than the retention, then the oldest exited ones
/// beyond max_completed_processes (§4.6), as the reference does on each start.
void reap_completed(session_state& st) {
  auto& records = st.processes.records;
  auto now = wall_now_us();
  auto keep_us = st.args.completed_process_retention_sec * 1'000'000;
  std::vector<std::pair<epoch_us, std::string>> exited;
  for (auto it = records.begin(); it != records.end();) {
    auto& r = it->second;
    if (r.entry->process->exit_code()) {
      if (r.exited_at == 0)
        r.exited_at = now;
      if (now - r.exited_at >= keep_us) {
        auto gone = it++;
        forget(st, gone, exited_error(gone->first));
        continue;
      }
      exited.emplace_back(r.exited_at, it->first);
    }
    ++it;
  }
  std::sort(exited.begin(), exited.end());
  auto max = static_cast<size_t>(std::max<int64_t>(st.args.max_completed_processes, 0));
  for (size_t i = 0; exited.size() > max && i < exited.size() - max; ++i)
    forget(st, records.find(exited[i].second), exited_error(exited[i].second));
}

/// Makes `relay` the holder. A relay that is not beside the process (a cluster node
/// whose registry does not hold it) reads nothing of this node's descriptors: a pump
/// beside the process carries the stdio to it.
void hold(self_ptr self, process_record& r, const caf::actor_addr& relay, bool pump) {
  r.holder = relay;
  if (!pump)
    return;
  if (auto handle = caf::actor_cast<stdio_relay_actor>(relay)) {
    r.pump = spawn_stdio_pump(self->system(), std::move(handle), r.entry, self->state.args.pool);
    self->monitor(r.pump);
  }
}

/// The holder lets go. Its pump, if any, is ended; the process is free once the pump
/// is down (its reader stops before the next one starts).
void let_go(process_record& r) {
  r.holder = nullptr;
  if (r.pump) {
    r.draining = r.pump.address();
    caf::anon_send_exit(r.pump, caf::exit_reason::user_shutdown);
    r.pump = nullptr;
  }
}

/// Hands the process to the first waiting relay, if any.
void grant_next(self_ptr self, process_record& r) {
  if (r.holder || r.draining || r.waiting.empty())
    return;
  auto next = std::move(r.waiting.front());
  r.waiting.pop_front();
  hold(self, r, next.relay, next.pump);
  next.rp.deliver(true);
}

/// A start of the same id that waited for the one that finished goes next.
void run_deferred(self_ptr self, const std::string& pid) {
  auto& st = self->state;
  auto& deferred = st.processes.deferred;
  for (auto it = deferred.begin(); it != deferred.end(); ++it)
    if (it->first.process_id == pid) {
      auto next = std::move(*it);
      deferred.erase(it);
      if (st.current == session_state::phase::stopping)
        next.second.deliver(to_caf_error(deleting_error(st)));
      else
        start_process(self, std::move(next.first), next.second);
      return;
    }
}

} // namespace

void start_process(self_ptr self, process_spec spec, caf::typed_response_promise<process_info> rp) {
  auto& st = self->state;
  auto& table = st.processes;
  if (!st.args.processes) {
    rp.deliver(to_caf_error(
      {ec::box_error, st.args.backend->name() + " backend does not support managed processes"}));
    return;
  }
  reap_completed(st);
  // One start per process_id at a time: a second waits for the first (then replaces it).
  for (auto& [t, j] : table.jobs)
    if (j.start && j.process_id == spec.process_id) {
      table.deferred.emplace_back(std::move(spec), rp);
      return;
    }
  // The global cap counts running processes and starts in flight, not the one replaced.
  auto old_record = table.records.find(spec.process_id);
  std::shared_ptr<managed_process> old;
  if (old_record != table.records.end())
    old = old_record->second.entry->process;
  size_t replacing = old && !old->exit_code() ? 1 : 0;
  auto max = static_cast<size_t>(std::max<int64_t>(st.args.max_managed_processes, 0));
  if (st.args.processes->running() + st.args.processes->starting() - replacing >= max) {
    rp.deliver(to_caf_error({ec::capacity_exceeded, "Box managed process capacity reached ("
                                                      + std::to_string(max) + ")"}));
    return;
  }
  auto token = st.next_token++;
  auto slot = std::make_shared<std::shared_ptr<managed_process>>();
  table.jobs[token] = {spec.process_id, true, spec, slot, rp, {}};
  st.args.processes->begin_start();
  pool_job(
    *st.args.pool, caf::actor_cast<session_actor>(self),
    [box = st.box, backend = st.args.backend, spec, slot, old] {
      process_outcome out;
      if (old)
        old->terminate(); // a running process of the same id is replaced (§4.7 step 5)
      auto r = box->handle ? backend->start_managed_process(*box->handle, spec)
                           : result<std::shared_ptr<managed_process>>{
                               box_error{ec::box_error, "session is not running"}};
      if (r)
        *slot = std::move(r.value());
      else
        out.error = r.error();
      return out;
    },
    pdone_atom_v, token);
}

caf::typed_response_promise<process_info> request_process(self_ptr self, process_spec spec) {
  auto& st = self->state;
  auto rp = self->make_response_promise<process_info>();
  st.last_used = clock_type::now();
  if (st.current == session_state::phase::stopping)
    rp.deliver(to_caf_error(deleting_error(st)));
  else if (st.current == session_state::phase::starting)
    st.processes.early.emplace_back(std::move(spec), rp);
  else
    start_process(self, std::move(spec), rp);
  return rp;
}

void start_early_processes(self_ptr self) {
  for (auto& [spec, rp] : std::exchange(self->state.processes.early, {}))
    start_process(self, std::move(spec), rp);
}

caf::result<process_info> get_process(self_ptr self, const std::string& pid) {
  auto& st = self->state;
  if (st.args.processes)
    reap_completed(st);
  auto i = st.processes.records.find(pid);
  if (i == st.processes.records.end())
    return to_caf_error(process_missing(st, pid));
  return info_of(st, i->second);
}

caf::typed_response_promise<std::string> stop_process(self_ptr self, const std::string& pid) {
  auto& st = self->state;
  auto rp = self->make_response_promise<std::string>();
  auto i = st.processes.records.find(pid);
  if (i == st.processes.records.end()) {
    rp.deliver(to_caf_error(process_missing(st, pid)));
    return rp;
  }
  // The record goes at once (a later get is not-found); termination runs on the pool.
  auto entry = i->second.entry;
  forget(st, i, exited_error(pid));
  st.last_used = clock_type::now();
  auto token = st.next_token++;
  st.processes.jobs[token] = {pid, false, {}, nullptr, {}, rp};
  pool_job(
    *st.args.pool, caf::actor_cast<session_actor>(self),
    [entry] {
      entry->process->terminate();
      return process_outcome{};
    },
    pdone_atom_v, token);
  return rp;
}

void process_job_done(self_ptr self, uint64_t token, process_outcome& out) {
  auto& st = self->state;
  auto i = st.processes.jobs.find(token);
  if (i == st.processes.jobs.end())
    return;
  auto job = std::move(i->second);
  st.processes.jobs.erase(i);
  if (!job.start) {
    job.stop_rp.deliver(job.process_id);
    return;
  }
  st.args.processes->end_start();
  if (out.error) {
    job.start_rp.deliver(to_caf_error(out.error));
  } else if (st.current == session_state::phase::stopping) {
    st.args.pool->submit([p = *job.started] { p->terminate(std::chrono::milliseconds{0}); });
    job.start_rp.deliver(to_caf_error(deleting_error(st)));
  } else {
    // A replaced record's waiting relays belonged to the old process.
    if (auto old = st.processes.records.find(job.process_id); old != st.processes.records.end())
      forget(st, old, exited_error(job.process_id));
    process_record r;
    r.spec = job.spec;
    r.started_at = wall_now_us();
    r.entry = st.args.processes->put(st.args.physical_id, job.process_id, *job.started);
    auto& rec = st.processes.records[job.process_id] = std::move(r);
    job.start_rp.deliver(info_of(st, rec));
  }
  run_deferred(self, job.process_id);
}

void add_process_infos(session_state& st, session_info& info) {
  for (auto& [pid, r] : st.processes.records)
    info.managed_processes.push_back(info_of(st, r));
}

bool processes_busy(const session_state& st) {
  if (!st.processes.jobs.empty())
    return true;
  for (auto& [pid, r] : st.processes.records)
    if (!r.entry->process->exit_code())
      return true;
  return false;
}

void end_processes(self_ptr self, const box_error& reason) {
  auto& st = self->state;
  auto& table = st.processes;
  auto err = to_caf_error(reason);
  for (auto& [spec, rp] : table.early)
    rp.deliver(err);
  table.early.clear();
  for (auto& [spec, rp] : table.deferred)
    rp.deliver(err);
  table.deferred.clear();
  // The processes end with the sandbox; the relay finds none from now on, and one that
  // is attached learns why when the reason is a fence advance.
  // The records stay for box_get_session until the actor quits.
  for (auto& [pid, r] : table.records) {
    if (reason.code == ec::permission)
      r.entry->stale = true;
    for (auto& w : r.waiting)
      w.rp.deliver(err);
    r.waiting.clear();
    if (st.args.processes)
      st.args.processes->remove(st.args.physical_id, pid);
  }
}

caf::typed_response_promise<bool> attach_relay(self_ptr self, const std::string& pid,
                                               uint64_t wait_ms, bool pump) {
  auto& st = self->state;
  auto relay = caf::actor_cast<caf::actor_addr>(self->current_sender());
  auto rp = self->make_response_promise<bool>();
  if (st.current == session_state::phase::stopping) {
    rp.deliver(to_caf_error(st.stop_reason));
    return rp;
  }
  auto i = st.processes.records.find(pid);
  if (!relay || i == st.processes.records.end()) {
    rp.deliver(to_caf_error(process_missing(st, pid)));
    return rp;
  }
  auto& r = i->second;
  // Holding or waiting, the relay's end is what lets go.
  self->monitor(relay);
  if (!r.holder && !r.draining) {
    hold(self, r, relay, pump);
    rp.deliver(true);
    return rp;
  }
  if (wait_ms == 0) {
    rp.deliver(to_caf_error({ec::busy, relay_busy_text}));
    return rp;
  }
  auto token = st.next_token++;
  r.waiting.push_back({token, relay, rp, pump});
  spdlog::info("session {}: relay for process {} waits: another relay holds it",
               st.args.physical_id, pid);
  self->delayed_send(self, std::chrono::milliseconds{wait_ms}, expire_atom_v, token);
  return rp;
}

void attach_expired(self_ptr self, uint64_t token) {
  auto& st = self->state;
  for (auto& [pid, r] : st.processes.records)
    for (auto it = r.waiting.begin(); it != r.waiting.end(); ++it)
      if (it->token == token) {
        spdlog::info("session {}: relay for process {} gave up: another relay holds it",
                     st.args.physical_id, pid);
        it->rp.deliver(to_caf_error({ec::busy, relay_busy_text}));
        r.waiting.erase(it);
        return;
      }
}

void relay_gone(self_ptr self, const caf::actor_addr& relay) {
  for (auto& [pid, r] : self->state.processes.records) {
    std::erase_if(r.waiting, [&](const attach_waiter& w) { return w.relay == relay; });
    if (r.pump && r.pump.address() == relay) // the pump ended first: the relay learns it
      r.pump = nullptr;
    if (r.draining == relay)
      r.draining = nullptr;
    if (r.holder == relay)
      let_go(r);
    grant_next(self, r);
  }
}

} // namespace boxrt::session_detail
