// A cluster node's data path (docs/cluster.md "Routing", "Membership"): the router is the
// directory the network side talks to. Host-level messages (health, box_init, shutdown)
// go to the node's own directory; every tenant and host-control action for a workspace
// goes to its owner: this node's directory when it owns the workspace under its current
// lease, else the owner's router on another node, as the same typed message over CAF's
// middleman (BASP over caf_openssl). Links between nodes start with a typed hello checked
// against the members registered in etcd. Nothing here blocks the router: etcd calls run
// on the worker pool and on the linker's threads, and an upload carried to the owner or
// landed from another node is read or written on the worker pool too (move_upload).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "actors/actors.hpp"
#include "backends/cluster/node.hpp"
#include "messages/base/worker_pool.hpp"
#include "messages/error.hpp"

namespace caf {
class actor_system;
} // namespace caf

namespace boxrt::cluster {

struct router_args {
  std::shared_ptr<node> self_node;
  /// Spawns a fresh directory of this node: at start, and again after the node lost its
  /// lease (the old one's sessions are stopped first, and its admission memory goes).
  std::function<runtime_actor()> spawn_local;
  std::shared_ptr<worker_pool> pool;
  /// Where links are accepted (cluster.listen).
  std::string listen_host;
  uint16_t listen_port = 0;
  /// Where uploads forwarded by other nodes are landed (a folder only boxd can write).
  std::string upload_dir;
  /// This node's TLS files (cluster.tls): a hello is signed with the key and carries the
  /// certificate; a peer's hello is checked against the CA (backends/cluster/identity.hpp).
  std::string certificate;
  std::string key;
  std::string ca_file;
  /// Set by runtime::start: asks the linker to dial again now (a link was lost).
  std::function<void()> relink;
};

/// The router alone: no gate, no linker, no membership (runtime::start starts those).
/// It spawns its first directory at once and routes by `args.self_node`.
router_actor spawn_router(caf::actor_system& sys, router_args args);

class runtime {
 public:
  /// Starts membership, the router, the gate (published with TLS on the listen address)
  /// and the linker. Errors: the listen address cannot be bound.
  static result<std::unique_ptr<runtime>> start(caf::actor_system& sys, router_args args);
  /// Stops linking and renewing; the lease is given up.
  ~runtime();

  /// The directory the network side uses.
  runtime_actor router() const;

 private:
  runtime() = default;
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace boxrt::cluster
