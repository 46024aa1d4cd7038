// The trusted instance (protocol.md §1.3 step 3): pre-set by server.trusted_instance or
// pinned by the first RPC handshake that upgrades. One object per boxd: the network
// side pins it and checks handshakes and host actions against it, the directory checks
// every tenant request against it; nothing keeps a copy of its own.
#pragma once

#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include <openssl/crypto.h>

namespace boxrt {

class trusted_instance {
 public:
  explicit trusted_instance(std::string preset = {}) : value_(std::move(preset)) {}

  /// A cluster node's pin is one value for the whole cluster (docs/cluster.md): `pin(id)`
  /// pins it there when none is and returns the pinned one ("" when it cannot tell, which
  /// refuses); `get()` returns it ("" while none is, nullopt when it cannot tell, which
  /// refuses too). Both may block (bounded); each is asked only until this object holds a
  /// value.
  void use_shared(std::function<std::string(std::string_view)> pin,
                  std::function<std::optional<std::string>()> get) {
    std::lock_guard guard{mtx_};
    shared_pin_ = std::move(pin);
    shared_get_ = std::move(get);
  }

  /// The pinned instance, "" while none is.
  std::string get() const {
    std::lock_guard guard{mtx_};
    refresh();
    return value_;
  }

  /// True when nothing is pinned yet or `id` is the pinned instance (a cluster's pin that
  /// cannot be read admits nothing).
  bool admits(std::string_view id) const {
    std::lock_guard guard{mtx_};
    if (!refresh())
      return false;
    return value_.empty() || equal(value_, id);
  }

  /// Pins `id` when nothing is pinned; true when `id` is (now) the pinned instance.
  bool pin(std::string_view id) {
    std::lock_guard guard{mtx_};
    if (value_.empty()) {
      if (shared_pin_) {
        value_ = shared_pin_(id);
        return !value_.empty() && equal(value_, id);
      }
      value_ = std::string{id};
      return true;
    }
    return equal(value_, id);
  }

 private:
  /// Compared in constant time: the instance id is a credential of the host.
  static bool equal(std::string_view a, std::string_view b) {
    return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
  }

  /// A cluster's pin, set by another node, once this node has none; false when it cannot
  /// be read now.
  bool refresh() const {
    if (!value_.empty() || !shared_get_)
      return true;
    auto shared = shared_get_();
    if (!shared)
      return false;
    value_ = *shared;
    return true;
  }

  mutable std::mutex mtx_;
  mutable std::string value_;
  std::function<std::string(std::string_view)> shared_pin_;
  std::function<std::optional<std::string>()> shared_get_;
};

} // namespace boxrt
