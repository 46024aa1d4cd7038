// boxrt as a library (docs/embedding.md): the sandbox runtime started inside a host
// application's own caf::actor_system and spoken to with typed messages
// (actors/actors.hpp: runtime_actor), no WebSocket in between. boxd is this plus a
// WebSocket server. Public header: CAF and boxrt's message models only.
#pragma once

#include <cstdint>
#include <string>

#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include <boxrt/actors/actors.hpp>
#include <boxrt/app/cluster_config.hpp>
#include <boxrt/messages/models.hpp>

namespace boxrt {

/// What the runtime is started with: boxd's `box` block, the parts of its `server` block
/// that concern sandboxes and admission, and the optional `cluster` block.
struct runtime_config {
  /// Backend, data folders (`local`), limits, admission (protocol.md §4.10). Relative
  /// folders resolve against the working directory; `local.host_root` must be set.
  box_config box;
  /// Host uids sandboxes run as, one per workspace, inclusive (boxd's
  /// server.sandbox_uid_range; a cluster node takes cluster.uid_range instead).
  uint32_t sandbox_uid_first = 0x70000000u;
  uint32_t sandbox_uid_last = 0x7000ffffu;
  /// The trusted host's group on tenant trees; -1: the process's effective gid.
  int64_t host_gid = -1;
  /// An address the host application listens on that network-on sandboxes must not
  /// reach (boxd: server.host; loopback is always refused). "" = none.
  std::string listen_host;
  /// Pre-pinned trusted instance ("" = the first one the host names is pinned).
  std::string trusted_instance;
  /// Lets the scripted test backend make admission mode ready. Never in production.
  bool testing = false;
  /// Starts with empty admission state where its database is missing (boxd --init-state).
  bool init_state = false;
  /// LANGBOT_BOX_ALLOW_UNSAFE_SOFT_STORAGE_LIMITS.
  bool unsafe_soft_storage = false;
  /// The host application's upload folder (boxd: server.transfer_dir), which no
  /// tenant's mount may reach ("" = none).
  std::string transfer_dir;
  /// Where boxrt's helper programs are (boxrt-init, boxrt-watchdog, a bundled nsjail):
  /// "" = beside the executable, as for boxd. An installed tree has them in
  /// `<prefix>/libexec/boxrt` (boxrtConfig.cmake: `boxrt_HELPER_DIR`).
  std::string helper_dir;
  /// Makes this application one node of a boxd cluster (docs/cluster.md); `enabled`
  /// false: one runtime with its embedded SQLite admission state.
  cluster_config cluster;
};

/// Registers boxrt's type-ID block (and so its messages and error category) with `cfg`.
/// Call before the actor system is built.
void configure(caf::actor_system_config& cfg);

/// As above, and for a cluster node (`rc.cluster.enabled`) also loads CAF's middleman
/// and its OpenSSL manager with the node's certificate, key and CA.
void configure(caf::actor_system_config& cfg, const runtime_config& rc);

/// Validates `rc` (an error: boxrt's error category, code ec::validation, the message a
/// BoxValidationError would carry), selects the backend, loads the admission state and
/// spawns the runtime. Blocks while it starts (up to the cluster's lease for a node).
/// The handle is the runtime: every request goes to it. Stop it with
/// `request(runtime, timeout, shutdown_atom_v)` (every session stopped, every sandbox
/// torn down, then the reply), then `anon_send_exit(runtime, user_shutdown)`; the
/// runtime's threads and descriptors go with its last actor.
caf::expected<runtime_actor> spawn_runtime(caf::actor_system& sys, const runtime_config& rc);

} // namespace boxrt
