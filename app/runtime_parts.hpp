// Internal to boxrt (app/runtime.cpp, boxd): everything a started runtime holds. The
// public entry (app/runtime.hpp) keeps it alive with the runtime's handle; boxd keeps
// it itself and gives its WebSocket server the node-local objects it shares.
#pragma once

#include <atomic>
#include <memory>

#include "actors/cluster/router.hpp"
#include "actors/directory.hpp"
#include "app/runtime.hpp"
#include "backends/cluster/node.hpp"
#include "backends/linux/watchdog.hpp"

namespace boxrt {

struct runtime_parts {
  /// The lease deadline on its way to the watchdog (membership starts before it runs).
  struct deadline_relay {
    std::atomic<int64_t> last{-1};
    std::atomic<watchdog*> dog{nullptr};
  };

  /// The runtime's handle: the directory, or a cluster node's router.
  runtime_actor directory;
  std::shared_ptr<worker_pool> pool;
  std::shared_ptr<process_registry> processes;
  std::shared_ptr<settings_snapshot> snapshot;
  std::shared_ptr<trusted_instance> trusted;
  /// A cluster node's parts (null otherwise).
  std::shared_ptr<cluster::node> cluster_node;
  std::shared_ptr<deadline_relay> relay;
  std::unique_ptr<watchdog> dog;
  std::unique_ptr<cluster::runtime> cluster;
  /// A cluster node keeps its first backend here too (its watchdog names its cgroups).
  backend_ptr backend;
};

/// Why a start failed: the error (ec::validation for a bad config) and boxd's exit code.
/// After a cluster node's membership started, its threads may still run: boxd ends the
/// process at once (std::_Exit) rather than destroy them.
struct start_failure {
  box_error error;
  int exit_code = 2;
  bool membership_started = false;
  /// Stop a started membership before returning (an embedded runtime; boxd ends).
  bool stop_membership = false;
};

/// Validates `rc`, starts membership (a cluster node), selects the backend, loads the
/// admission state, starts the watchdog and spawns the directory (or router). Logs what
/// boxd logs while it starts. Blocking.
std::shared_ptr<runtime_parts> start_runtime(caf::actor_system& sys, const runtime_config& rc,
                                             start_failure& failure);

/// rc's own checks (no backend, no etcd): ec::validation errors.
box_error validate_runtime_config(const runtime_config& rc);

} // namespace boxrt
