// The trusted instance (protocol.md §1.3 step 3): pre-set by server.trusted_instance or
// pinned by the first RPC handshake that upgrades. One object per boxd: the network
// side pins it and checks handshakes and host actions against it, the directory checks
// every tenant request against it; nothing keeps a copy of its own.
#pragma once

#include <mutex>
#include <string>
#include <string_view>

#include <openssl/crypto.h>

namespace boxrt {

class trusted_instance {
 public:
  explicit trusted_instance(std::string preset = {}) : value_(std::move(preset)) {}

  /// The pinned instance, "" while none is.
  std::string get() const {
    std::lock_guard guard{mtx_};
    return value_;
  }

  /// True when nothing is pinned yet or `id` is the pinned instance.
  bool admits(std::string_view id) const {
    std::lock_guard guard{mtx_};
    return value_.empty() || equal(value_, id);
  }

  /// Pins `id` when nothing is pinned; true when `id` is (now) the pinned instance.
  bool pin(std::string_view id) {
    std::lock_guard guard{mtx_};
    if (value_.empty()) {
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

  mutable std::mutex mtx_;
  std::string value_;
};

} // namespace boxrt
