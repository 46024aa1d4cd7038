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
  return st.sessions.empty() && st.live.empty() && st.pool_waits.empty()
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

box_error persist(self_ptr self) {
  auto& st = self->state;
  if (!st.args.store)
    return {};
  // Nothing of safety meaning yet (and never stored): no row, no commit.
  if (st.persisted.empty() && st.admission->evictable())
    return {};
  auto now = st.admission->durable_state();
  if (now == st.persisted)
    return {};
  if (auto err = st.args.store->put(st.args.directory_key, now)) {
    spdlog::error("{}: {}", st.admission->box_ns(), err.message);
    return err;
  }
  st.persisted = std::move(now);
  return {};
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

box_error admission_gate(self_ptr self, const action_context& ctx) {
  if (!admission_mode(self))
    return {};
  auto err = admission_check(self, ctx);
  if (err)
    metrics::boxd().admission_decisions.with({"refuse", metrics::reason_slug(err.message)}).inc();
  else
    metrics::boxd().admission_decisions.with({"admit", "grant"}).inc();
  logs::event(logs::level::info, "admission",
              {{"ws", self->state.admission->box_ns()},
               {"generation", ctx.placement_generation},
               {"decision", err ? "refuse" : "admit"},
               {"reason", err ? err.to_wire() : std::string{"grant"}}});
  return err;
}

box_error admission_check(self_ptr self, const action_context& ctx) {
  auto& st = self->state;
  auto& adm = *st.admission;
  if (!admission_mode(self))
    return {};
  auto effect = session_effect::none;
  auto err = adm.check_entitlement(ctx, config(self).admission, wall_now_us(), effect);
  auto saved = persist(self);
  if (effect != session_effect::none)
    apply_effect(self, effect, [](int64_t) {});
  arm_expiry(self);
  if (err)
    return err;
  if (saved)
    return saved;
  const auto& s = *st.args.settings;
  if (!s.ready) {
    runtime_readiness r;
    r.ready = false;
    r.admission_mode = s.admission_mode;
    r.checks = s.checks;
    return readiness_error(r);
  }
  return adm.check_grant(ctx, config(self).admission, wall_now_us());
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
  if (err)
    report_idle(self);
  return err;
}

} // namespace boxrt::supervisor_detail
