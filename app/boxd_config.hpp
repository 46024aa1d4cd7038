// boxd's start-up configuration: the embedded default, `--config FILE`
// ({"server": {...}, "box": {...}}), the environment variables of protocol.md §1.1 and
// `--listen`. Plain C++; no CAF, no Beast.
#pragma once

#include <string>
#include <vector>

#include "app/cluster_config.hpp"
#include "messages/error.hpp"
#include "messages/models.hpp"
#include "net/ws/server_options.hpp"

namespace boxrt {

/// What the command line asked boxd to do.
enum class boxd_command { run, help, version, check_config };

struct boxd_config {
  boxd_command command = boxd_command::run;
  /// --config or --check-config FILE ("" = none).
  std::string config_file;
  /// --data-dir DIR: box.local.host_root is DIR/box (a config file may still set it).
  std::string data_dir;
  net::server_options server;
  box_config box;
  /// The `cluster` block (docs/cluster.md); `enabled` false without one.
  cluster_config cluster;
  /// LANGBOT_BOX_ALLOW_UNSAFE_SOFT_STORAGE_LIMITS.
  bool unsafe_soft_storage = false;
  /// --init-state: start with empty admission state where its database is missing.
  bool init_state = false;
  /// Warnings to log once logging is up (never secrets).
  std::vector<std::string> warnings;
  /// Keys of the `box` blocks (file and LANGBOT_BOX_CONFIG) boxd does not use.
  std::vector<std::string> ignored;
};

/// boxd --help.
std::string boxd_usage();

/// The effective configuration, defaults included, as indented JSON (boxd
/// --check-config); the control token is shown as set or not, never its value.
std::string effective_config(const boxd_config& cfg);

/// The first range of /etc/subuid or /etc/subgid ("name:start:count" lines) that
/// overlaps [first, last], as "file (name: start-end)" text; "" when none does.
std::string subid_overlap(uint32_t first, uint32_t last);

/// The embedded default: standard mode, backend auto, 127.0.0.1:5410, data under
/// ./data/box.
boxd_config default_boxd_config();

/// Builds the configuration from the command line and the environment. `env` looks up a
/// variable ("" when unset). Errors name the offending key or flag.
result<boxd_config> load_boxd_config(const std::vector<std::string>& args,
                                     std::string (*env)(const char*));

} // namespace boxrt
