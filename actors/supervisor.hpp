// The workspace supervisor: one per workspace. Owns the workspace's admission plane
// (fence, snapshot, grant, tombstone) and its physical-id -> session map, so first
// use of a session coalesces here without a lock.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "actors/actors.hpp"
#include "actors/process_registry.hpp"
#include "backends/state/admission_store.hpp"
#include "actors/backend_slot.hpp"
#include "backends/backend.hpp"
#include "messages/base/worker_pool.hpp"

namespace boxrt {

struct supervisor_args {
  /// Moved into the admission plane at start (empty afterwards).
  std::string instance_uuid;
  std::string workspace_uuid;
  /// This supervisor's key in the directory (instance and workspace).
  std::string directory_key;
  directory_actor directory;  // session slots and idle reports
  /// Shared by every supervisor of the node (immutable; replaced on each change).
  std::shared_ptr<const instance_settings> settings;
  /// The node's backend (its content may change while no session exists).
  std::shared_ptr<backend_slot> backend;
  std::shared_ptr<worker_pool> pool;
  std::shared_ptr<process_registry> processes;
  /// Durable admission state; null keeps it in memory only (tests of the actor core).
  std::shared_ptr<admission_store> store;
  /// The workspace's record in `store`, read by the directory on the worker pool before
  /// the spawn (nullopt: not read, the supervisor reads it at its start).
  std::optional<result<std::optional<std::string>>> record;
};

supervisor_actor spawn_supervisor(caf::local_actor* parent, supervisor_args args);

/// The node's settings as one shared object: equal settings given twice (the directory's
/// broadcast reaches every supervisor with its own copy) come back as the same pointer,
/// so thousands of supervisors hold one copy, not one each.
std::shared_ptr<const instance_settings> shared_settings(instance_settings s);

} // namespace boxrt
