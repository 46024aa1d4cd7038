// The supervisor's session steps: the placement fence, finding or creating a session,
// the workspace's skill store, the relay checks and the fast path.
#include "actors/supervisor_detail.hpp"

namespace boxrt::supervisor_detail {

void advance_then(self_ptr self, const action_context& ctx, std::function<void(box_error)> next) {
  auto gen = ctx.placement_generation;
  if (!self->state.admission->observe_generation(gen)) {
    // The first generation seen sets the fence too; a failed commit is retried here.
    commit_then(self, [self, ctx, next](box_error err) {
      if (err) {
        next(err);
        return;
      }
      admission_gate_then(self, ctx, next);
    });
    return;
  }
  commit_then(self, [self, ctx, next, gen](box_error saved) {
    auto old = [gen](const std::string&, const session_entry& e) { return e.generation < gen; };
    stop_sessions(self, old, stale_error(), [self, ctx, next, saved](int64_t) {
      if (saved) {
        next(saved);
        return;
      }
      if (auto err = self->state.admission->check_generation(ctx.placement_generation)) {
        next(err);
        return;
      }
      admission_gate_then(self, ctx, next);
    });
  });
}

waiter waiter_for(self_ptr self, const std::string& id,
                  std::function<void(const session_actor&, session_entry&)> use,
                  std::function<void(const box_error&)> fail) {
  return {[self, id, use](const session_actor& a) {
            auto j = self->state.sessions.find(id);
            if (j != self->state.sessions.end()) {
              ++j->second.forwarded;
              use(a, j->second);
            }
          },
          std::move(fail)};
}

void with_session(self_ptr self, const action_context& ctx, box_spec spec,
                  std::function<void(const session_actor&, session_entry&)> use,
                  std::function<void(const box_error&)> fail) {
  auto& st = self->state;
  const auto& s = *st.args.settings;
  auto phys = physical_id(self, ctx.placement_generation, spec.session_id);
  if (!phys) {
    // langbot-plugin 0.7.13 answers a ValueError of exec and create_session (a session
    // id with nothing usable in it) as a BoxValidationError.
    auto err = phys.error();
    if (err.code == ec::value)
      err.code = ec::validation;
    fail(err);
    return;
  }
  auto& id = phys.value();
  // A spec the backend would refuse at start never replaces a session.
  if (auto backend = st.args.backend->get())
    if (auto err = backend->check_spec(spec)) {
      fail(err);
      return;
    }
  auto logical = spec.session_id;
  auto mounts = extra_mount_key(spec);
  if (auto i = st.sessions.find(id); i != st.sessions.end()) {
    if (auto err = check_compat(i->second, spec)) {
      fail(err);
      return;
    }
    if (i->second.mounts == mounts) {
      if (i->second.actor) {
        ++i->second.forwarded;
        use(i->second.actor, i->second);
      } else {
        i->second.waiting.push_back(waiter_for(self, id, use, fail));
      }
      return;
    }
    // A mount cannot be added to a running sandbox: replace the session.
    stop_sessions(self, [id](const std::string& k, const session_entry&) { return k == id; },
                  box_error{ec::session_not_found, "session " + logical + " is being deleted"},
                  nullptr);
  }
  if (!st.args.backend->get() || !s.backend_available) {
    fail(box_error{ec::backend_unavailable, backend_unavailable_message()});
    return;
  }
  // Per-workspace caps: the admission grant's, or boxd's own in standard mode.
  auto count = static_cast<int64_t>(st.sessions.size());
  if (admission_mode(self)) {
    const auto& grant = st.admission->grant();
    int64_t max = grant ? grant->max_sessions : 0;
    if (count > max) {
      fail(box_error{ec::admission, "Sandbox admission session limit exceeded"});
      return;
    }
    if (count >= max) {
      fail(box_error{ec::admission, "Sandbox admission session limit reached"});
      return;
    }
  } else if (count >= s.config.limits.max_sessions_per_workspace) {
    fail(box_error{ec::capacity_exceeded, "Box workspace session capacity reached ("
                                            + std::to_string(s.config.limits.max_sessions_per_workspace)
                                            + ")"});
    return;
  }
  session_entry entry;
  entry.reservation = st.next_reservation++;
  entry.logical_id = logical;
  entry.generation = ctx.placement_generation;
  spec.session_id = id;
  auto first = std::make_shared<const box_spec>(std::move(spec));
  entry.compat = first;
  entry.mounts = mounts;
  entry.waiting.push_back(waiter_for(self, id, use, fail));
  auto reservation = entry.reservation;
  st.sessions.emplace(id, std::move(entry));
  auto directory = st.args.directory;
  self->request(directory, control_timeout, slot_atom_v)
    .then(
      [self, id, reservation, first, logical, directory](bool granted) mutable {
        auto& st = self->state;
        auto i = st.sessions.find(id);
        bool still_wanted = i != st.sessions.end() && i->second.reservation == reservation;
        if (!granted) {
          if (still_wanted) {
            auto waiting = std::move(i->second.waiting);
            st.sessions.erase(i);
            box_error err{ec::capacity_exceeded,
                          "Box session capacity reached ("
                            + std::to_string(config(self).limits.max_sessions) + ")"};
            for (auto& w : waiting)
              w.fail(err);
          }
          report_idle(self);
          return;
        }
        if (!still_wanted) {
          self->send(directory, release_atom_v);
          return;
        }
        session_args a;
        // Read now: a box_init may have selected another backend while no session
        // existed (the directory holds slot grants back while it does).
        a.backend = st.args.backend->get();
        if (!a.backend) {
          self->send(directory, release_atom_v);
          auto waiting = std::move(i->second.waiting);
          st.sessions.erase(i);
          for (auto& w : waiting)
            w.fail(box_error{ec::backend_unavailable, backend_unavailable_message()});
          report_idle(self);
          return;
        }
        a.pool = st.args.pool;
        a.workspace_ns = st.admission->box_ns();
        a.supervisor = caf::actor_cast<supervisor_actor>(self);
        a.physical_id = id;
        a.logical_id = logical;
        a.spec = first;
        a.limits.max_output_bytes = config(self).limits.max_output_bytes;
        a.ttl_sec = config(self).limits.session_ttl_sec;
        a.local = std::shared_ptr<const local_config>(self->state.args.settings,
                                                      &self->state.args.settings->config.local);
        a.processes = st.args.processes;
        a.max_managed_processes = config(self).limits.max_managed_processes;
        a.max_completed_processes = config(self).limits.max_completed_processes;
        a.completed_process_retention_sec = config(self).limits.completed_process_retention_sec;
        auto actor = spawn_session(self, std::move(a));
        self->monitor(actor);
        st.children->emplace(actor.address(), caf::actor_cast<caf::actor>(actor));
        st.live.emplace(actor.address(), supervisor_state::live_session{id});
        i->second.actor = actor;
        auto waiting = std::move(i->second.waiting);
        for (auto& w : waiting)
          w.go(actor);
      },
      [self, id, reservation](caf::error& err) {
        auto& st = self->state;
        auto i = st.sessions.find(id);
        if (i == st.sessions.end() || i->second.reservation != reservation)
          return;
        auto waiting = std::move(i->second.waiting);
        st.sessions.erase(i);
        for (auto& w : waiting)
          w.fail(from_caf_error(err));
        report_idle(self);
      });
}

skill_actor skill_store(self_ptr self) {
  auto& st = self->state;
  // Resolving touches the filesystem: once per config, not per request.
  if (!st.skills_local || !(*st.skills_local == config(self).local)) {
    st.skills_local = config(self).local;
    st.skills_resolved = resolve_local(config(self).local).skills_root;
  }
  auto root = st.skills_resolved + "/tenants/" + st.admission->box_ns();
  if (!st.skills || st.skills_root != root) {
    if (st.skills)
      caf::anon_send_exit(st.skills, caf::exit_reason::user_shutdown);
    st.skills = spawn_skill_store(self, root, st.args.pool, st.args.backend->get());
    self->monitor(st.skills);
    st.skills_root = root;
    st.children->emplace(st.skills.address(), caf::actor_cast<caf::actor>(st.skills));
  }
  return st.skills;
}

result<box_spec> prepare_spec(self_ptr self, const exec_request& req, const std::string& skill_root,
                              const mounts_outcome& mounts) {
  auto spec = req.spec;
  // The exec timeout ceiling (box.limits.max_timeout_sec) clamps in both modes: the
  // reference has no bound in standard mode, the default 3600 s keeps LangBot's 300 s
  // RPC timeout the tighter one.
  spec.timeout_sec = std::min(spec.timeout_sec, config(self).limits.max_timeout_sec);
  if (!admission_mode(self))
    return spec;
  auto name = std::string{py::strip(spec.skill_name)};
  auto out = self->state.admission->normalize(std::move(spec), config(self).admission,
                                              tenant_path(self), !skill_root.empty(), mounts);
  if (out && !name.empty())
    out->extra_mounts.push_back(
      mount_spec{skill_root, std::string{"/workspace/.skills/"} + name, mount_mode::ro, {}, {}, true});
  return out;
}

void admit_mounts(self_ptr self, const exec_request& req, std::function<void(mounts_outcome)> next) {
  if (!admission_mode(self) || req.spec.extra_mounts.empty()) {
    next({});
    return;
  }
  on_pool(
    self,
    [mounts = req.spec.extra_mounts, roots = config(self).local.allowed_mount_roots,
     fence = make_mount_fence(config(self).local, self->state.admission->box_ns(), tenant_path(self),
                              self->state.args.settings->transfer_dir)] {
      mounts_outcome out;
      auto admitted = admit_read_only_mounts(mounts, roots, fence);
      if (admitted)
        out.mounts = std::move(admitted.value());
      else
        out.error = admitted.error();
      return out;
    },
    [next = std::move(next)](std::optional<mounts_outcome> out) mutable {
      if (!out) {
        out.emplace();
        out->error = box_error{ec::box_error, "Managed sandbox read-only mounts could not be checked"};
      }
      next(std::move(*out));
    });
}

void recheck_after_wait(self_ptr self, const exec_request& req, std::function<void(box_error)> next) {
  // resolve_skill and admit_mounts wait only in admission mode, for a skill name or
  // extra mounts.
  bool waited = admission_mode(self)
                && (!py::strip(req.spec.skill_name).empty() || !req.spec.extra_mounts.empty());
  if (!waited) {
    next({});
    return;
  }
  if (auto err = self->state.admission->check_generation(req.ctx.placement_generation)) {
    next(err);
    return;
  }
  admission_gate_then(self, req.ctx, std::move(next));
}

void resolve_skill(self_ptr self, const exec_request& req, std::function<void(std::string)> next) {
  auto name = std::string{py::strip(req.spec.skill_name)};
  if (!admission_mode(self) || name.empty()) {
    next({});
    return;
  }
  self->request(skill_store(self), control_timeout, resolve_atom_v, std::move(name))
    .then(
      [next](const std::string& package_root) { next(package_root); },
      [next](caf::error&) { next({}); });
}

result<named_session> find_session(self_ptr self, const session_request& req) {
  if (auto err = tenant_gate(self, req.ctx, nullptr, req.decode_error, true))
    return err;
  std::string logical{py::strip(req.session_id)};
  if (admission_mode(self))
    if (auto err = workspace_admission::check_logical_session(logical, config(self).admission))
      return err;
  auto id = physical_id(self, req.ctx.placement_generation, logical);
  if (!id)
    return id.error();
  if (self->state.sessions.find(id.value()) == self->state.sessions.end())
    return box_error{ec::session_not_found, "session " + logical + " not found"};
  return named_session{std::move(logical), std::move(id.value())};
}

result<session_actor> find_process_session(self_ptr self, const process_request& req) {
  // Before any other check, as the reference refuses them.
  if (admission_mode(self))
    return box_error{ec::admission, "Managed processes are disabled for Cloud sandboxes"};
  session_request s{req.ctx, req.session_id, req.decode_error};
  auto found = find_session(self, s);
  if (!found)
    return found.error();
  auto i = self->state.sessions.find(found->physical);
  if (!i->second.actor)
    return box_error{ec::session_not_found, "session " + found->logical + " not found"};
  return i->second.actor;
}

relay_verdict relay_check(self_ptr self, const relay_request& req) {
  auto& st = self->state;
  auto unauthorized = relay_verdict{401, {}};
  // 4: the fence holds exactly this generation.
  if (st.admission->generation() != req.generation)
    return unauthorized;
  // 5: in admission mode the sandbox admission must pass first (its refusal is the 400
  // body); then no grant permits a relay (admission policies force
  // max_managed_processes to 0).
  if (admission_mode(self)) {
    action_context ctx;
    ctx.instance_uuid = req.instance_uuid;
    ctx.workspace_uuid = req.workspace_uuid;
    ctx.placement_generation = req.generation;
    if (auto err = admission_gate(self, ctx))
      return {err.code == ec::admission || err.code == ec::readiness ? 400 : 401, err};
    return {400, {ec::admission, "Sandbox admission grant does not permit managed process relay"}};
  }
  // 6: a physical id of this exact placement, with a tail.
  auto prefix = runtime_namespace(req.instance_uuid, req.workspace_uuid, req.generation) + "-";
  if (!req.session_id.starts_with(prefix) || req.session_id.size() == prefix.size())
    return unauthorized;
  // 7 to 9: the session, the process, running.
  auto i = st.sessions.find(req.session_id);
  if (i == st.sessions.end() || !i->second.actor || i->second.generation != req.generation)
    return {400, {ec::session_not_found, "session " + req.session_id + " not found"}};
  auto entry = st.args.processes ? st.args.processes->find(req.session_id, req.process_id) : nullptr;
  if (!entry)
    return {400, {ec::process_not_found, "session " + req.session_id
                                           + " has no managed process with process_id=" + req.process_id}};
  if (entry->process->exit_code())
    return {400, {ec::process_conflict, "managed process " + req.process_id + " in session "
                                          + req.session_id + " is not running"}};
  return {};
}

std::optional<ready_session> fast_path(self_ptr self, exec_request& req) {
  auto& st = self->state;
  if (admission_mode(self) || req.ctx.placement_generation != st.admission->generation())
    return std::nullopt;
  auto phys = physical_id(self, req.ctx.placement_generation, req.spec.session_id);
  if (!phys)
    return std::nullopt;
  auto i = st.sessions.find(phys.value());
  if (i == st.sessions.end() || !i->second.actor || check_compat(i->second, req.spec)
      || i->second.mounts != extra_mount_key(req.spec))
    return std::nullopt;
  ++i->second.forwarded;
  req.spec.timeout_sec = std::min(req.spec.timeout_sec, config(self).limits.max_timeout_sec);
  return ready_session{i->second.actor, std::move(req.spec)};
}

} // namespace boxrt::supervisor_detail
