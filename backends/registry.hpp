// Backend selection: turns `box.backend` into the driver boxd runs with
// (backends-and-skills.md §3), or into the reason there is none.
#pragma once

#include <functional>
#include <string>

#include "backends/backend.hpp"

namespace boxrt {

/// The outcome of selection. `backend` is null when the requested backend cannot run
/// here; `name` is still the requested (canonical) name and `reason` says why.
struct backend_choice {
  backend_ptr backend;
  std::string name;
  std::string reason;
};

/// What backends take from boxd's own (server) configuration, which box_init never
/// changes: the sandbox uid range, the trusted host's group, where boxd listens.
struct host_options {
  uint32_t uid_first = 0x70000000u;
  uint32_t uid_last = 0x7000ffffu;
  int64_t host_gid = -1;
  std::string listen_host;
  /// A cluster node (docs/cluster.md): its id, and the cluster-wide uid reservation.
  /// Quota images then live in `<host_root>/images` with multi-mount protection, and no
  /// warm pool runs (a warm sandbox would hold a uid nobody reserved).
  std::string cluster_node;
  std::function<int(uint32_t, const std::string&, bool)> reserve_uid;
  std::function<void(uint32_t, const std::string&)> release_uid;
  /// Where boxrt-init (and an nsjail shipped with boxrt) are; "" = beside the executable.
  std::string helper_dir;
};

/// Selects the backend named by `config.backend` ("", "auto" and "local" mean bwrap).
/// A named backend that is unavailable never falls back to another one.
backend_choice select_backend(const box_config& config, const host_options& host = {});

struct sandbox_options;

/// The bwrap backend's options derived from `box.local` (state under the host root,
/// skill storage under the skills root, workspaces under the default workspace's
/// tenants folder) and `host`.
sandbox_options sandbox_options_for(const box_config& config, const host_options& host = {});

/// The reference's BoxBackendUnavailableError text, for execs without a backend.
std::string backend_unavailable_message();

} // namespace boxrt
