#include "actors/directory.hpp"

#include "backends/sandbox/sandbox.hpp"

#include <algorithm>
#include <deque>
#include <functional>
#include <list>
#include <tuple>
#include <utility>
#include <vector>
#include <unordered_map>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/admission.hpp"
#include "actors/caf_support.hpp"
#include "actors/pool_job.hpp"
#include "messages/tenancy.hpp"
#include "messages/base/pytext.hpp"
#include "actors/supervisor.hpp"
#include "backends/readiness_keys.hpp"
#include "backends/mount_policy.hpp"

namespace boxrt {

namespace {

/// A request parked until its workspace can be served (first probe, eviction).
struct parked {
  std::function<void(const supervisor_actor&)> go;
  std::function<void(const box_error&)> fail;
};

struct directory_state {
  static inline const char* name = "boxrt.directory";

  /// box_list_all_sessions callers waiting for the gathering under way, with their limits.
  std::vector<std::pair<caf::typed_response_promise<ps_report>, int64_t>> ps_waiters;

  directory_args args;
  instance_settings settings;
  /// `settings` as the supervisors share it (refreshed when they differ).
  std::shared_ptr<const instance_settings> shared_settings;
  std::unordered_map<std::string, supervisor_actor> supervisors;
  std::unordered_map<caf::actor_addr, std::string> by_addr;
  /// Evictable workspaces, least recently reported first.
  std::list<std::string> idle;
  std::unordered_map<std::string, std::list<std::string>::iterator> idle_pos;
  /// Workspaces whose supervisor is being asked to leave, with requests parked for them.
  std::unordered_map<std::string, std::vector<parked>> evicting;
  /// Workspaces whose durable record is being read (on the worker pool) before their
  /// supervisor starts, with requests parked for them.
  std::unordered_map<std::string, std::vector<parked>> loading;
  /// Blocking work on the worker pool whose continuation runs here.
  pool_waits jobs;
  /// Requests parked until the first readiness probe.
  std::vector<std::pair<std::string, parked>> before_probe;
  int64_t slots_in_use = 0;
  /// Health requests that arrived before the first readiness probe finished.
  std::vector<caf::typed_response_promise<health_info>> health_waiters;
  /// Every live supervisor, shared with the exit functor.
  std::shared_ptr<std::unordered_map<caf::actor_addr, caf::actor>> children
    = std::make_shared<std::unordered_map<caf::actor_addr, caf::actor>>();
  bool probing = false;
  /// A delayed probe_atom is on its way: one timer chain only, however often a probe
  /// is also started at once (box_init).
  bool probe_timer = false;
  /// The running probe started while the probe gate was closed (a fenced cluster node).
  bool probe_fenced = false;
  /// A short probe_atom is on its way, to probe as soon as the gate opens again.
  bool gate_timer = false;
  /// The node's backend, shared with every supervisor.
  std::shared_ptr<backend_slot> backend;
  /// Told to exit: the backend's own sandboxes are being torn down on the pool.
  bool releasing = false;
  /// What the current backend was selected for: `backend` and `local.nsjail_path`.
  std::string selected_for;
  /// box.network_* changed: the next probe job hands them to the egress service.
  bool egress_dirty = false;
  /// A box_init arrived while a probe of the old config ran: probe again when it ends,
  /// selecting the backend again first when `reselect_next`.
  bool probe_again = false;
  bool reselect_next = false;
  /// The running probe selected a backend: it is installed when the probe ends, if no
  /// session exists then (else it is dropped and the current one probed again).
  std::shared_ptr<backend_pick> pending;
  /// box_init replies wait for a probe of their config (readiness before the reply).
  std::vector<caf::typed_response_promise<bool>> init_waiters;
};

/// The part of a config that selects the backend.
std::string selection_of(const box_config& c) {
  return std::string{py::strip(c.backend)} + '\0' + c.local.nsjail_path;
}

using self_ptr = directory_actor::stateful_pointer<directory_state>;

/// Every change of the settings goes to each supervisor and, once the first probe has
/// finished, to the published snapshot.
void broadcast_settings(self_ptr self) {
  auto& st = self->state;
  for (auto& [ws, sup] : st.supervisors)
    self->send(sup, settings_atom_v, st.settings);
  if (st.args.snapshot && st.settings.probed)
    st.args.snapshot->set(st.settings);
}

/// Probes readiness on the pool; with `reselect`, selects the backend for the config
/// first (no session exists, and slot grants wait meanwhile).
void submit_probe(self_ptr self, bool reselect = false) {
  auto& st = self->state;
  if (st.probing) {
    if (reselect) {
      st.probe_again = true;
      st.reselect_next = true;
    }
    return;
  }
  st.probing = true;
  st.probe_fenced = st.args.probe_gate && !st.args.probe_gate();
  st.pending = reselect && st.args.select ? std::make_shared<backend_pick>() : nullptr;
  std::optional<network_settings> egress;
  if (std::exchange(st.egress_dirty, false))
    egress = st.settings.config.network;
  auto job = [slot = st.backend, pending = st.pending, select = st.args.select,
              config = st.settings.config, egress = std::move(egress)] {
    if (egress)
      configure_egress(*egress);
    // A selected backend is probed here and installed by the directory afterwards.
    if (pending)
      *pending = select(config, slot->get());
    auto backend = pending ? pending->backend : slot->get();
    auto [name, reason] = pending ? std::pair{pending->name, pending->reason} : slot->name_and_reason();
    readiness_report report;
    std::string mount_error;
    bool admission = config.admission_mode();
    if (admission)
      mount_error = check_managed_workspace_root(config);
    if (backend) {
      report = backend->probe_readiness(admission ? config.local.default_workspace : "", admission);
      with_aliases(report);
    } else {
      report.backend_name = name;
      report.available = false;
      report.error = reason;
    }
    return std::tuple{std::move(report), std::move(mount_error)};
  };
  pool_job(*st.args.pool, caf::actor_cast<directory_actor>(self), std::move(job), probed_atom_v);
}

/// A global session slot, when one of max_sessions is free.
bool take_slot(self_ptr self) {
  auto& st = self->state;
  if (st.slots_in_use >= st.settings.config.limits.max_sessions)
    return false;
  ++st.slots_in_use;
  return true;
}

/// While the probe gate is closed: looks again shortly, and probes once it is open, so a
/// verdict taken while fenced stands no longer than that (not a whole cache period).
void schedule_gate_poll(self_ptr self) {
  if (std::exchange(self->state.gate_timer, true))
    return;
  self->delayed_send(self, std::chrono::milliseconds{250}, probe_atom_v);
}

bool gate_closed(self_ptr self) {
  return self->state.args.probe_gate && !self->state.args.probe_gate();
}

void schedule_probe(self_ptr self) {
  if (self->state.probe_timer)
    return;
  self->state.probe_timer = true;
  auto cache = self->state.settings.config.admission.readiness_cache_sec;
  // Probes run in the background only: at most once per cache period, and every few
  // seconds when the cache is 0, never on a request's path.
  auto every = std::chrono::seconds{cache > 0 ? cache : 5};
  self->delayed_send(self, every, probe_atom_v);
}

/// The directory keys supervisors by instance and workspace (workspace_key): with a
/// pinned trusted instance that is just the workspace, without one tenants of two
/// instances stay apart.
template <class Request>
std::string key_of(const Request& req) {
  auto scope = scope_of(req);
  return workspace_key(scope.instance, scope.workspace);
}

bool evict_one(self_ptr self);

void mark_idle(self_ptr self, const std::string& ws, bool idle) {
  auto& st = self->state;
  if (auto i = st.idle_pos.find(ws); i != st.idle_pos.end()) {
    st.idle.erase(i->second);
    st.idle_pos.erase(i);
  }
  if (idle) {
    st.idle.push_back(ws);
    st.idle_pos.emplace(ws, std::prev(st.idle.end()));
    // Idle supervisors hold nothing worth keeping: past the cache's size they go.
    auto keep = static_cast<size_t>(std::max<int64_t>(0, st.settings.config.limits.max_idle_workspaces));
    while (st.idle.size() > keep && evict_one(self)) {
    }
  }
}

/// box_list_all_sessions: every session of every supervisor, answered to every caller
/// waiting (each cut to its own limit; at most ps_max_sessions are ever held).
constexpr int64_t ps_max_sessions = 10000;

void gather_sessions(self_ptr self) {
  auto& st = self->state;
  struct gather {
    std::vector<ps_entry> sessions;
    size_t waiting = 0;
    int64_t workspaces = 0;
  };
  auto by_owner = [](const ps_entry& a, const ps_entry& b) {
    return std::tie(a.instance_uuid, a.workspace_uuid, a.generation, a.stats.session_id)
           < std::tie(b.instance_uuid, b.workspace_uuid, b.generation, b.stats.session_id);
  };
  auto g = std::make_shared<gather>();
  g->workspaces = static_cast<int64_t>(st.supervisors.size());
  auto one_done = [self, g, by_owner] {
    if (--g->waiting > 0)
      return;
    auto& xs = g->sessions;
    std::sort(xs.begin(), xs.end(), by_owner);
    for (auto& [rp, max] : std::exchange(self->state.ps_waiters, {})) {
      ps_report out;
      out.workspaces = g->workspaces;
      out.truncated = static_cast<int64_t>(xs.size()) > max;
      out.sessions.assign(xs.begin(), xs.begin() + std::min<int64_t>(max, static_cast<int64_t>(xs.size())));
      rp.deliver(std::move(out));
    }
  };
  g->waiting = st.supervisors.size() + 1;
  // Longer than a supervisor's own wait for its sessions (control_timeout): a slow
  // session shows as unknown usage, not as a missing workspace.
  for (auto& [ws, sup] : st.supervisors)
    self->request(sup, control_timeout + std::chrono::seconds{5}, ps_atom_v)
      .then(
        [g, one_done, by_owner](std::vector<ps_entry>& xs) {
          for (auto& x : xs)
            g->sessions.push_back(std::move(x));
          // Bounded as it arrives: never more than twice the most any caller may get.
          if (static_cast<int64_t>(g->sessions.size()) > 2 * ps_max_sessions) {
            std::nth_element(g->sessions.begin(), g->sessions.begin() + ps_max_sessions, g->sessions.end(), by_owner);
            g->sessions.resize(static_cast<size_t>(ps_max_sessions) + 1);
          }
          one_done();
        },
        [one_done](caf::error&) { one_done(); });
  one_done();
}

supervisor_actor spawn_for(self_ptr self, const std::string& ws,
                           std::optional<result<std::optional<std::string>>> record = std::nullopt) {
  auto& st = self->state;
  supervisor_args a;
  auto ids = split_workspace_key(ws);
  a.instance_uuid = std::string{ids->first};
  a.workspace_uuid = std::string{ids->second};
  a.directory_key = ws;
  a.directory = caf::actor_cast<directory_actor>(self);
  // One copy of the settings for every supervisor (see shared_settings).
  if (!st.shared_settings || *st.shared_settings != st.settings)
    st.shared_settings = shared_settings(st.settings);
  a.settings = st.shared_settings;
  a.backend = st.backend;
  a.pool = st.args.pool;
  a.processes = st.args.processes;
  a.store = st.args.store;
  a.record = std::move(record);
  auto sup = spawn_supervisor(self, std::move(a));
  self->monitor(sup);
  st.children->emplace(sup.address(), caf::actor_cast<caf::actor>(sup));
  st.supervisors.emplace(ws, sup);
  st.by_addr.emplace(sup.address(), ws);
  return sup;
}

void route(self_ptr self, const std::string& ws, parked p);

/// Asks the least recently idle supervisor to leave; requests for it wait meanwhile.
bool evict_one(self_ptr self) {
  auto& st = self->state;
  if (st.idle.empty())
    return false;
  auto victim = st.idle.front();
  mark_idle(self, victim, false);
  auto i = st.supervisors.find(victim);
  if (i == st.supervisors.end())
    return false;
  auto sup = i->second;
  st.supervisors.erase(i);
  st.by_addr.erase(sup.address());
  st.evicting.emplace(victim, std::vector<parked>{});
  self->request(sup, stop_timeout, evict_atom_v)
    .then(
      [self, victim, sup](bool left) {
        auto& st = self->state;
        auto waiting = std::move(st.evicting[victim]);
        st.evicting.erase(victim);
        if (!left) {
          // It took on work after reporting idle: keep it.
          st.supervisors.emplace(victim, sup);
          st.by_addr.emplace(sup.address(), victim);
          for (auto& p : waiting)
            p.go(sup);
          return;
        }
        spdlog::debug("directory: evicted idle workspace record {}", victim);
        for (auto& p : waiting)
          route(self, victim, std::move(p));
      },
      [self, victim](caf::error&) {
        auto& st = self->state;
        auto waiting = std::move(st.evicting[victim]);
        st.evicting.erase(victim);
        for (auto& p : waiting)
          route(self, victim, std::move(p));
      });
  return true;
}

box_error capacity_error() {
  return box_error{ec::capacity_exceeded,
                   "Box generation fence capacity reached; refusing an unbounded Workspace allocation"};
}

health_info make_health(self_ptr self) {
  health_info out;
  out.settings = self->state.settings;
  out.sessions = self->state.slots_in_use;
  out.workspaces = static_cast<int64_t>(self->state.supervisors.size());
  return out;
}

/// Routes a parked request to the workspace's supervisor, spawning it on first use.
void route(self_ptr self, const std::string& ws, parked p) {
  auto& st = self->state;
  if (!st.settings.probed) {
    st.before_probe.emplace_back(ws, std::move(p));
    return;
  }
  if (auto e = st.evicting.find(ws); e != st.evicting.end()) {
    e->second.push_back(std::move(p));
    return;
  }
  if (auto l = st.loading.find(ws); l != st.loading.end()) {
    l->second.push_back(std::move(p));
    return;
  }
  if (auto i = st.supervisors.find(ws); i != st.supervisors.end()) {
    p.go(i->second);
    return;
  }
  auto cap = st.settings.config.limits.max_admission_records;
  if (static_cast<int64_t>(st.supervisors.size() + st.evicting.size() + st.loading.size()) >= cap) {
    if (!evict_one(self)) {
      p.fail(capacity_error());
      return;
    }
  }
  if (!st.args.store || !st.args.pool) {
    p.go(spawn_for(self, ws));
    return;
  }
  // The record may wait for a disk or for etcd: read on the pool, the workspace's
  // requests parked meanwhile (other workspaces go on), then one supervisor for all.
  st.loading[ws].push_back(std::move(p));
  st.jobs.run(
    *st.args.pool, caf::actor_cast<directory_actor>(self),
    [store = st.args.store, ws] { return store->get(ws); },
    [self, ws](std::optional<result<std::optional<std::string>>> record) {
      auto& st = self->state;
      auto waiting = std::move(st.loading[ws]);
      st.loading.erase(ws);
      if (!record)
        record.emplace(box_error{ec::box_error, "the admission store could not be read"});
      auto sup = spawn_for(self, ws, std::move(record));
      for (auto& w : waiting)
        w.go(sup);
    });
}

/// A request parked until its workspace's supervisor is known: then delegated to it, or
/// answered with the error that kept it from one.
template <class Reply, class Atom, class Request>
parked delegated(caf::typed_response_promise<Reply> rp, Atom atom, Request&& req) {
  return parked{[rp, atom, req = std::forward<Request>(req)](const supervisor_actor& sup) mutable {
                  rp.delegate(sup, atom, std::move(req));
                },
                [rp](const box_error& err) mutable { rp.deliver(to_caf_error(err)); }};
}

/// Delegates a request to the workspace's supervisor: at once when it exists (the hot
/// path), otherwise through route().
template <class Reply, class Atom, class Request>
caf::result<Reply> forward(self_ptr self, const std::string& ws, Atom atom, Request&& req) {
  auto& st = self->state;
  if (st.settings.probed) {
    if (auto i = st.supervisors.find(ws); i != st.supervisors.end())
      return self->delegate(i->second, atom, std::forward<Request>(req));
  }
  auto rp = self->make_response_promise<Reply>();
  route(self, ws, delegated(rp, atom, std::forward<Request>(req)));
  return rp;
}

/// The supervisor a relay asks (the trusted instance, an existing workspace), or null.
supervisor_actor relay_supervisor(self_ptr self, const relay_request& req) {
  // The relay's handshake read the cluster's pin already: what is held here tells.
  if (self->state.args.trusted->check(req.instance_uuid) != trusted_instance::verdict::admit)
    return {};
  auto i = self->state.supervisors.find(key_of(req));
  return i == self->state.supervisors.end() ? supervisor_actor{} : i->second;
}

/// Forwards a request of `instance` to the workspace `ws` when the trusted instance
/// admits it, else answers `refusal`. A cluster's pin not read yet is read on the worker
/// pool (the request waits, nothing else does), then the request goes on.
template <class Reply, class Atom, class Request>
caf::result<Reply> forward_trusted(self_ptr self, const std::string& instance, box_error refusal,
                                   const std::string& ws, Atom atom, Request&& req) {
  using verdict = trusted_instance::verdict;
  auto& st = self->state;
  auto v = st.args.trusted->check(instance);
  if (v == verdict::unknown && !st.args.pool)
    v = st.args.trusted->settle(instance);
  if (v == verdict::admit)
    return forward<Reply>(self, ws, atom, std::forward<Request>(req));
  if (v == verdict::refuse)
    return to_caf_error(refusal);
  auto rp = self->make_response_promise<Reply>();
  st.jobs.run(
    *st.args.pool, caf::actor_cast<directory_actor>(self),
    [trusted = st.args.trusted, instance] { return trusted->settle(instance); },
    [self, rp, refusal, ws, atom, req = std::forward<Request>(req)](std::optional<verdict> v) mutable {
      if (v != verdict::admit) {
        rp.deliver(to_caf_error(refusal));
        return;
      }
      route(self, ws, delegated(rp, atom, std::move(req)));
    });
  return rp;
}

/// Every tenant request (actors.hpp: tenant_routes): of the trusted instance, then to its
/// workspace's supervisor.
template <class Reply, class Atom, class Request>
caf::result<Reply> serve_tenant(self_ptr self, std::type_identity<Reply>, Atom atom, Request& req) {
  auto instance = std::string{scope_of(req).instance};
  auto ws = key_of(req);
  auto refusal = untrusted_refusal(req);
  return forward_trusted<Reply>(self, instance, std::move(refusal), ws, atom, std::move(req));
}

/// The stdio relay's checks: an unknown workspace has no fence to hold, so it is stale
/// (401) and nothing is created.
caf::result<relay_verdict> serve_tenant(self_ptr self, std::type_identity<relay_verdict>, relay_atom,
                                        relay_request& req) {
  auto sup = relay_supervisor(self, req);
  if (!sup)
    return relay_verdict{401, {}};
  return self->delegate(sup, relay_atom_v, std::move(req));
}

caf::result<bool> serve_tenant(self_ptr self, std::type_identity<bool>, attach_atom, relay_request& req) {
  auto sup = relay_supervisor(self, req);
  if (!sup)
    return to_caf_error({ec::permission, stale_generation_text});
  return self->delegate(sup, attach_atom_v, std::move(req));
}

} // namespace

namespace {

/// The directory: routes every request to its workspace's supervisor, owns the global
/// session slots, readiness and the published settings.
directory_actor::behavior_type directory_behavior(self_ptr self, directory_args a) {
  auto& st = self->state;
  st.args = std::move(a);
  st.settings.config = st.args.config;
  if (st.settings.config.admission.required && st.settings.config.admission_error.empty())
    if (auto err = validate_required_policy(st.settings.config.admission, st.args.testing))
      st.settings.config.admission_error = err.message;
  if (!st.args.trusted)
    st.args.trusted = std::make_shared<boxrt::trusted_instance>(st.args.trusted_instance);
  st.backend = std::make_shared<backend_slot>(st.args.backend, st.args.backend_name,
                                              st.args.backend_reason);
  st.args.backend = nullptr;  // the slot is its one owner here
  st.selected_for = selection_of(st.settings.config);
  std::tie(st.settings.backend_name, st.settings.backend_reason) = st.backend->name_and_reason();
  st.settings.backend_available = false;
  st.settings.unsafe_soft_storage = st.args.unsafe_soft_storage;
  st.settings.transfer_dir = st.args.transfer_dir;
  // The runtime's end (an exit sent to the directory): the backend's own sandboxes (its
  // warm pool) are torn down on the worker pool, then the exit comes again and the
  // directory quits, so whoever monitors it learns it is down only after that. (A
  // cluster node's directories share one backend, which keeps no warm pool; an exit with
  // reason `kill` skips this, and the backend's end tears them down.) As CAF's default,
  // an exit with reason `normal` is ignored.
  self->set_exit_handler([self](caf::exit_msg& msg) {
    auto& st = self->state;
    if (msg.reason == caf::exit_reason::normal)
      return;
    if (st.releasing || !st.args.pool) {
      self->quit(msg.reason);
      return;
    }
    st.releasing = true;
    pool_job(
      *st.args.pool, caf::actor_cast<caf::actor>(self),
      [slot = st.backend] {
        if (auto b = slot->get())
          b->shutdown();
      },
      caf::exit_msg{caf::actor_addr{}, msg.reason});
  });
  self->set_down_handler([self](const caf::down_msg& dm) {
    auto& st = self->state;
    st.children->erase(dm.source);
    auto i = st.by_addr.find(dm.source);
    if (i == st.by_addr.end())
      return;
    auto ws = i->second;
    st.by_addr.erase(i);
    if (auto j = st.supervisors.find(ws); j != st.supervisors.end() && j->second.address() == dm.source)
      st.supervisors.erase(j);
    mark_idle(self, ws, false);
    if (dm.reason && dm.reason != caf::exit_reason::normal)
      spdlog::error("directory: supervisor of {} stopped: {}", ws, caf::to_string(dm.reason));
  });
  // Supervisors never outlive the directory. The functor runs after the state is
  // gone, so it holds its own reference to the set of children.
  self->attach_functor([kids = st.children](const caf::error&) {
    for (auto& [addr, sup] : *kids)
      caf::anon_send_exit(sup, caf::exit_reason::user_shutdown);
  });
  submit_probe(self);
  return with_tenant_handlers<directory_actor::behavior_type>(
    [self](auto reply, auto atom, auto& req) { return serve_tenant(self, reply, atom, req); },
    [self](health_atom) -> caf::result<health_info> {
      // Before the first probe nothing is known: answer once it is.
      if (!self->state.settings.probed) {
        auto rp = self->make_response_promise<health_info>();
        self->state.health_waiters.push_back(rp);
        return rp;
      }
      return make_health(self);
    },
    [self](init_atom, box_config& next) -> caf::typed_response_promise<bool> {
      auto& st = self->state;
      const auto& current = st.settings.config;
      // The backend is selected again only while no session exists (a slot counts from
      // its request), and only when the config may select another one.
      bool reselect = st.slots_in_use == 0
                      && (selection_of(next) != st.selected_for || !st.backend->get());
      // Admission cannot be switched off at run time (protocol.md §4.9.1): keep the old
      // policy and fail closed with the reference's error.
      if (current.admission_mode() && !next.admission.required) {
        next.admission = current.admission;
        next.admission.required = true;
        next.admission_error
          = "Sandbox admission enforcement cannot be disabled without restarting the Box Runtime";
      } else if (next.admission.required && next.admission_error.empty()) {
        if (auto err = validate_required_policy(next.admission, st.args.testing))
          next.admission_error = err.message;
      }
      // The egress service follows box.network_* (docs/network.md) in the probe job
      // below, before the reply.
      if (!(next.network == current.network))
        st.egress_dirty = true;
      st.settings.config = std::move(next);
      broadcast_settings(self);
      // The readiness verdict is recomputed for the new config before the reply.
      auto rp = self->make_response_promise<bool>();
      st.init_waiters.push_back(rp);
      if (st.probing)
        st.probe_again = true;
      submit_probe(self, reselect);
      return rp;
    },
    [self](slot_atom) -> bool { return take_slot(self); },
    [self](slot_atom, caf::get_atom) -> int64_t {
      return static_cast<int64_t>(self->state.slots_in_use);
    },
    [self](release_atom) {
      if (self->state.slots_in_use > 0)
        --self->state.slots_in_use;
    },
    [self](idle_atom, std::string& ws, bool idle) {
      if (self->state.supervisors.count(ws))
        mark_idle(self, ws, idle);
    },
    [self](probe_atom) {
      auto& st = self->state;
      st.probe_timer = false;
      st.gate_timer = false;
      // No probe while fenced once a verdict exists: it would fail for the fence alone.
      if (st.settings.probed && gate_closed(self)) {
        schedule_gate_poll(self);
        return;
      }
      submit_probe(self);
    },
    [self](done_atom, uint64_t token) { self->state.jobs.finish(token); },
    [self](probed_atom, readiness_report& report, std::string& mount_error) {
      auto& st = self->state;
      st.probing = false;
      auto before = st.settings;
      if (auto pick = std::exchange(st.pending, nullptr)) {
        if (st.slots_in_use > 0) {
          // A session started meanwhile, on the current backend: it stays, and the
          // readiness is the current backend's again.
          spdlog::info("directory: a session started while backend {} was selected; keeping {}",
                       pick->name, st.settings.backend_name);
          st.probe_again = true;
        } else {
          if (pick->name != st.settings.backend_name)
            spdlog::info("directory: box_init selected backend {}", pick->name);
          st.selected_for = selection_of(st.settings.config);
          st.backend->set(*pick);
          std::tie(st.settings.backend_name, st.settings.backend_reason)
            = st.backend->name_and_reason();
        }
      }
      if (st.probe_again && st.settings.probed) {
        // A box_init came while this probe ran (or its backend was not installed): its
        // reply waits for a probe of its config and of the backend in place.
        st.probe_again = false;
        submit_probe(self, std::exchange(st.reselect_next, false) && st.slots_in_use == 0);
        return;
      }
      auto r = compute_readiness(st.settings.config, report, mount_error, st.args.unsafe_soft_storage,
                                 st.args.testing);
      bool first = !st.settings.probed;
      st.settings.backend_report = report;
      st.settings.backend_available = report.available;
      st.settings.ready = r.ready;
      st.settings.admission_mode = r.admission_mode;
      st.settings.checks = r.checks;
      st.settings.readiness_error = r.error;
      st.settings.probed = true;
      if (first)
        spdlog::info("directory: backend {} {}; readiness {}", st.settings.backend_name,
                     report.available ? "available" : "unavailable", r.ready ? "ready" : "not ready");
      if (first || !(before.backend_report == report) || before.ready != r.ready
          || before.checks != r.checks || before.backend_name != st.settings.backend_name)
        broadcast_settings(self);
      if (st.probe_again) {
        // A box_init came during the first probe: its reply waits for a probe of its config.
        st.probe_again = false;
        submit_probe(self, std::exchange(st.reselect_next, false) && st.slots_in_use == 0);
      } else {
        for (auto& rp : std::exchange(st.init_waiters, {}))
          rp.deliver(true);
      }
      if (first) {
        for (auto& rp : st.health_waiters)
          rp.deliver(make_health(self));
        st.health_waiters.clear();
        auto parked_requests = std::move(st.before_probe);
        st.before_probe.clear();
        for (auto& [ws, p] : parked_requests)
          route(self, ws, std::move(p));
      }
      // A verdict taken while fenced (a cluster node whose lease lapsed) is replaced as
      // soon as the node serves again; before, it stood until the next cache period and
      // the node refused every exec with BoxReadinessError after etcd came back.
      if (st.probe_fenced || gate_closed(self))
        schedule_gate_poll(self);
      else
        schedule_probe(self);
    },
    [self](ps_atom, int64_t max) -> caf::result<ps_report> {
      // One gathering at a time (each asks every session of the node for its usage on
      // the worker pool): callers that come meanwhile share it.
      auto& st = self->state;
      auto rp = self->make_response_promise<ps_report>();
      st.ps_waiters.emplace_back(rp, std::max<int64_t>(0, max));
      if (st.ps_waiters.size() == 1)
        gather_sessions(self);
      return rp;
    },
    [self](shutdown_atom) -> caf::result<int64_t> {
      auto& st = self->state;
      if (st.supervisors.empty())
        return int64_t{0};
      auto rp = self->make_response_promise<int64_t>();
      auto remaining = std::make_shared<size_t>(st.supervisors.size());
      auto total = std::make_shared<int64_t>(0);
      for (auto& [ws, sup] : st.supervisors)
        self->request(sup, stop_timeout, shutdown_atom_v)
          .then(
            [rp, remaining, total](int64_t n) mutable {
              *total += n;
              if (--*remaining == 0)
                rp.deliver(*total);
            },
            [rp, remaining, total](caf::error&) mutable {
              if (--*remaining == 0)
                rp.deliver(*total);
            });
      return rp;
    }
  );
}

} // namespace

directory_actor spawn_directory(caf::actor_system& sys, directory_args args) {
  return sys.spawn(directory_behavior, std::move(args));
}

} // namespace boxrt
