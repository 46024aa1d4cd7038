// The WebSocket Action-RPC server: one port for /rpc/ws, the managed-process stdio
// relay, /healthz and /readyz
// (protocol.md §1). Beast stays inside net/*.cpp; this header is CAF- and Beast-free
// apart from the directory handle.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "actors/actors.hpp"
#include "actors/settings_snapshot.hpp"
#include "actors/trusted_instance.hpp"
#include "messages/base/worker_pool.hpp"
#include "messages/error.hpp"
#include "net/ws/server_options.hpp"

namespace caf {
class actor_system;
} // namespace caf

namespace boxrt {
class process_registry;
} // namespace boxrt

namespace boxrt::net {

/// Counters of the server since start.
struct server_stats {
  size_t connections = 0;
  /// Replies handed to sockets and not yet written, over all connections.
  uint64_t unwritten_replies = 0;
  /// Times a connection stopped reading because its outbound queue passed a cap.
  uint64_t outbound_pauses = 0;
  /// Times a connection stopped reading because its actor had not handled enough of
  /// what was read (the inbound window, server.max_unhandled_*).
  uint64_t inbound_pauses = 0;
  /// Connections closed with 1008 "outbound queue full".
  uint64_t outbound_stall_closes = 0;
  /// Connections accepted that have not upgraded (or been closed) yet.
  size_t pending_handshakes = 0;
  /// Connections closed at accept (pending handshakes at their cap, descriptors reserved).
  uint64_t refused_accepts = 0;
};

/// What a cluster node answers on GET /cluster and /cluster/owner (docs/cluster.md).
struct cluster_endpoints {
  std::string node_id;
  /// The /cluster body, from local state.
  std::function<std::string()> status;
  /// The /cluster/owner body for an instance and workspace; blocking (etcd), so it runs
  /// on the worker pool.
  std::function<result<std::string>(const std::string&, const std::string&)> owner;
};

class server {
 public:
  /// `processes` is where the stdio relay finds managed processes (the registry the
  /// directory's sessions fill); null serves no relay.
  /// `trusted`: the trusted instance shared with the directory (null: the server keeps
  /// one of its own, pre-set from opts.trusted_instance).
  /// `settings`: the directory's published snapshot, which connections read instead of
  /// asking the directory for its settings (null: they ask).
  server(caf::actor_system& sys, runtime_actor directory, std::shared_ptr<worker_pool> pool,
         server_options opts, std::shared_ptr<process_registry> processes = nullptr,
         std::shared_ptr<const settings_snapshot> settings = nullptr,
         std::shared_ptr<trusted_instance> trusted = nullptr);
  ~server();

  server(const server&) = delete;
  server& operator=(const server&) = delete;

  /// Binds and starts accepting; returns the bound port. Throws std::runtime_error with a
  /// clear message when the address cannot be bound.
  uint16_t start();

  /// Stops accepting, answers or fails in-flight requests, closes every socket with 1001
  /// "Box runtime shutting down" and joins the I/O threads. Idempotent.
  void stop();

  /// Makes this a cluster node's server (before start()).
  void set_cluster(std::shared_ptr<const cluster_endpoints> cluster);

  /// Connections open now.
  size_t connections() const;

  server_stats stats() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace boxrt::net
