#include "actors/cluster/router.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <set>
#include <thread>
#include <unordered_map>

#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/caf_support.hpp"
#include "actors/pool_job.hpp"
#include "backends/cluster/identity.hpp"
#include "backends/cluster/upload.hpp"
#include "messages/tenancy.hpp"

namespace boxrt::cluster {

namespace {

/// The gate with its own worker-pool replies (the verdict on a hello: "" admits).
using gate_impl = gate_actor::extend<caf::reacts_to<link_atom, uint64_t, std::string>>;

constexpr auto tick_period = std::chrono::milliseconds{50};
/// A forwarded action waits for its reply at most its own time limit plus this (the owner
/// stops its sessions within stop_timeout); a lost link fails it sooner.
constexpr auto forward_margin = std::chrono::seconds{120};

template <class Request>
std::chrono::seconds forward_timeout(const Request&) {
  return forward_margin;
}
std::chrono::seconds forward_timeout(const exec_request& r) {
  return forward_margin + std::chrono::seconds{std::clamp<int64_t>(r.spec.timeout_sec, 0, 86400)};
}
constexpr auto hello_timeout = std::chrono::seconds{3};

using clock_type = std::chrono::steady_clock;

struct router_state;
using self_ptr = router_actor::stateful_pointer<router_state>;

/// One routed request: where it goes once its owner is known.
struct pending {
  std::string ns;
  clock_type::time_point deadline;
  /// Sent by another node's router: served here or refused, never forwarded again.
  bool from_remote = false;
  /// Sends it to `target`: this node's directory (`remote` false) or a peer's router.
  std::function<void(self_ptr, const runtime_actor& target, const std::string& peer, std::shared_ptr<pending> me)> go;
  std::function<void(const box_error&)> fail;
};
using pending_ptr = std::shared_ptr<pending>;

struct peer {
  std::string address;
  runtime_actor router;
};

struct flight {
  std::shared_ptr<bool> done;
  std::function<void(const box_error&)> fail;
};

struct router_state {
  static inline const char* name = "boxrt.cluster.router";
  router_args args;
  runtime_actor local;
  /// `local`, for the exit functor (the directory never outlives the router).
  std::shared_ptr<runtime_actor> local_ref = std::make_shared<runtime_actor>();
  /// The lease `local` serves under; a new lease means a fresh directory.
  int64_t lease_seen = 0;
  /// `local` has served a workspace (so a reset must stop it).
  bool dirty = false;
  bool resetting = false;
  std::vector<pending_ptr> after_reset;
  std::map<std::string, peer> peers;
  /// ns -> the owner last resolved (another node).
  std::unordered_map<std::string, std::string> cache;
  std::unordered_map<std::string, std::vector<pending_ptr>> waiting;
  std::set<std::string> resolving;
  std::unordered_map<std::string, std::string> last_error;
  std::map<std::string, std::map<uint64_t, flight>> inflight;
  uint64_t next_flight = 0;
  /// The last box_init, applied to every fresh directory.
  std::optional<box_config> last_init;
  /// box_init replies waiting for their etcd write.
  uint64_t next_init = 0;
  std::map<uint64_t, std::pair<caf::typed_response_promise<bool>, box_config>> storing;
  /// Blocking work on the worker pool whose continuation runs here (uploads).
  pool_waits jobs;
};

std::string not_owner_text(const std::string& node_id) {
  return "Box cluster node " + node_id + " does not own this workspace";
}

bool is_not_owner(const box_error& e) {
  return e.code == ec::runtime_unavailable && e.message.rfind("Box cluster node ", 0) == 0
         && e.message.find(" does not own this workspace") != std::string::npos;
}

void dispatch(self_ptr self, const std::string& ns, pending_ptr p);

void finish_reset(self_ptr self) {
  auto& st = self->state;
  st.resetting = false;
  // Routed again: the lease may have changed once more meanwhile, and ownership is only
  // ever checked against the current one.
  for (auto& p : std::exchange(st.after_reset, {}))
    dispatch(self, p->ns, p);
}

/// A fresh directory for a new lease: the old one's sessions are stopped first (their
/// sandboxes killed, images unmounted), and workspace requests wait for that.
void begin_reset(self_ptr self) {
  auto& st = self->state;
  st.lease_seen = st.args.self_node->lease();
  st.cache.clear();
  if (st.resetting)
    return;
  if (!st.dirty) {
    // It served nothing: replaced at once, so its store is fenced by the new lease.
    caf::anon_send_exit(st.local, caf::exit_reason::user_shutdown);
    st.local = st.args.spawn_local();
    *st.local_ref = st.local;
    if (st.last_init)
      caf::anon_send(st.local, init_atom_v, *st.last_init);
    return;
  }
  st.dirty = false;
  st.resetting = true;
  auto old = st.local;
  st.local = st.args.spawn_local();
  *st.local_ref = st.local;
  if (st.last_init)
    caf::anon_send(st.local, init_atom_v, *st.last_init);
  spdlog::warn("cluster: node {} stops its sessions: {}", st.args.self_node->id(),
               st.args.self_node->serving() ? std::string{"its lease changed"} : st.args.self_node->reason());
  self->request(old, stop_timeout, shutdown_atom_v)
    .then(
      [self, old](int64_t n) {
        spdlog::info("cluster: {} session(s) stopped", n);
        caf::anon_send_exit(old, caf::exit_reason::user_shutdown);
        finish_reset(self);
      },
      [self, old](caf::error& err) {
        spdlog::error("cluster: stopping the sessions failed: {}", caf::to_string(err));
        caf::anon_send_exit(old, caf::exit_reason::user_shutdown);
        finish_reset(self);
      });
}

void go_local(self_ptr self, pending_ptr p) {
  auto& st = self->state;
  // An etcd reply may arrive after the deadline: nothing is served past it.
  if (!st.args.self_node->serving()) {
    p->fail({ec::runtime_unavailable, st.args.self_node->not_serving_text()});
    return;
  }
  if (st.args.self_node->lease() != st.lease_seen)
    begin_reset(self);
  if (st.resetting) {
    st.after_reset.push_back(std::move(p));
    return;
  }
  st.dirty = true;
  p->go(self, st.local, "", p);
}

void go_remote(self_ptr self, const std::string& peer_id, pending_ptr p) {
  auto& peer = self->state.peers.at(peer_id);
  p->go(self, peer.router, peer_id, p);
}

void resolve(self_ptr self, const std::string& ns) {
  auto& st = self->state;
  if (!st.resolving.insert(ns).second)
    return;
  bool claim_any = false;
  for (auto& p : st.waiting[ns])
    claim_any = claim_any || p->from_remote;
  auto nd = st.args.self_node;
  std::vector<std::string> alive = nd->alive_peers();
  alive.push_back(nd->id());
  auto job = [nd, ns, alive, claim_any] {
    using out = std::tuple<std::string, std::string, int64_t, int64_t, std::string, std::string>;
    ownership o{nd->options().store, nd->options().prefix};
    auto current = o.owner_of(ns);
    if (!current)
      return out{ns, "", 0, 0, "", current.error().message};
    if (*current)
      return out{ns, (*current)->node_id, (*current)->epoch, (*current)->lease, "", ""};
    auto preferred = preferred_owner(ns, alive);
    if (!claim_any && preferred != nd->id())
      return out{ns, "", 0, 0, preferred, ""};
    auto claimed = o.claim(ns, nd->id(), nd->options().address, nd->lease());
    if (!claimed)
      return out{ns, "", 0, 0, preferred, claimed.error().message};
    if (claimed->node_id == nd->id())
      spdlog::info("cluster: node {} owns {} (epoch {})", nd->id(), ns, claimed->epoch);
    return out{ns, claimed->node_id, claimed->epoch, claimed->lease, preferred, ""};
  };
  pool_job(*st.args.pool, caf::actor_cast<router_actor>(self), std::move(job), resolved_atom_v);
}

void dispatch(self_ptr self, const std::string& ns, pending_ptr p) {
  auto& st = self->state;
  auto& nd = *st.args.self_node;
  if (!nd.serving()) {
    p->fail({ec::runtime_unavailable, nd.not_serving_text()});
    return;
  }
  if (nd.owned(ns)) {
    go_local(self, std::move(p));
    return;
  }
  if (!p->from_remote)
    if (auto c = st.cache.find(ns); c != st.cache.end() && st.peers.count(c->second)) {
      go_remote(self, c->second, std::move(p));
      return;
    }
  st.waiting[ns].push_back(std::move(p));
  resolve(self, ns);
}

void drop_peer(self_ptr self, const std::string& id, const std::string& why, bool tell = true) {
  auto& st = self->state;
  auto i = st.peers.find(id);
  if (i == st.peers.end())
    return;
  self->demonitor(i->second.router.address());
  if (tell)
    caf::anon_send(caf::actor_cast<router_actor>(i->second.router), link_atom_v, st.args.self_node->id());
  st.peers.erase(i);
  st.args.self_node->set_link(id, false, why);
  if (st.args.relink)
    st.args.relink();
  spdlog::warn("cluster: node {} lost its link to {}: {}", st.args.self_node->id(), id, why);
  for (auto c = st.cache.begin(); c != st.cache.end();)
    c = c->second == id ? st.cache.erase(c) : std::next(c);
  // What was forwarded there has an unknown outcome: it fails, never runs twice.
  for (auto& [n, f] : std::exchange(st.inflight[id], {}))
    if (!*f.done) {
      *f.done = true;
      f.fail({ec::runtime_unavailable, "Box cluster node " + id + " was lost while serving the request ("
                                          + why + "); its outcome is unknown"});
    }
  st.inflight.erase(id);
}

/// Sends a routed request to a peer's router and answers `rp` with its reply; "not the
/// owner" resolves the workspace again.
template <class Reply, class Atom, class Request>
void forward_to(self_ptr self, caf::typed_response_promise<Reply> rp, const runtime_actor& target,
                const std::string& peer_id, const std::string& ns, pending_ptr me, Atom atom,
                const Request& req) {
  auto& st = self->state;
  auto id = ++st.next_flight;
  auto done = std::make_shared<bool>(false);
  st.inflight[peer_id].emplace(id, flight{done, me->fail});
  self->request(target, forward_timeout(req), atom, req)
    .then(
      [self, rp, done, peer_id, id](Reply& r) mutable {
        self->state.inflight[peer_id].erase(id);
        if (std::exchange(*done, true))
          return;
        rp.deliver(std::move(r));
      },
      [self, rp, done, peer_id, id, ns, me](caf::error& err) mutable {
        self->state.inflight[peer_id].erase(id);
        if (std::exchange(*done, true))
          return;
        auto e = from_caf_error(err);
        if (is_not_owner(e)) {
          self->state.cache.erase(ns);
          dispatch(self, ns, me);
          return;
        }
        rp.deliver(err);
      });
}

/// Only a skill upload carries a file between nodes (backends/cluster/upload.hpp): on the
/// entry node its file is read into the request (`land` false), on the owner written to a
/// file of its own (`land` true). Both run on the worker pool, never in the router; `next`
/// runs here with the outcome, `req` changed in place.
template <class Request, class Next>
void move_upload(self_ptr, std::shared_ptr<Request>, bool, bool, Next next) {
  next(box_error{});
}
template <class Next>
void move_upload(self_ptr self, std::shared_ptr<skill_request> req, bool land, bool from_remote, Next next) {
  auto& st = self->state;
  bool file_work = land ? !req->file_bytes.empty() : !req->file_path.empty() && req->file_bytes.empty();
  if (!file_work) {
    next(land ? land_upload(*req, st.args.upload_dir, from_remote) : box_error{});
    return;
  }
  st.jobs.run(
    *st.args.pool, caf::actor_cast<router_actor>(self),
    [req, land, from_remote, dir = st.args.upload_dir] {
      if (land)
        return land_upload(*req, dir, from_remote);
      carry_upload(*req);
      return box_error{};
    },
    [next](std::optional<box_error> err) mutable {
      next(err ? std::move(*err) : box_error{ec::runtime_unavailable, "Box cluster could not move a forwarded upload"});
    });
}

/// A routed request: `forward` sends it by request (an answer "not the owner" sends it on
/// to the owner found again); `delegated` hands it over so the owner answers the original
/// sender (the stdio relay, whose actor is the sender).
template <class Reply, class Atom, class Request>
caf::result<Reply> route(self_ptr self, const std::string& ns, Atom atom, Request req, bool delegated = false) {
  auto& st = self->state;
  auto p = std::make_shared<pending>();
  // Read before the promise is made: making it takes the sender out of the message.
  const auto& sender = self->current_sender();
  p->from_remote = sender && sender->node() != self->node();
  p->ns = ns;
  auto rp = self->make_response_promise<Reply>();
  p->deadline = clock_type::now() + st.args.self_node->options().takeover_wait;
  p->fail = [rp](const box_error& e) mutable { rp.deliver(to_caf_error(e)); };
  // Shared by every try: an upload read for one owner is not read again for the next.
  auto held = std::make_shared<Request>(std::move(req));
  p->go = [rp, atom, held, ns, delegated](self_ptr self, const runtime_actor& target, const std::string& peer_id,
                                          pending_ptr me) mutable {
    move_upload(self, held, peer_id.empty(), me->from_remote,
                [self, rp, atom, held, ns, delegated, target, peer_id, me](box_error err) mutable {
                  if (err) {
                    rp.deliver(to_caf_error(err));
                    return;
                  }
                  if (peer_id.empty() || delegated) {
                    rp.delegate(target, atom, *held);
                    return;
                  }
                  forward_to(self, rp, target, peer_id, ns, me, atom, *held);
                });
  };
  dispatch(self, ns, std::move(p));
  return rp;
}


/// Fails whatever waited past its deadline; resolves again what still waits.
void on_tick(self_ptr self) {
  auto& st = self->state;
  auto& nd = *st.args.self_node;
  bool serving = nd.serving();
  if ((!serving || nd.lease() != st.lease_seen) && st.dirty)
    begin_reset(self);
  auto now = clock_type::now();
  for (auto i = st.waiting.begin(); i != st.waiting.end();) {
    auto& list = i->second;
    std::vector<pending_ptr> keep;
    for (auto& p : list) {
      if (!serving)
        p->fail({ec::runtime_unavailable, nd.not_serving_text()});
      else if (now >= p->deadline) {
        auto why = st.last_error.count(i->first) ? st.last_error[i->first] : std::string{"no owner was found"};
        p->fail({ec::runtime_unavailable,
                 "Box cluster found no serving owner for workspace " + i->first + " within "
                   + std::to_string(nd.options().takeover_wait.count()) + " ms: " + why});
      } else
        keep.push_back(p);
    }
    if (keep.empty()) {
      st.last_error.erase(i->first);
      i = st.waiting.erase(i);
      continue;
    }
    list = std::move(keep);
    if (!st.resolving.count(i->first))
      resolve(self, i->first);
    ++i;
  }
}

void on_resolved(self_ptr self, const std::string& ns, const std::string& owner, int64_t epoch, int64_t lease,
                 const std::string& preferred, const std::string& error) {
  auto& st = self->state;
  auto& nd = *st.args.self_node;
  st.resolving.erase(ns);
  if (!error.empty()) {
    st.last_error[ns] = error;
    return; // the next tick asks again
  }
  if (owner == nd.id()) {
    if (lease == 0 || lease != nd.lease()) {
      st.last_error[ns] = "an earlier lease of " + nd.id() + " still holds it";
      return;
    }
    nd.set_owned(ns, epoch, lease);
  } else if (!owner.empty()) {
    st.cache[ns] = owner;
  }
  auto w = st.waiting.find(ns);
  if (w == st.waiting.end())
    return;
  auto list = std::move(w->second);
  st.waiting.erase(w);
  std::vector<pending_ptr> keep;
  auto target = owner.empty() ? preferred : owner;
  bool linked = st.peers.count(target) > 0;
  for (auto& p : list) {
    if (owner == nd.id())
      go_local(self, p);
    else if (p->from_remote && !owner.empty())
      p->fail({ec::runtime_unavailable, not_owner_text(nd.id())});
    else if (linked && !p->from_remote)
      go_remote(self, target, p);
    else
      keep.push_back(p);
  }
  if (!keep.empty()) {
    st.last_error[ns] = owner.empty() ? "its preferred owner " + preferred + " is not linked from " + nd.id()
                                      : "its owner " + owner + " is not reachable from " + nd.id();
    st.waiting[ns] = std::move(keep);
  }
}

/// Every tenant request (actors.hpp: tenant_routes) goes to its workspace's owner; a
/// relay's requests and a streamed exec are delegated, so the relay's holder (the
/// stream's consumer) hears from the owner's session itself.
template <class Reply, class Atom, class Request>
caf::result<Reply> route_tenant(self_ptr self, std::type_identity<Reply>, Atom atom, Request& req) {
  auto scope = scope_of(req);
  auto ns = box_namespace(scope.instance, scope.workspace);
  return route<Reply>(self, ns, atom, std::move(req), std::is_same_v<Request, relay_request> || std::is_same_v<Request, exec_stream_request>);
}

router_actor::behavior_type router_behavior(self_ptr self, router_args args) {
  auto& st = self->state;
  st.args = std::move(args);
  st.local = st.args.spawn_local();
  *st.local_ref = st.local;
  st.lease_seen = st.args.self_node->lease();
  self->set_down_handler([self](const caf::down_msg& dm) {
    auto& st = self->state;
    for (auto& [id, p] : st.peers)
      if (p.router.address() == dm.source) {
        auto name = id;
        drop_peer(self, name, "the link closed (" + caf::to_string(dm.reason) + ")");
        return;
      }
  });
  self->attach_functor([local = st.local_ref](const caf::error&) {
    caf::anon_send_exit(*local, caf::exit_reason::user_shutdown);
  });
  self->send(self, tick_atom_v);
  return with_tenant_handlers<router_actor::behavior_type>(
    [self](auto reply, auto atom, auto& req) { return route_tenant(self, reply, atom, req); },
    [self](health_atom atom) -> caf::result<health_info> { return self->delegate(self->state.local, atom); },
    [self](init_atom atom, box_config& cfg) -> caf::result<bool> {
      // Stored in etcd first (every node applies it), then applied here.
      auto& st = self->state;
      std::vector<char> bytes;
      caf::binary_serializer sink{self->system(), bytes};
      if (auto err = sink(cfg))
        return to_caf_error({ec::runtime_unavailable, "box_init cannot be stored: " + caf::to_string(err)});
      auto rp = self->make_response_promise<bool>();
      auto token = ++st.next_init;
      st.storing.emplace(token, std::pair{rp, std::move(cfg)});
      auto nd = st.args.self_node;
      auto job = [nd, bytes = std::move(bytes)] {
        auto put = nd->options().store()->put(nd->init_key(), std::string_view{bytes.data(), bytes.size()});
        if (!put)
          return "Box cluster cannot store box_init in etcd: " + put.error().message;
        int64_t seen = nd->init_revision.load();
        while (seen < *put && !nd->init_revision.compare_exchange_weak(seen, *put)) {
        }
        return std::string{};
      };
      pool_job(*st.args.pool, caf::actor_cast<router_actor>(self), std::move(job), init_atom_v, token);
      return rp;
    },
    [self](init_atom, uint64_t token, std::string& error) {
      auto& st = self->state;
      auto i = st.storing.find(token);
      if (i == st.storing.end())
        return;
      auto [rp, cfg] = std::move(i->second);
      st.storing.erase(i);
      if (!error.empty()) {
        rp.deliver(to_caf_error({ec::runtime_unavailable, error}));
        return;
      }
      st.last_init = cfg;
      rp.delegate(st.local, init_atom_v, std::move(cfg));
    },
    [self](init_atom atom, box_config& cfg, int64_t revision) {
      spdlog::info("cluster: node {} applies the box_init stored at revision {}", self->state.args.self_node->id(),
                   revision);
      self->state.last_init = cfg;
      caf::anon_send(self->state.local, atom, std::move(cfg));
    },
    [self](shutdown_atom atom) -> caf::result<int64_t> { return self->delegate(self->state.local, atom); },
    // This node's sessions (docs/cluster.md: ask each node).
    [self](ps_atom atom, int64_t max) -> caf::result<ps_report> { return self->delegate(self->state.local, atom, max); },
    [self](done_atom, uint64_t token) { self->state.jobs.finish(token); },
    [self](tick_atom) {
      on_tick(self);
      self->delayed_send(self, tick_period, tick_atom_v);
    },
    [self](resolved_atom, std::string& ns, std::string& owner, int64_t epoch, int64_t lease, std::string& preferred,
           std::string& error) { on_resolved(self, ns, owner, epoch, lease, preferred, error); },
    [self](link_atom, std::string& id, std::string& address, caf::actor& handle) {
      auto& st = self->state;
      auto router = caf::actor_cast<runtime_actor>(handle);
      if (auto i = st.peers.find(id); i != st.peers.end()) {
        if (i->second.router == router)
          return;
        drop_peer(self, id, "a new link replaced it");
      }
      self->monitor(router);
      st.peers[id] = peer{address, router};
      st.args.self_node->set_link(id, true, "");
      spdlog::info("cluster: node {} linked to {} at {}", st.args.self_node->id(), id, address);
    },
    [self](link_atom, std::string& id) { drop_peer(self, id, "it dropped its link to this node", false); },
    [self](members_atom, std::set<std::string>& registered) {
      std::vector<std::string> gone;
      for (auto& [id, p] : self->state.peers)
        if (!registered.count(id))
          gone.push_back(id);
      for (auto& id : gone)
        drop_peer(self, id, "its lease ended");
    }
  );
}

struct gate_state {
  static inline const char* name = "boxrt.cluster.gate";
  uint64_t next = 0;
  struct hello {
    caf::typed_response_promise<std::string, caf::actor> rp;
    std::string id;
    std::string address;
    caf::actor router;
  };
  std::map<uint64_t, hello> waiting;
  /// Challenges handed out and not answered yet: nonce -> (node id asked for, when).
  std::map<std::string, std::pair<std::string, std::chrono::steady_clock::time_point>> nonces;
};

/// A challenge is answered within this, or forgotten; at most this many wait at once.
constexpr auto nonce_life = std::chrono::seconds{30};
constexpr size_t max_nonces = 1024;

gate_impl::behavior_type gate_behavior(gate_impl::stateful_pointer<gate_state> self, std::shared_ptr<node> nd,
                                       caf::actor router, std::shared_ptr<worker_pool> pool, std::string ca_file) {
  return {
    [=](hello_atom, std::string& id) -> caf::result<std::string> {
      auto& nonces = self->state.nonces;
      auto now = std::chrono::steady_clock::now();
      for (auto i = nonces.begin(); i != nonces.end();)
        i = now - i->second.second > nonce_life ? nonces.erase(i) : std::next(i);
      if (nonces.size() >= max_nonces)
        return to_caf_error({ec::runtime_unavailable, "Box cluster gate is busy: too many open challenges"});
      auto nonce = make_nonce();
      if (nonce.empty())
        return to_caf_error({ec::runtime_unavailable, "Box cluster gate cannot make a challenge"});
      nonces[nonce] = {std::move(id), now};
      return nonce;
    },
    [=](hello_atom, std::string& id, std::string& address, caf::actor& their_router, std::string& nonce,
        std::string& certificate, std::string& signature) -> caf::result<std::string, caf::actor> {
      // The challenge: handed out by this gate, for this node id, answered once.
      auto& nonces = self->state.nonces;
      auto asked = nonces.find(nonce);
      bool fresh = asked != nonces.end() && asked->second.first == id
                   && std::chrono::steady_clock::now() - asked->second.second <= nonce_life;
      if (asked != nonces.end())
        nonces.erase(asked);
      if (!fresh)
        nonce.clear();
      auto rp = self->make_response_promise<std::string, caf::actor>();
      auto token = ++self->state.next;
      self->state.waiting.emplace(token, gate_state::hello{rp, id, address, their_router});
      // The certificate and the registered members are checked on the pool: the gate
      // never blocks.
      auto job = [nd, id, address, nonce, ca_file, certificate = std::move(certificate),
                  signature = std::move(signature)] {
        std::string why;
        if (nonce.empty())
          why = "it answered no challenge of this node's";
        else if (auto bad = check_hello(ca_file, certificate, id, hello_text(nd->id(), nonce, id, address), signature);
                 !bad.empty())
          why = bad;
        if (!why.empty()) {
          spdlog::warn("cluster: node {} refused a link from {} at {}: {}", nd->id(), id, address, why);
          nd->add_refusal({id, address, why});
          return why;
        }
        ownership o{nd->options().store, nd->options().prefix};
        auto members = o.members();
        if (!members)
          why = "etcd cannot tell whether it is a member: " + members.error().message;
        else if (auto i = members->find(id); i == members->end())
          why = "node_id " + id + " is not a registered member";
        else if (i->second != address)
          why = "node_id " + id + " is registered at " + i->second + ", not at " + address;
        else if (id == nd->id())
          why = "node_id " + id + " is this node's own";
        if (!why.empty()) {
          spdlog::warn("cluster: node {} refused a link from {} at {}: {}", nd->id(), id, address, why);
          nd->add_refusal({id, address, why});
        }
        return why;
      };
      pool_job(*pool, caf::actor_cast<gate_impl>(self), std::move(job), link_atom_v, token);
      return rp;
    },
    [=](link_atom, uint64_t token, std::string& why) {
      auto i = self->state.waiting.find(token);
      if (i == self->state.waiting.end())
        return;
      auto h = std::move(i->second);
      self->state.waiting.erase(i);
      if (!why.empty()) {
        h.rp.deliver(to_caf_error({ec::permission, "Box cluster link refused: " + why}));
        return;
      }
      caf::anon_send(caf::actor_cast<router_actor>(router), link_atom_v, h.id, h.address, h.router);
      h.rp.deliver(nd->id(), router);
    },
  };
}

std::pair<std::string, uint16_t> split_address(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos)
    return {address, 0};
  auto host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  int port = 0;
  try {
    port = std::stoi(address.substr(colon + 1));
  } catch (...) {
  }
  return {host, static_cast<uint16_t>(port)};
}

} // namespace

