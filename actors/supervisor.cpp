#include "actors/supervisor.hpp"

#include <algorithm>
#include <functional>
#include <optional>
#include <unordered_map>

#include <unistd.h>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/admission.hpp"
#include "actors/caf_support.hpp"
#include "actors/session.hpp"
#include "actors/skills.hpp"
#include "backends/mount_policy.hpp"
#include "backends/registry.hpp"
#include "backends/skill_actions.hpp"
#include "messages/base/pytext.hpp"
#include "messages/json.hpp"
#include "messages/tenancy.hpp"
#include "messages/time.hpp"

namespace boxrt {

namespace {

/// A request waiting for its session actor while a global session slot is reserved.
struct waiter {
  std::function<void(const session_actor&)> go;
  std::function<void(const box_error&)> fail;
};

struct session_entry {
  session_actor actor;  // invalid while the slot is being reserved
  uint64_t reservation = 0;
  std::string logical_id;
  int64_t generation = 0;
  session_info compat;
  std::vector<mount_spec> mounts;
  uint64_t forwarded = 0;
  std::vector<waiter> waiting;
};

struct supervisor_state {
  static inline const char* name = "boxrt.supervisor";

  supervisor_args args;
  std::unique_ptr<workspace_admission> admission;
  std::unordered_map<std::string, session_entry> sessions;
  /// Session actors alive (including ones being stopped) by address, and whether their
  /// global session slot was given back already.
  struct live_session {
    std::string id;
    bool released = false;
  };
  std::unordered_map<caf::actor_addr, live_session> live;
  uint64_t next_reservation = 1;
  uint64_t expiry_token = 0;
  int64_t armed_expiry = 0;
  bool reported_idle = false;
  /// The workspace's skill-store actor (spawned on first use) and the root it serves.
  skill_actor skills;
  std::string skills_root;
  std::optional<local_config> skills_local;
  std::string skills_resolved;
  /// The admission state as last committed to the store.
  std::string persisted;
  /// Set when the workspace's durable state could not be read: it serves nothing.
  box_error state_error;
  /// Every live session actor, shared with the exit functor.
  std::shared_ptr<std::unordered_map<caf::actor_addr, caf::actor>> children
    = std::make_shared<std::unordered_map<caf::actor_addr, caf::actor>>();
};

using self_ptr = supervisor_actor::stateful_pointer<supervisor_state>;

const box_config& config(self_ptr self) {
  return self->state.args.settings.config;
}

bool admission_mode(self_ptr self) {
  return config(self).admission_mode();
}

std::string tenant_path(self_ptr self) {
  return tenant_workspace_path(config(self), self->state.admission->box_ns());
}

box_error stale_error() {
  return box_error{ec::permission, "Stale Box placement generation"};
}

/// The reference's compat check: first differing field, in the reference's order.
box_error check_compat(const session_entry& e, const box_spec& spec) {
  const auto& have = e.compat;
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

/// Gives the session's global slot back once its sandbox is gone (stop reply or down).
void release_slot(self_ptr self, const caf::actor_addr& addr) {
  auto& st = self->state;
  auto i = st.live.find(addr);
  if (i == st.live.end() || i->second.released)
    return;
  i->second.released = true;
  self->send(caf::actor_cast<directory_actor>(st.args.directory), release_atom_v);
}

/// The physical id of `logical` at `gen` in this workspace. The namespace is this
/// supervisor's own, computed once, so the hot path hashes nothing for plain ids.
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

void report_idle(self_ptr self) {
  auto& st = self->state;
  bool idle = st.sessions.empty() && st.live.empty() && st.admission->evictable();
  if (idle == st.reported_idle)
    return;
  st.reported_idle = idle;
  self->send(caf::actor_cast<directory_actor>(st.args.directory), idle_atom_v,
             st.args.directory_key, idle);
}

/// Stops every session matching `pred`; calls `done(count)` once all have stopped.
/// Entries are forgotten at once so that new requests start fresh sessions.
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
    self->request(t, caf::infinite, stop_atom_v, reason)
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

/// Retires sessions of generations older than the fence (their requests get the
/// stale error instead of waiting forever).
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

/// Commits the admission state when it changed (contract §4.11): callers do so before
/// the reply that depends on it.
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

/// The checks that change nothing, in order: fence staleness, forged fields
/// (admission mode), decode errors.
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

/// For sandbox actions in admission mode: entitlement, readiness and grant.
box_error admission_gate(self_ptr self, const action_context& ctx) {
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
  const auto& s = st.args.settings;
  if (!s.ready) {
    runtime_readiness r;
    r.ready = false;
    r.admission_mode = s.admission_mode;
    r.checks = s.checks;
    return readiness_error(r);
  }
  return adm.check_grant(ctx, config(self).admission, wall_now_us());
}

/// The whole gate for actions that do not start sessions: the fence advances without
/// waiting for the retired sessions to stop.
box_error tenant_gate(self_ptr self, const action_context& ctx, const payload_facts* facts,
                      const box_error& decode_error, bool sandbox) {
  if (auto err = pre_gate(self, ctx, facts, decode_error))
    return err;
  if (self->state.admission->observe_generation(ctx.placement_generation))
    retire_stale(self);
  // Also the first generation seen, and a commit that failed before: retried here.
  if (auto err = persist(self))
    return err;
  return sandbox ? admission_gate(self, ctx) : box_error{};
}

/// Advances the fence to ctx's generation and runs `next` once the retired sessions
/// have stopped, so a new generation's sandbox never overlaps the old one's. The
/// generation is checked again then: another advance may have come meanwhile.
void advance_then(self_ptr self, const action_context& ctx, std::function<void(box_error)> next) {
  auto gen = ctx.placement_generation;
  if (!self->state.admission->observe_generation(gen)) {
    // The first generation seen sets the fence too; a failed commit is retried here.
    if (auto err = persist(self)) {
      next(err);
      return;
    }
    next(admission_gate(self, ctx));
    return;
  }
  auto saved = persist(self);
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
    next(admission_gate(self, ctx));
  });
}

/// A request waiting on the entry `id` while its slot is reserved: once the session
/// actor exists it is counted as forwarded and handed to `use`.
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

/// Finds or creates the session for `spec` (already normalised, session_id logical),
/// then calls `use` with the session actor, or fails `fail`.
void with_session(self_ptr self, const action_context& ctx, box_spec spec,
                  std::function<void(const session_actor&, session_entry&)> use,
                  std::function<void(const box_error&)> fail) {
  auto& st = self->state;
  const auto& s = st.args.settings;
  auto phys = physical_id(self, ctx.placement_generation, spec.session_id);
  if (!phys) {
    fail(phys.error());
    return;
  }
  auto& id = phys.value();
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
  if (!st.args.backend || !s.backend_available) {
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
  entry.compat = session_info_from_spec(spec);
  entry.mounts = mounts;
  entry.waiting.push_back(waiter_for(self, id, use, fail));
  auto reservation = entry.reservation;
  st.sessions.emplace(id, std::move(entry));
  spec.session_id = id;
  auto directory = caf::actor_cast<directory_actor>(st.args.directory);
  self->request(directory, caf::infinite, slot_atom_v)
    .then(
      [self, id, reservation, spec, logical, directory](bool granted) mutable {
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
        a.backend = st.args.backend;
        a.pool = st.args.pool;
        a.supervisor = caf::actor_cast<caf::actor>(self);
        a.physical_id = id;
        a.logical_id = logical;
        a.spec = spec;
        a.limits.max_output_bytes = config(self).limits.max_output_bytes;
        a.ttl_sec = config(self).limits.session_ttl_sec;
        a.local = config(self).local;
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

/// The workspace's skill-store actor, spawned on first use (and again when box_init
/// moved the skills root).
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
    st.skills = spawn_skill_store(self, root, st.args.pool, st.args.backend);
    st.skills_root = root;
    st.children->emplace(st.skills.address(), caf::actor_cast<caf::actor>(st.skills));
  }
  return st.skills;
}

/// Standard-mode or admission-mode preparation of an exec/create spec: the timeout
/// ceiling in both, the policy in admission mode, where `skill_root` is the package of
/// spec.skill_name ("" = none or unavailable),
/// mounted read-only at /workspace/.skills/<name>.
result<box_spec> prepare_spec(self_ptr self, const exec_request& req, const std::string& skill_root) {
  auto spec = req.spec;
  // The exec timeout ceiling (box.limits.max_timeout_sec) clamps in both modes: the
  // reference has no bound in standard mode, the default 3600 s keeps LangBot's 300 s
  // RPC timeout the tighter one.
  spec.timeout_sec = std::min(spec.timeout_sec, config(self).limits.max_timeout_sec);
  if (!admission_mode(self))
    return spec;
  auto name = std::string{py::strip(spec.skill_name)};
  auto out = self->state.admission->normalize(std::move(spec), config(self).admission,
                                              tenant_path(self), !skill_root.empty());
  if (out && !name.empty())
    out->extra_mounts.push_back(mount_spec{skill_root, std::string{"/workspace/.skills/"} + name, mount_mode::ro});
  return out;
}

/// Resolves spec.skill_name in the workspace's own skill store (admission mode only),
/// then calls `next` with the package root ("" when there is none to mount).
void resolve_skill(self_ptr self, const exec_request& req, std::function<void(std::string)> next) {
  auto name = std::string{py::strip(req.spec.skill_name)};
  if (!admission_mode(self) || name.empty()) {
    next({});
    return;
  }
  json::writer w;
  w.begin_object();
  w.key("name").value(name);
  w.end_object();
  self->request(skill_store(self), caf::infinite, skill_atom_v,
                skill_job{resolve_skill_action, w.take(), {}, true})
    .then(
      [next](const std::string& package_root) { next(package_root); },
      [next](caf::error&) { next({}); });
}

/// The slow path of exec and create: advance the fence (waiting for retired sessions),
/// admit, prepare the spec, then find or start the session and hand it to `use`.
template <class Promise, class Use>
void open_session(self_ptr self, exec_request req, Promise rp, Use use) {
  advance_then(self, req.ctx, [self, rp, req = std::move(req), use](box_error err) mutable {
    if (err) {
      rp.deliver(to_caf_error(err));
      return;
    }
    resolve_skill(self, req, [self, rp, req, use](std::string skill_root) mutable {
      auto spec = prepare_spec(self, req, skill_root);
      if (!spec) {
        rp.deliver(to_caf_error(spec.error()));
        return;
      }
      auto prepared = spec.value();
      with_session(
        self, req.ctx, spec.value(),
        [use, prepared](const session_actor& a, session_entry& e) mutable { use(a, e, prepared); },
        [rp](const box_error& e) mutable { rp.deliver(to_caf_error(e)); });
      report_idle(self);
    });
  });
}

struct named_session {
  std::string logical;
  std::string physical;
};

/// The common start of get and delete: the gate, the admission-mode id rule, then the
/// session of this id at the request's generation (BoxSessionNotFoundError if none).
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

/// The session of a managed-process action: the gate, then the session of this
/// logical id at the request's generation, running.
result<session_actor> find_process_session(self_ptr self, const process_request& req) {
  session_request s{req.ctx, req.session_id, req.decode_error};
  auto found = find_session(self, s);
  if (!found)
    return found.error();
  auto i = self->state.sessions.find(found->physical);
  if (!i->second.actor)
    return box_error{ec::session_not_found, "session " + found->logical + " not found"};
  return i->second.actor;
}

/// The relay's handshake checks 4 to 9 (protocol.md §1.4).
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

struct ready_session {
  session_actor actor;
  box_spec spec;
};

/// The hot path of an exec in standard mode: the fence does not move and the session
/// exists, runs, and is compatible. Anything else takes the full path.
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

} // namespace

supervisor_actor spawn_supervisor(caf::local_actor* parent, supervisor_args args) {
  return parent->spawn([](self_ptr self, supervisor_args a) -> supervisor_actor::behavior_type {
    auto& st = self->state;
    st.args = std::move(a);
    st.admission = std::make_unique<workspace_admission>(st.args.instance_uuid,
                                                         st.args.workspace_uuid);
    if (st.args.store) {
      // The workspace serves nothing on a state it could not read: an empty one would
      // forget its revocations.
      auto record = st.args.store->get(st.args.directory_key);
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
      if (st.state_error)
        spdlog::error("{}: {}", st.admission->box_ns(), st.state_error.message);
      arm_expiry(self);
    }
    self->set_down_handler([self](const caf::down_msg& dm) {
      auto& st = self->state;
      st.children->erase(dm.source);
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
        if (auto err = pre_gate(self, req.ctx, &req.facts, req.decode_error))
          return to_caf_error(err);
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
      [self](create_atom, exec_request& req) -> caf::result<session_info> {
        if (auto err = pre_gate(self, req.ctx, &req.facts, req.decode_error))
          return to_caf_error(err);
        auto rp = self->make_response_promise<session_info>();
        open_session(self, std::move(req), rp,
                     [rp](const session_actor& a, session_entry&, box_spec) mutable {
                       rp.delegate(a, create_atom_v);
                     });
        return rp;
      },
      [self](pstart_atom, process_request& req) -> caf::result<process_info> {
        auto found = find_process_session(self, req);
        if (!found)
          return to_caf_error(found.error());
        return self->delegate(found.value(), pstart_atom_v, std::move(req.spec));
      },
      [self](pget_atom, process_request& req) -> caf::result<process_info> {
        auto found = find_process_session(self, req);
        if (!found)
          return to_caf_error(found.error());
        return self->delegate(found.value(), pget_atom_v, std::move(req.process_id));
      },
      [self](pstop_atom, process_request& req) -> caf::result<std::string> {
        auto found = find_process_session(self, req);
        if (!found)
          return to_caf_error(found.error());
        return self->delegate(found.value(), pstop_atom_v, std::move(req.process_id));
      },
      [self](relay_atom, relay_request& req) -> relay_verdict { return relay_check(self, req); },
      [self](skill_atom, skill_request& req) -> caf::result<std::string> {
        // Fenced; in admission mode also the entitlement gate (Cloud skill APIs need it).
        if (auto err = tenant_gate(self, req.ctx, nullptr, req.decode_error, true)) {
          // The upload was handed over with the request: refused, it goes now.
          if (!req.file_path.empty())
            self->state.args.pool->submit([path = req.file_path] { ::unlink(path.c_str()); });
          return to_caf_error(err);
        }
        return self->delegate(skill_store(self), skill_atom_v,
                              skill_job{std::move(req.action), std::move(req.data_json),
                                        std::move(req.file_path), admission_mode(self)});
      },
      [self](caf::get_atom, session_request& req) -> caf::result<session_info> {
        auto found = find_session(self, req);
        if (!found)
          return to_caf_error(found.error());
        auto i = self->state.sessions.find(found->physical);
        if (!i->second.actor)
          return to_caf_error({ec::session_not_found, "session " + found->logical + " not found"});
        return self->delegate(i->second.actor, caf::get_atom_v);
      },
      [self](caf::delete_atom, session_request& req) -> caf::result<std::string> {
        auto found = find_session(self, req);
        if (!found)
          return to_caf_error(found.error());
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
          return to_caf_error(err);
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
          self->request(t, caf::infinite, caf::get_atom_v)
            .then([acc, finish](session_info& info) mutable {
                    acc->push_back(std::move(info));
                    finish();
                  },
                  [finish](caf::error&) mutable { finish(); });
        return rp;
      },
      [self](status_atom, action_context& ctx) -> caf::result<status_info> {
        if (auto err = tenant_gate(self, ctx, nullptr, {}, false))
          return to_caf_error(err);
        const auto& s = self->state.args.settings;
        status_info out;
        out.backend_name = s.backend_name;
        out.backend_available = s.backend_available;
        out.session_ttl_sec = s.config.limits.session_ttl_sec;
        out.limits = s.config.limits;
        for (auto& [id, e] : self->state.sessions)
          if (e.actor && e.generation == ctx.placement_generation)
            ++out.active_sessions;
        report_idle(self);
        return out;
      },
      // Each change is committed before its reply; a revocation stops the sessions
      // even when the commit fails (the reply then says so).
      [self](entitle_atom, entitlement_snapshot& snap) -> caf::result<entitlement_receipt> {
        if (self->state.state_error)
          return to_caf_error(self->state.state_error);
        const auto before = *self->state.admission;
        auto outcome = self->state.admission->put_snapshot(snap, wall_now_us() / 1000000);
        if (!outcome)
          return to_caf_error(outcome.error());
        auto saved = persist(self);
        // A snapshot that admits is not kept unless durable; one that revokes is kept
        // (it fails closed) and its commit retried by the next request.
        if (saved && outcome->effect != session_effect::stop_all) {
          *self->state.admission = before;
          return to_caf_error(saved);
        }
        arm_expiry(self);
        auto rp = self->make_response_promise<entitlement_receipt>();
        auto receipt = outcome->receipt;
        apply_effect(self, outcome->effect, [self, rp, receipt, saved](int64_t n) mutable {
          receipt.revoked_sessions = n;
          if (saved)
            rp.deliver(to_caf_error(saved));
          else
            rp.deliver(receipt);
          report_idle(self);
        });
        return rp;
      },
      [self](grant_atom, admission_grant& grant) -> caf::result<grant_receipt> {
        if (self->state.state_error)
          return to_caf_error(self->state.state_error);
        const auto before = *self->state.admission;
        auto outcome = self->state.admission->upsert_grant(grant, config(self), wall_now_us());
        if (!outcome)
          return to_caf_error(outcome.error());
        // A grant that is not durable is not installed: the host is told it failed.
        if (auto saved = persist(self)) {
          *self->state.admission = before;
          return to_caf_error(saved);
        }
        if (outcome->fence_advanced)
          retire_stale(self);
        arm_expiry(self);
        auto rp = self->make_response_promise<grant_receipt>();
        auto receipt = outcome->receipt;
        apply_effect(self, outcome->effect, [self, rp, receipt](int64_t) mutable {
          rp.deliver(receipt);
          report_idle(self);
        });
        return rp;
      },
      [self](revoke_atom, admission_revocation& rev) -> caf::result<revocation_receipt> {
        if (self->state.state_error)
          return to_caf_error(self->state.state_error);
        auto outcome = self->state.admission->revoke(rev, config(self));
        if (!outcome)
          return to_caf_error(outcome.error());
        auto saved = persist(self);
        auto rp = self->make_response_promise<revocation_receipt>();
        auto receipt = outcome->receipt;
        apply_effect(self, outcome->effect, [self, rp, receipt, saved](int64_t) mutable {
          if (saved)
            rp.deliver(to_caf_error(saved));
          else
            rp.deliver(receipt);
          report_idle(self);
        });
        return rp;
      },
      [self](settings_atom, instance_settings& s) { self->state.args.settings = std::move(s); },
      [self](evict_atom) -> bool {
        auto& st = self->state;
        bool idle = st.sessions.empty() && st.live.empty() && st.admission->evictable();
        if (idle)
          self->quit();
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
        persist(self);  // logged on failure; nothing waits for a reply here
        arm_expiry(self);
        apply_effect(self, effect, [self](int64_t) { report_idle(self); });
      },
      [self](shutdown_atom) -> caf::result<int64_t> {
        auto rp = self->make_response_promise<int64_t>();
        stop_all(self, box_error{ec::runtime_unavailable, shutting_down_text},
                 [rp](int64_t n) mutable { rp.deliver(n); });
        return rp;
      },
    };
  }, std::move(args));
}

} // namespace boxrt
