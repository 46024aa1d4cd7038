// The supervisor's admission steps: compat checks, slots, the idle report, stopping
// and retiring sessions, applying admission effects, the grant expiry timer,
// persisting the admission record and the admission gate.
#include "actors/supervisor_detail.hpp"

namespace boxrt::supervisor_detail {

const box_config& config(self_ptr self) {
  return self->state.args.settings->config;
}

bool admission_mode(self_ptr self) {
  return config(self).admission_mode();
}

std::string tenant_path(self_ptr self) {
  return tenant_workspace_path(config(self), self->state.admission->box_ns());
}

box_error stale_error() {
  return box_error{ec::permission, stale_generation_text};
}

box_error check_compat(const session_entry& e, const box_spec& spec) {
  const auto& have = *e.compat;
  auto conflict = [&](std::string_view field, std::string value) {
    return box_error{ec::session_conflict, "Box session " + e.logical_id + " already exists with "
                                             + std::string{field} + "=" + value};
  };
  if (spec.network != have.network)
    return conflict("network", std::string{to_string(have.network)});
  if (spec.image != have.image)
    return conflict("image", have.image);
  if (spec.host_path != have.host_path)
    return conflict("host_path", have.host_path.empty() ? "None" : have.host_path);
  if (spec.host_path_mode != have.host_path_mode)
    return conflict("host_path_mode", std::string{to_string(have.host_path_mode)});
  if (spec.mount_path != have.mount_path)
    return conflict("mount_path", have.mount_path);
  if (spec.persistent != have.persistent)
    return conflict("persistent", py::bool_text(have.persistent));
  if (spec.cpus != have.cpus)
    return conflict("cpus", py::float_text(have.cpus));
  if (spec.memory_mb != have.memory_mb)
    return conflict("memory_mb", std::to_string(have.memory_mb));
  if (spec.pids_limit != have.pids_limit)
    return conflict("pids_limit", std::to_string(have.pids_limit));
  if (spec.read_only_rootfs != have.read_only_rootfs)
    return conflict("read_only_rootfs", py::bool_text(have.read_only_rootfs));
  if (spec.workspace_quota_mb != have.workspace_quota_mb)
    return conflict("workspace_quota_mb", std::to_string(have.workspace_quota_mb));
  return {};
}

void release_slot(self_ptr self, const caf::actor_addr& addr) {
  auto& st = self->state;
  auto i = st.live.find(addr);
  if (i == st.live.end() || i->second.released)
    return;
  i->second.released = true;
  self->send(st.args.directory, release_atom_v);
}

result<std::string> physical_id(self_ptr self, int64_t gen, std::string_view logical) {
  auto suffix = safe_session_suffix(logical);
  if (!suffix)
    return suffix.error();
  const auto& ns = self->state.admission->box_ns();
  std::string out;
  out.reserve(ns.size() + 24 + suffix.value().size());
  out.append(ns).append("-g").append(std::to_string(gen)).append("-").append(suffix.value());
  return out;
}

bool idle_now(const supervisor_state& st) {
  return st.sessions.empty() && st.live.empty() && st.jobs.empty() && !st.committing
         && st.storage_waiters.empty() && st.status_waits == 0 && st.skill_waits == 0
         && st.admission->evictable();
}

void report_idle(self_ptr self) {
  auto& st = self->state;
  bool idle = idle_now(st);
  if (idle == st.reported_idle)
    return;
  st.reported_idle = idle;
  self->send(st.args.directory, idle_atom_v,
             st.args.directory_key, idle);
}

void stop_sessions(self_ptr self, std::function<bool(const std::string&, const session_entry&)> pred,
                   const box_error& reason, std::function<void(int64_t)> done) {
  auto& st = self->state;
  std::vector<session_actor> targets;
  for (auto i = st.sessions.begin(); i != st.sessions.end();) {
    if (!pred(i->first, i->second)) {
      ++i;
      continue;
    }
    if (i->second.actor)
      targets.push_back(i->second.actor);
    for (auto& w : i->second.waiting)
      w.fail(reason);
    i = st.sessions.erase(i);
  }
  if (targets.empty()) {
    if (done)
      done(0);
    return;
  }
  auto remaining = std::make_shared<size_t>(targets.size());
  auto count = static_cast<int64_t>(targets.size());
  for (auto& t : targets) {
    auto addr = t.address();
    self->request(t, stop_timeout, stop_atom_v, reason)
      .then([self, addr, remaining, count, done](bool) {
              release_slot(self, addr);
              if (--*remaining == 0 && done)
                done(count);
            },
            [self, addr, remaining, count, done](caf::error&) {
              // Already gone: it is stopped all the same.
              release_slot(self, addr);
              if (--*remaining == 0 && done)
                done(count);
            });
  }
}

void stop_all(self_ptr self, const box_error& reason, std::function<void(int64_t)> done) {
  stop_sessions(self, [](const std::string&, const session_entry&) { return true; }, reason,
                std::move(done));
}

void retire_stale(self_ptr self) {
  auto gen = self->state.admission->generation();
  stop_sessions(self, [gen](const std::string&, const session_entry& e) { return e.generation < gen; },
                stale_error(), nullptr);
}

void apply_effect(self_ptr self, session_effect effect, std::function<void(int64_t)> done) {
  switch (effect) {
    case session_effect::none:
      done(0);
      return;
    case session_effect::stop_all:
      stop_all(self, box_error{ec::admission, "Sandbox admission was revoked for this Workspace"},
               std::move(done));
      return;
    case session_effect::stop_non_canonical: {
      auto& st = self->state;
      const auto& grant = st.admission->grant();
      std::string canonical;
      if (grant) {
        auto id = physical_id(self, grant->execution_generation,
                              config(self).admission.logical_session_id);
        if (id)
          canonical = id.value();
      }
      stop_sessions(self,
                    [canonical](const std::string& id, const session_entry&) { return id != canonical; },
                    box_error{ec::admission, "Sandbox admission grant replaced this session"},
                    std::move(done));
      return;
    }
  }
}

void arm_expiry(self_ptr self) {
  auto& st = self->state;
  auto at = st.admission->next_expiry_us();
  if (at == 0 || at == st.armed_expiry)
    return;
  st.armed_expiry = at;
  auto token = ++st.expiry_token;
  auto delay_us = std::max<int64_t>(at - wall_now_us(), 0) + 1000;
  self->delayed_send(self, std::chrono::microseconds{delay_us}, expire_atom_v, token);
}

namespace {

/// True when the store holds the admission state already; else `now` is what to write.
bool durable(self_ptr self, std::string& now) {
  auto& st = self->state;
  if (!st.args.store)
    return true;
  // Nothing of safety meaning yet (and never stored): no row, no commit.
  if (st.persisted.empty() && st.admission->evictable())
    return true;
  now = st.admission->durable_state();
  return now == st.persisted;
}

void start_commit(self_ptr self, std::string now);

void finish_commit(self_ptr self, const std::string& written, box_error err) {
  auto& st = self->state;
  st.committing = false;
  if (err) {
    spdlog::error("{}: {}", st.admission->box_ns(), err.message);
    st.failed_commit.emplace(written, err);
  } else {
    st.persisted = written;
    st.failed_commit.reset();
    // Changed again while it was written (a continuation ran meanwhile): its waiters
    // wait for that too.
    std::string now;
    if (!durable(self, now)) {
      start_commit(self, std::move(now));
      return;
    }
  }
  auto waiters = std::exchange(st.commit_waiters, {});
  for (auto& w : waiters)
    w(err);
  report_idle(self);
}

void start_commit(self_ptr self, std::string now) {
  auto& st = self->state;
  st.committing = true;
  auto token = st.jobs.run(
    *st.args.pool, caf::actor_cast<supervisor_actor>(self),
    [store = st.args.store, key = st.args.directory_key, now]() -> box_error {
      try {
        return store->put(key, now);
      } catch (const std::exception& e) {
        return {ec::box_error, std::string{"admission state commit failed: "} + e.what()};
      }
    },
    [self, now](std::optional<box_error> err) {
      finish_commit(self, now, err ? *err : box_error{ec::box_error, "admission state commit failed"});
    });
  hold_mailbox(self, token);
}

} // namespace

void hold_mailbox(self_ptr self, uint64_t token) {
  self->set_default_handler(caf::skip);
  self->do_become(caf::behavior{[self, token](done_atom, uint64_t t) -> caf::result<void> {
                    if (t != token)
                      return caf::skip; // another job's end: taken up after this one
                    self->unbecome();
                    self->set_default_handler(caf::print_and_drop);
                    self->state.jobs.finish(t);
                    return caf::unit;
                  }},
                  false);
}

void commit_then(self_ptr self, std::function<void(box_error)> next) {
  auto& st = self->state;
  std::string now;
  if (!st.committing && durable(self, now)) {
    next({});
    return;
  }
  st.commit_waiters.push_back(std::move(next));
  if (!st.committing)
    start_commit(self, std::move(now));
}

box_error persist(self_ptr self) {
  auto& st = self->state;
  std::string now;
  if (durable(self, now))
    return {};
  // The request taken up again after a failed commit of this very state learns why.
  if (st.failed_commit && st.failed_commit->first == now) {
    auto err = st.failed_commit->second;
    st.failed_commit.reset();
    return err;
  }
  commit_then(self, [](box_error) {});
  st.replay = true;
  return box_error{ec::box_error, "the admission state is being committed"};
}

box_error pre_gate(self_ptr self, const action_context& ctx, const payload_facts* facts,
                   const box_error& decode_error) {
  if (self->state.state_error)
    return self->state.state_error;
  auto& adm = *self->state.admission;
  if (auto err = adm.check_generation(ctx.placement_generation))
    return err;
  if (admission_mode(self) && facts)
    if (auto err = workspace_admission::check_forged_fields(*facts, tenant_path(self)))
      return err;
  return decode_error;
}

namespace {

void log_decision(self_ptr self, const action_context& ctx, const box_error& err) {
  if (err)
    metrics::boxd().admission_decisions.with({"refuse", metrics::reason_slug(err.message)}).inc();
  else
    metrics::boxd().admission_decisions.with({"admit", "grant"}).inc();
  logs::event(logs::level::info, "admission",
              {{"ws", self->state.admission->box_ns()},
               {"generation", ctx.placement_generation},
               {"decision", err ? "refuse" : "admit"},
               {"reason", err ? err.to_wire() : std::string{"grant"}}});
}

/// The entitlement step of the admission check: may change the state (an expiry), whose
/// effect (stopping sessions) is applied at once; its commit is the caller's.
box_error check_entitlement(self_ptr self, const action_context& ctx) {
  auto effect = session_effect::none;
  auto err = self->state.admission->check_entitlement(ctx, config(self).admission, wall_now_us(), effect);
  if (effect != session_effect::none)
    apply_effect(self, effect, [](int64_t) {});
  arm_expiry(self);
  return err;
}

/// The steps after a durable entitlement: readiness, then the grant.
box_error check_grant(self_ptr self, const action_context& ctx) {
  auto& st = self->state;
  const auto& s = *st.args.settings;
  if (!s.ready) {
    runtime_readiness r;
    r.ready = false;
    r.admission_mode = s.admission_mode;
    r.checks = s.checks;
    r.config_error = configuration_error(s.config);
    return readiness_error(r);
  }
  return st.admission->check_grant(ctx, config(self).admission, wall_now_us());
}

} // namespace

box_error admission_gate(self_ptr self, const action_context& ctx) {
  if (!admission_mode(self))
    return {};
  auto err = admission_check(self, ctx);
  if (!replaying(self))
    log_decision(self, ctx, err);
  return err;
}

box_error admission_check(self_ptr self, const action_context& ctx) {
  if (!admission_mode(self))
    return {};
  auto err = check_entitlement(self, ctx);
  auto saved = persist(self);
  if (replaying(self))
    return saved;
  if (err)
    return err;
  if (saved)
    return saved;
  return check_grant(self, ctx);
}

void admission_gate_then(self_ptr self, const action_context& ctx, std::function<void(box_error)> next) {
  if (!admission_mode(self)) {
    next({});
    return;
  }
  auto err = check_entitlement(self, ctx);
  commit_then(self, [self, ctx, err, next = std::move(next)](box_error saved) {
    auto verdict = err ? err : saved ? saved : check_grant(self, ctx);
    log_decision(self, ctx, verdict);
    next(verdict);
  });
}

box_error tenant_gate(self_ptr self, const action_context& ctx, const payload_facts* facts,
                      const box_error& decode_error, bool sandbox) {
  auto err = pre_gate(self, ctx, facts, decode_error);
  if (!err) {
    if (self->state.admission->observe_generation(ctx.placement_generation))
      retire_stale(self);
    // Also the first generation seen, and a commit that failed before: retried here.
    err = persist(self);
  }
  if (!err && sandbox)
    err = admission_gate(self, ctx);
  // A refused request ends here: a workspace first seen by it is idle from now on.
  if (err && !replaying(self))
    report_idle(self);
  return err;
}

} // namespace boxrt::supervisor_detail