/// What the linker waits on; shared with the router's relink callback, which may run
/// after the runtime is gone.
struct linker_signal {
  std::mutex mtx;
  std::condition_variable cv;
  bool stop = false;
  bool wake = false;
};

struct runtime::impl {
  caf::actor_system* sys = nullptr;
  std::shared_ptr<linker_signal> signal = std::make_shared<linker_signal>();
  std::shared_ptr<node> nd;
  /// This node's certificate and key, for its hellos.
  std::shared_ptr<const router_args> tls;
  router_actor router;
  gate_impl gate;
  std::thread linker;
  /// Members a link attempt runs for now (one each: a paused peer may hold it long).
  std::shared_ptr<std::set<std::string>> attempting = std::make_shared<std::set<std::string>>();
  std::shared_ptr<std::mutex> attempting_mtx = std::make_shared<std::mutex>();
  /// Members whose last attempt failed: not dialed again before `next`, the wait doubling
  /// up to 10 s. Each failed TLS handshake is a connection CAF's middleman opens and
  /// cleans up, and that churn can cost healthy links (docs/cluster.md "Limits").
  struct backoff {
    std::chrono::steady_clock::time_point next;
    std::chrono::milliseconds wait{0};
  };
  std::shared_ptr<std::map<std::string, backoff>> backoffs = std::make_shared<std::map<std::string, backoff>>();

