// The directory: the one owner of the workspace -> supervisor map (first use of a
// workspace coalesces here) and of instance-level state: trusted instance, config,
// background readiness, the global session cap and the workspace-record cap.
#pragma once

#include <memory>
#include <string>

#include "actors/actors.hpp"
#include "actors/backend_slot.hpp"
#include "actors/settings_snapshot.hpp"
#include "actors/trusted_instance.hpp"
#include "actors/process_registry.hpp"
#include "backends/state/admission_store.hpp"
#include "backends/backend.hpp"
#include "messages/base/worker_pool.hpp"

namespace caf {
class actor_system;
} // namespace caf

namespace boxrt {

struct directory_args {
  box_config config;
  /// The trusted instance as configured; ignored when `trusted` is given.
  std::string trusted_instance;
  /// The trusted instance shared with the network side, which pins it at the first RPC
  /// handshake (null: the directory keeps one, pre-set from `trusted_instance`).
  std::shared_ptr<boxrt::trusted_instance> trusted;
  backend_ptr backend;          // null when no backend is usable
  std::string backend_name;     // selected or requested backend name
  std::string backend_reason;   // why no backend is usable
  /// Selects the backend a box_init names while no session exists (protocol.md
  /// §4.10.1); null keeps `backend` for good. Runs on the worker pool.
  backend_selector select;
  std::shared_ptr<worker_pool> pool;
  /// Managed processes of this node (shared with the relay); null = none can start.
  std::shared_ptr<process_registry> processes;
  /// LANGBOT_BOX_ALLOW_UNSAFE_SOFT_STORAGE_LIMITS.
  bool unsafe_soft_storage = false;
  /// boxd's transfer folder, kept out of every tenant's mounts ("" = none).
  std::string transfer_dir;
  /// server.testing: the scripted backend may make admission mode ready (tests only).
  bool testing = false;
  /// Durable admission state (contract §4.11); null keeps it in memory only.
  std::shared_ptr<admission_store> store;
  /// True while a readiness probe's verdict can be trusted (null: always). A cluster
  /// node's is its `serving()`: while it is fenced its watchdog kills every sandbox and
  /// etcd refuses uid reservations, so a probe then fails whatever the backend's state.
  std::function<bool()> probe_gate;
  /// Where the directory publishes its settings after each change (null: nowhere).
  std::shared_ptr<settings_snapshot> snapshot;
};

directory_actor spawn_directory(caf::actor_system& sys, directory_args args);

} // namespace boxrt
