// The skill-store actor of one workspace (see actors.hpp). Spawned by the workspace's
// supervisor when a skill action first arrives.
#pragma once

#include <memory>
#include <string>

#include "actors/actors.hpp"
#include "backends/backend.hpp"
#include "messages/base/worker_pool.hpp"

namespace boxrt {

/// `root` is the workspace's scoped skill root (`<skills_root>/tenants/ws-<24 hex>`).
/// Before its first job the actor has `backend` (may be null) make the storage ready
/// and say where it lives (the sandbox backend mounts the workspace's skill-storage
/// quota image in its state folder instead), and holds it for as long as it lives.
skill_actor spawn_skill_store(caf::local_actor* parent, std::string root,
                              std::shared_ptr<worker_pool> pool, backend_ptr backend);

} // namespace boxrt