  void link_to(const std::string& id, const std::string& address) {
    {
      std::lock_guard lock{*attempting_mtx};
      if (auto b = backoffs->find(id); b != backoffs->end() && std::chrono::steady_clock::now() < b->second.next)
        return;
      if (!attempting->insert(id).second)
        return;
    }
    // Detached: remote_actor has no timeout of its own, and a peer stopped mid-handshake
    // holds it until it resumes or its socket closes.
    std::thread{[sys = sys, nd = nd, router = router, tls = tls, id, address, attempting = attempting,
                 attempting_mtx = attempting_mtx, backoffs = backoffs] {
      auto [host, port] = split_address(address);
      std::string why;
      auto gate = caf::openssl::remote_actor<gate_actor>(*sys, host, port);
      if (!gate) {
        why = "cannot link to " + address + ": " + sys->render(gate.error());
      } else {
        caf::scoped_actor s{*sys};
        std::string nonce;
        s->request(*gate, hello_timeout, hello_atom_v, nd->id())
          .receive([&](std::string& n) { nonce = std::move(n); },
                   [&](caf::error& err) { why = "hello to " + address + " failed: " + from_caf_error(err).message; });
        // The answer proves this node holds its certificate's key (net/cluster/identity).
        auto signature = why.empty() ? sign_hello(tls->key, hello_text(id, nonce, nd->id(), nd->options().address))
                                     : result<std::string>{std::string{}};
        if (!signature)
          why = signature.error().message;
        if (why.empty())
        s->request(*gate, hello_timeout, hello_atom_v, nd->id(), nd->options().address,
                   caf::actor_cast<caf::actor>(router), nonce, read_pem(tls->certificate), *signature)
          .receive(
            [&](std::string& their_id, caf::actor& their_router) {
              if (their_id != id)
                why = address + " answered as node " + their_id + ", not " + id;
              else
                caf::anon_send(router, link_atom_v, id, address, their_router);
            },
            [&](caf::error& err) { why = "hello to " + address + " failed: " + from_caf_error(err).message; });
      }
      if (!why.empty()) {
        nd->set_link(id, false, why);
        spdlog::warn("cluster: node {} cannot link to {}: {}", nd->id(), id, why);
      }
      std::lock_guard lock{*attempting_mtx};
      attempting->erase(id);
      if (why.empty()) {
        backoffs->erase(id);
      } else {
        auto& b = (*backoffs)[id];
        b.wait = std::min<std::chrono::milliseconds>(std::chrono::seconds{10},
                                                      std::max(nd->options().lease / 3, b.wait * 2));
        b.next = std::chrono::steady_clock::now() + b.wait;
      }
    }}.detach();
  }

