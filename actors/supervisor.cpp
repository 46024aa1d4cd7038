#include "actors/supervisor_detail.hpp"

#include <mutex>

#include "actors/deadline.hpp"

namespace boxrt {

using namespace supervisor_detail;

namespace {

/// One workspace: its admission plane and its sessions.
supervisor_actor::behavior_type supervisor_behavior(self_ptr self, supervisor_args a) {
  auto& st = self->state;
  st.args = std::move(a);
  // The admission plane keeps the ids; the arguments give theirs up.
  st.admission = std::make_unique<workspace_admission>(std::move(st.args.instance_uuid),
                                                       std::move(st.args.workspace_uuid));
  if (st.args.store) {
    // The workspace serves nothing on a state it could not read: an empty one would
    // forget its revocations.
    auto record = st.args.record ? std::move(*st.args.record) : st.args.store->get(st.args.directory_key);
    st.args.record.reset();
    if (!record) {
      st.state_error = box_error{ec::box_error, "Admission state of this Workspace is "
                                                "unavailable: " + record.error().message};
    } else if (record.value()) {
      if (auto err = st.admission->restore(*record.value()))
        st.state_error = box_error{ec::box_error, "Admission state of this Workspace is "
                                                  "unavailable: " + err.message};
      else
        st.persisted = std::move(*record.value());
    }
    if (!st.state_error)
      publish_network_policy(self);
    if (st.state_error)
      spdlog::error("{}: {}", st.admission->box_ns(), st.state_error.message);
    arm_expiry(self);
  }
  self->set_down_handler([self](const caf::down_msg& dm) {
    auto& st = self->state;
    st.children->erase(dm.source);
    // A skill store that died is forgotten; the next skill request spawns a new one.
    if (st.skills && st.skills.address() == dm.source) {
      if (dm.reason && dm.reason != caf::exit_reason::normal
          && dm.reason != caf::exit_reason::user_shutdown)
        spdlog::error("supervisor {}: skill store stopped: {}", st.admission->box_ns(),
                      caf::to_string(dm.reason));
      st.skills = nullptr;
      return;
    }
    auto i = st.live.find(dm.source);
    if (i == st.live.end())
      return;
    auto id = i->second.id;
    release_slot(self, dm.source);
    st.live.erase(i);
    if (auto j = st.sessions.find(id); j != st.sessions.end() && j->second.actor
                                       && j->second.actor.address() == dm.source)
      st.sessions.erase(j);
    report_idle(self);
  });
  // Sessions never outlive their supervisor (the functor runs after the state is gone).
  self->attach_functor([kids = st.children](const caf::error&) {
    for (auto& [addr, session] : *kids)
      caf::anon_send_exit(session, caf::exit_reason::user_shutdown);
  });
  return {
    [self](exec_atom, exec_request& req) -> caf::result<exec_result> {
      if (auto err = pre_gate(self, req.ctx, &req.facts, req.decode_error)) {
        report_idle(self);
        return to_caf_error(err);
      }
      if (auto fast = fast_path(self, req))
        return self->delegate(fast->actor, exec_atom_v, std::move(fast->spec));
      auto rp = self->make_response_promise<exec_result>();
      open_session(self, std::move(req), rp,
                   [rp](const session_actor& a, session_entry& e, box_spec spec) mutable {
                     spec.session_id = e.logical_id;
                     rp.delegate(a, exec_atom_v, std::move(spec));
                   });
      return rp;
    },
    [self](xstream_atom, exec_stream_request& req) -> caf::result<stream_end> {
      if (auto err = pre_gate(self, req.exec.ctx, &req.exec.facts, req.exec.decode_error)) {
        report_idle(self);
        return to_caf_error(err);
      }
      if (auto fast = fast_path(self, req.exec))
        return self->delegate(fast->actor, xstream_atom_v, std::move(fast->spec), req.params);
      auto rp = self->make_response_promise<stream_end>();
      open_session(self, std::move(req.exec), rp,
                   [rp, params = req.params](const session_actor& a, session_entry& e,
                                             box_spec spec) mutable {
                     spec.session_id = e.logical_id;
                     rp.delegate(a, xstream_atom_v, std::move(spec), params);
                   });
      return rp;
    },
    [self](create_atom, exec_request& req) -> caf::result<session_info> {
      if (auto err = pre_gate(self, req.ctx, &req.facts, req.decode_error)) {
        report_idle(self);
        return to_caf_error(err);
      }
      auto rp = self->make_response_promise<session_info>();
      open_session(self, std::move(req), rp,
                   [rp](const session_actor& a, session_entry&, box_spec) mutable {
                     rp.delegate(a, create_atom_v);
                   });
      return rp;
    },
    [self](file_atom, file_request& req) -> caf::result<file_result> {
      // box_exec's gate: the generation, the forged-field rules on the payload, then the
      // session's own checks with the entitlement and the grant (docs/files.md).
      if (auto err = pre_gate(self, req.ctx, &req.facts, req.decode_error))
        return refused(self, err);
      session_request s{req.ctx, req.session_id, {}};
      auto found = find_session(self, s);
      if (!found)
        return refused(self, found.error());
      auto i = self->state.sessions.find(found->physical);
      if (!i->second.actor)
        return to_caf_error({ec::session_not_found, "session " + found->logical + " not found"});
      return self->delegate(i->second.actor, file_atom_v, std::move(req.op), req.limits);
    },
    [self](pstart_atom, process_request& req) -> caf::result<process_info> {
      auto found = find_process_session(self, req);
      if (!found)
        return refused(self, found.error());
      return self->delegate(found.value(), pstart_atom_v, std::move(req.spec));
    },
    [self](pget_atom, process_request& req) -> caf::result<process_info> {
      auto found = find_process_session(self, req);
      if (!found)
        return refused(self, found.error());
      return self->delegate(found.value(), pget_atom_v, std::move(req.process_id));
    },
    [self](pstop_atom, process_request& req) -> caf::result<std::string> {
      auto found = find_process_session(self, req);
      if (!found)
        return refused(self, found.error());
      return self->delegate(found.value(), pstop_atom_v, std::move(req.process_id));
    },
    [self](relay_atom, relay_request& req) -> caf::result<relay_verdict> {
      auto verdict = relay_check(self, req);
      if (std::exchange(self->state.replay, false))
        return caf::skip; // taken up again once the admission state is durable
      return verdict;
    },
    [self](attach_atom, relay_request& req) -> caf::result<bool> {
      // The handshake's checks again: the fence or the process may have moved since.
      auto verdict = relay_check(self, req);
      if (std::exchange(self->state.replay, false))
        return caf::skip;
      if (verdict.status == 401)
        return to_caf_error({ec::permission, stale_generation_text});
      if (verdict.status != 0)
        return to_caf_error(verdict.error);
      auto& session = self->state.sessions.find(req.session_id)->second.actor;
      return self->delegate(session, attach_atom_v, std::move(req.process_id),
                            req.attach_wait_ms, req.pump);
    },
    [self](skill_atom, skill_request& req) -> caf::result<std::string> {
      // Fenced; in admission mode also the entitlement gate (Cloud skill APIs need it).
      if (auto err = tenant_gate(self, req.ctx, nullptr, req.decode_error, true)) {
        auto answer = refused(self, err);
        // The upload was handed over with the request: refused, it goes now (not when
        // the request is only waiting for a commit).
        if (!answer.skip && !req.file_path.empty())
          self->state.args.pool->submit([path = req.file_path] { ::unlink(path.c_str()); });
        return answer;
      }
      // Asked, not delegated: the supervisor counts the request until its reply, so it
      // is never evicted (and its skill store with it) while one is in flight.
      auto rp = self->make_response_promise<std::string>();
      self->state.skill_waits += 1;
      auto done = [self] {
        self->state.skill_waits -= 1;
        report_idle(self);
      };
      self->request(skill_store(self), action_deadline(config(self).limits), skill_atom_v,
                    skill_job{std::move(req.action), std::move(req.data_json),
                              std::move(req.file_path), admission_mode(self)})
        .then(
          [rp, done](std::string& out) mutable {
            rp.deliver(std::move(out));
            done();
          },
          [rp, done](caf::error& err) mutable {
            rp.deliver(std::move(err));
            done();
          });
      return rp;
    },
    [self](caf::get_atom, session_request& req) -> caf::result<session_info> {
      auto found = find_session(self, req);
      if (!found)
        return refused(self, found.error());
      auto i = self->state.sessions.find(found->physical);
      if (!i->second.actor)
        return to_caf_error({ec::session_not_found, "session " + found->logical + " not found"});
      return self->delegate(i->second.actor, caf::get_atom_v);
    },
    [self](caf::delete_atom, session_request& req) -> caf::result<std::string> {
      auto found = find_session(self, req);
      if (!found)
        return refused(self, found.error());
      auto rp = self->make_response_promise<std::string>();
      auto sent = req.session_id;
      auto id = found->physical;
      stop_sessions(self, [&](const std::string& k, const session_entry&) { return k == id; },
                    box_error{ec::session_not_found, "session " + found->logical + " is being deleted"},
                    [rp, sent](int64_t) mutable { rp.deliver(sent); });
      return rp;
    },
    [self](list_atom, action_context& ctx) -> caf::result<std::vector<session_info>> {
      if (auto err = tenant_gate(self, ctx, nullptr, {}, true))
        return refused(self, err);
      std::vector<session_actor> targets;
      for (auto& [id, e] : self->state.sessions)
        if (e.actor && e.generation == ctx.placement_generation)
          targets.push_back(e.actor);
      if (targets.empty())
        return std::vector<session_info>{};
      auto rp = self->make_response_promise<std::vector<session_info>>();
      auto acc = std::make_shared<std::vector<session_info>>();
      auto remaining = std::make_shared<size_t>(targets.size());
      auto finish = [rp, acc, remaining]() mutable {
        if (--*remaining > 0)
          return;
        std::sort(acc->begin(), acc->end(),
                  [](const session_info& x, const session_info& y) { return x.session_id < y.session_id; });
        rp.deliver(std::move(*acc));
      };
      for (auto& t : targets)
        self->request(t, control_timeout, caf::get_atom_v)
          .then([acc, finish](session_info& info) mutable {
                  acc->push_back(std::move(info));
                  finish();
                },
                [finish](caf::error&) mutable { finish(); });
      return rp;
    },
    [self](status_atom, action_context& ctx) -> caf::result<status_info> {
      return workspace_status(self, ctx);
    },
    [self](storage_atom, action_context& ctx) -> caf::result<storage_report> {
      return storage_analysis(self, ctx);
    },
    // Each change is committed before its reply; a revocation stops the sessions
    // even when the commit fails (the reply then says so).
    [self](entitle_atom, entitlement_snapshot& snap) -> caf::result<entitlement_receipt> {
      if (self->state.state_error)
        return to_caf_error(self->state.state_error);
      auto before = std::make_shared<workspace_admission>(*self->state.admission);
      auto outcome = self->state.admission->put_snapshot(snap, wall_now_us() / 1000000);
      if (!outcome)
        return to_caf_error(outcome.error());
      auto rp = self->make_response_promise<entitlement_receipt>();
      commit_then(self, [self, rp, before, out = std::move(outcome.value())](box_error saved) mutable {
        // A snapshot that admits is not kept unless durable; one that revokes is kept
        // (it fails closed) and its commit retried by the next request.
        if (saved && out.effect != session_effect::stop_all) {
          *self->state.admission = *before;
          rp.deliver(to_caf_error(saved));
          report_idle(self);
          return;
        }
        arm_expiry(self);
        // An entitlement that withdraws the sandbox is a revocation.
        if (out.effect == session_effect::stop_all)
          metrics::boxd().revocations.inc();
        reply_after_effect(self, rp, out.effect, out.receipt, saved);
      });
      return rp;
    },
    [self](netpol_atom, network_policy_request& req) -> caf::result<network_policy_reply> {
      return network_policy_action(self, req);
    },
    [self](grant_atom, admission_grant& grant) -> caf::result<grant_receipt> {
      if (self->state.state_error)
        return to_caf_error(self->state.state_error);
      auto before = std::make_shared<workspace_admission>(*self->state.admission);
      auto outcome = self->state.admission->upsert_grant(grant, config(self), wall_now_us());
      if (!outcome)
        return to_caf_error(outcome.error());
      auto rp = self->make_response_promise<grant_receipt>();
      commit_then(self, [self, rp, before, out = std::move(outcome.value())](box_error saved) mutable {
        // A grant that is not durable is not installed: the host is told it failed.
        if (saved) {
          *self->state.admission = *before;
          rp.deliver(to_caf_error(saved));
          report_idle(self);
          return;
        }
        if (out.fence_advanced)
          retire_stale(self);
        arm_expiry(self);
        reply_after_effect(self, rp, out.effect, out.receipt);
      });
      return rp;
    },
    [self](revoke_atom, admission_revocation& rev) -> caf::result<revocation_receipt> {
      if (self->state.state_error)
        return to_caf_error(self->state.state_error);
      auto outcome = self->state.admission->revoke(rev, config(self));
      if (!outcome)
        return to_caf_error(outcome.error());
      metrics::boxd().revocations.inc();
      auto rp = self->make_response_promise<revocation_receipt>();
      commit_then(self, [self, rp, out = std::move(outcome.value())](box_error saved) mutable {
        reply_after_effect(self, rp, out.effect, out.receipt, saved);
      });
      return rp;
    },
    [self](settings_atom, instance_settings& s) {
      self->state.args.settings = shared_settings(std::move(s));
    },
    [self](done_atom, uint64_t token) {
      self->state.jobs.finish(token);
      report_idle(self);
    },
    [self](evict_atom) -> bool {
      auto& st = self->state;
      bool idle = idle_now(st);
      if (idle)
        self->quit();
      else
        st.reported_idle = false; // the directory forgot it: the next report is news
      return idle;
    },
    [self](closing_atom, std::string& id) {
      // The session is stopping by itself: new requests get a fresh session.
      auto& st = self->state;
      if (auto i = st.sessions.find(id); i != st.sessions.end() && i->second.actor
                                         && st.live.count(i->second.actor.address()))
        st.sessions.erase(i);
    },
    [self](idle_atom, std::string& id, uint64_t seen) {
      auto& st = self->state;
      auto i = st.sessions.find(id);
      if (i == st.sessions.end() || !i->second.actor || i->second.forwarded != seen)
        return; // a command is on its way: the session stays
      spdlog::info("{}: session {} idle past its TTL, reaping", st.admission->box_ns(), id);
      stop_sessions(self, [id](const std::string& k, const session_entry&) { return k == id; },
                    box_error{ec::session_not_found, "session " + i->second.logical_id
                                                       + " is being deleted"},
                    nullptr);
    },
    [self](expire_atom, uint64_t token) {
      auto& st = self->state;
      if (token != st.expiry_token)
        return;
      st.armed_expiry = 0;
      auto effect = st.admission->on_expiry(wall_now_us(), config(self).admission);
      // A failed commit is logged; nothing waits for a reply here.
      commit_then(self, [self, effect](box_error) {
        arm_expiry(self);
        apply_effect(self, effect, [self](int64_t) { report_idle(self); });
      });
    },
    [self](ps_atom) -> caf::result<std::vector<ps_entry>> { return list_sessions(self); },
    [self](shutdown_atom) -> caf::result<int64_t> {
      auto rp = self->make_response_promise<int64_t>();
      stop_all(self, box_error{ec::runtime_unavailable, shutting_down_text},
               [rp](int64_t n) mutable { rp.deliver(n); });
      return rp;
    },
  };
}

} // namespace

std::shared_ptr<const instance_settings> shared_settings(instance_settings s) {
  static std::mutex mtx;
  static std::weak_ptr<const instance_settings> last;
  std::lock_guard guard{mtx};
  if (auto kept = last.lock(); kept && *kept == s)
    return kept;
  auto fresh = std::make_shared<const instance_settings>(std::move(s));
  last = fresh;
  return fresh;
}

supervisor_actor spawn_supervisor(caf::local_actor* parent, supervisor_args args) {
  return parent->spawn(supervisor_behavior, std::move(args));
}

} // namespace boxrt
