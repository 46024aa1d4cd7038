// What the cluster's durable state needs of a key-value store (docs/cluster.md): keys,
// create-if-absent and fenced puts, and leases, with etcd's meaning (revisions, leases
// whose keys go with them). The cluster's state (backends/cluster/, the etcd admission
// store) is written against this; net/etcd/client.hpp is the etcd client that implements
// it, handed in by the application as a connector. Socket-free.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "messages/error.hpp"

namespace boxrt::kv {

struct key_value {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;
};

/// What create() found.
struct create_outcome {
  /// True when this call created the key; its create revision is then `revision`.
  bool created = false;
  /// The store's revision after the call.
  int64_t revision = 0;
  /// The key as it was when it existed already.
  std::optional<key_value> existing;
};

/// One client of the store. Not thread-safe: one per thread. Every call is bounded by
/// the client's own timeout; a failure after the request was sent is reported (its
/// outcome unknown), never retried, so nothing is applied twice.
class store {
 public:
  virtual ~store() = default;

  virtual result<std::optional<key_value>> get(std::string_view key) = 0;
  /// Every key that starts with `prefix`, in key order.
  virtual result<std::vector<key_value>> list(std::string_view prefix) = 0;
  /// Returns the store's revision after the put. `lease` 0 = none.
  virtual result<int64_t> put(std::string_view key, std::string_view value, int64_t lease = 0) = 0;
  /// Puts `key` only when it does not exist (one transaction).
  virtual result<create_outcome> create(std::string_view key, std::string_view value,
                                        int64_t lease = 0) = 0;
  /// Puts `key` only while `guard` exists with create revision `epoch` (a fenced write:
  /// an owner whose key was replaced writes nothing). False when the guard did not hold.
  virtual result<bool> put_fenced(std::string_view guard, int64_t epoch, std::string_view key,
                                  std::string_view value) = 0;
  /// True when the key existed.
  virtual result<bool> erase(std::string_view key) = 0;
  /// A new lease of `ttl` (whole seconds, at least 1); returns its id.
  virtual result<int64_t> grant(std::chrono::milliseconds ttl) = 0;
  /// Renews the lease once; returns its remaining TTL, 0 when the lease is gone.
  virtual result<std::chrono::milliseconds> keep_alive(int64_t lease) = 0;
  /// Ends the lease and deletes its keys. A lease that is gone already is no error.
  virtual box_error revoke(int64_t lease) = 0;
};

/// Opens new clients of the store (each thread that talks to it holds its own).
struct connector {
  /// A client whose every call takes at most `cap` (or the store's own timeout, when
  /// shorter).
  std::function<std::unique_ptr<store>(std::chrono::milliseconds cap)> open;

  std::unique_ptr<store> operator()(
    std::chrono::milliseconds cap = std::chrono::milliseconds::max()) const {
    return open(cap);
  }
};

} // namespace boxrt::kv