  /// A box_init stored by another node since the last one applied here.
  void apply_stored_init(ownership&) {
    auto kv = nd->options().store()->get(nd->init_key());
    if (!kv || !*kv || (*kv)->mod_revision <= nd->init_revision.load())
      return;
    nd->init_revision = (*kv)->mod_revision;
    box_config cfg;
    const auto& v = (*kv)->value;
    caf::binary_deserializer source{*sys, v.data(), v.size()};
    if (auto err = source(cfg)) {
      spdlog::error("cluster: the stored box_init cannot be read: {}", caf::to_string(err));
      return;
    }
    caf::anon_send(router, init_atom_v, std::move(cfg), (*kv)->mod_revision);
  }

  void run_linker() {
    const auto period = nd->options().lease / 3;
    for (;;) {
      ownership o{nd->options().store, nd->options().prefix};
      auto members = o.members();
      if (members) {
        nd->set_registered(*members, true);
        std::set<std::string> ids;
        for (auto& [id, address] : *members)
          ids.insert(id);
        caf::anon_send(router, members_atom_v, std::move(ids));
        auto alive = nd->alive_peers();
        for (auto& [id, address] : *members)
          if (id > nd->id() && std::find(alive.begin(), alive.end(), id) == alive.end())
            link_to(id, address);
        apply_stored_init(o);
      } else {
        nd->set_registered({}, false);
      }
      std::unique_lock lock{signal->mtx};
      if (signal->cv.wait_for(lock, period, [&] { return signal->stop || signal->wake; }) && signal->stop)
        return;
      signal->wake = false;
    }
  }
};

