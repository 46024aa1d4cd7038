// The `cluster` block of boxd's configuration (docs/cluster.md): the interface other
// tools drive, validated at start. Errors are BoxValidationError with the key's path.
// Plain C++; the decoder (cluster_config.cpp) reads simdjson.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boxrt/messages/error.hpp>

namespace simdjson::dom {
class element;
}

namespace boxrt {

/// A certificate, its key and the CA that signed the peers' (all three paths).
struct cluster_tls {
  std::string certificate;
  std::string key;
  std::string ca_file;
};

struct cluster_config {
  /// False without a `cluster` block: one boxd, as always.
  bool enabled = false;
  std::string node_id;
  std::string listen_host;
  uint16_t listen_port = 0;
  std::string advertise_host;
  uint16_t advertise_port = 0;
  std::vector<std::string> etcd_endpoints;
  std::string etcd_prefix;
  std::optional<cluster_tls> etcd_tls;
  cluster_tls tls;
  int64_t lease_ms = 3000;
  int64_t takeover_wait_ms = 5000;
  uint32_t uid_first = 0;
  uint32_t uid_last = 0;
};

/// A sandbox uid range, [FIRST, LAST] with 1 <= FIRST <= LAST <= 4294967294, as both
/// `server.sandbox_uid_range` and `cluster.uid_range` take it; nullopt when `v` is not one.
std::optional<std::pair<uint32_t, uint32_t>> decode_uid_range(const simdjson::dom::element& v);

/// Decodes and checks the block: every key known, every value of its type and range,
/// `tls` with all three files readable (CAF 0.17 falls back to anonymous TLS without
/// them, which authenticates nobody), `etcd.tls` the same when given.
result<cluster_config> decode_cluster_config(const simdjson::dom::element& block);

/// The same checks for a block built in code (an embedded runtime: app/runtime.hpp);
/// nothing when `c.enabled` is false.
box_error check_cluster_config(const cluster_config& c);

/// The certificate chain, key and CA at `t` load as the TLS layer will load them;
/// errors name `path` ("cluster.tls").
box_error check_tls_files(const cluster_tls& t, const std::string& path);

} // namespace boxrt