router_actor spawn_router(caf::actor_system& sys, router_args args) {
  return sys.spawn(router_behavior, std::move(args));
}

result<std::unique_ptr<runtime>> runtime::start(caf::actor_system& sys, router_args args) {
  std::unique_ptr<runtime> rt{new runtime};
  rt->impl_ = std::make_unique<impl>();
  auto& im = *rt->impl_;
  im.sys = &sys;
  im.nd = args.self_node;
  auto pool = args.pool;
  // A lost link is dialed again at once, not a linker period later.
  args.relink = [signal = im.signal] {
    {
      std::lock_guard lock{signal->mtx};
      signal->wake = true;
    }
    signal->cv.notify_all();
  };
  auto host = args.listen_host;
  auto port = args.listen_port;
  auto ca_file = args.ca_file;
  {
    router_args files;
    files.certificate = args.certificate;
    files.key = args.key;
    files.ca_file = args.ca_file;
    im.tls = std::make_shared<const router_args>(std::move(files));
  }
  im.router = spawn_router(sys, std::move(args));
  im.gate = sys.spawn(gate_behavior, im.nd, caf::actor_cast<caf::actor>(im.router), pool, ca_file);
  auto published = caf::openssl::publish(caf::actor_cast<gate_actor>(im.gate), port, host.c_str(), true);
  if (!published) {
    caf::anon_send_exit(im.router, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(im.gate, caf::exit_reason::user_shutdown);
    return box_error{ec::validation, "cluster.listen " + host + ":" + std::to_string(port)
                                       + " cannot be bound: " + sys.render(published.error())};
  }
  spdlog::info("cluster: node {} links as CAF node {}", im.nd->id(), caf::to_string(sys.node()));
  im.linker = std::thread{[&im] { im.run_linker(); }};
  return rt;
}

runtime::~runtime() {
  if (!impl_)
    return;
  {
    std::lock_guard lock{impl_->signal->mtx};
    impl_->signal->stop = true;
  }
  impl_->signal->cv.notify_all();
  if (impl_->linker.joinable())
    impl_->linker.join();
  impl_->nd->stop();
  caf::anon_send_exit(impl_->gate, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(impl_->router, caf::exit_reason::user_shutdown);
}

runtime_actor runtime::router() const {
  return caf::actor_cast<runtime_actor>(impl_->router);
}

} // namespace boxrt::cluster
