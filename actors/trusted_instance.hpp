// The trusted instance (protocol.md §1.3 step 3): pre-set by server.trusted_instance or
// pinned by the first RPC handshake that upgrades. One object per boxd: the network
// side pins it and checks handshakes and host actions against it, the directory checks
// every tenant request against it; nothing keeps a copy of its own.
//
// On a cluster node the pin is one value for the whole cluster, kept in etcd. Reading or
// writing it may wait for etcd: only settle() and pin() do, and their callers run them on
// the worker pool, never on a scheduler or I/O thread. check() never waits: it answers
// from the value held here, which is kept once read.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include <openssl/crypto.h>

namespace boxrt {

class trusted_instance {
 public:
  enum class verdict {
    admit,
    refuse,
    /// The cluster's pin must be read first (settle(), on the worker pool).
    unknown,
  };

  explicit trusted_instance(std::string preset = {}) : value_(std::move(preset)) {}

  /// A cluster node's pin is one value for the whole cluster (docs/cluster.md): `pin(id)`
  /// pins it there when none is and returns the pinned one ("" when it cannot tell, which
  /// refuses); `get()` returns it ("" while none is, nullopt when it cannot tell, which
  /// refuses too). Both may block (bounded). A read that failed is not tried again for
  /// `retry_after`: meanwhile requests are refused at once.
  void use_shared(std::function<std::string(std::string_view)> pin,
                  std::function<std::optional<std::string>()> get,
                  std::chrono::milliseconds retry_after = std::chrono::seconds{1}) {
    std::lock_guard guard{mtx_};
    shared_pin_ = std::move(pin);
    shared_get_ = std::move(get);
    retry_after_ = retry_after;
  }

  /// The pinned instance as held here, "" while none is (never waits).
  std::string get() const {
    std::lock_guard guard{mtx_};
    return value_;
  }

  /// True when check() can tell without reading the cluster's pin (one is held here, or
  /// there is no cluster).
  bool settled() const {
    std::lock_guard guard{mtx_};
    return !value_.empty() || !shared_get_;
  }

  /// Whether `id` may act, from what is held here (never waits): admitted when it is the
  /// pinned instance or, without a cluster, when nothing is pinned yet; unknown while a
  /// cluster's pin has not been read; refused while a read of it failed recently.
  verdict check(std::string_view id) const {
    std::lock_guard guard{mtx_};
    return check_locked(id, std::chrono::steady_clock::now());
  }

  /// check() after reading the cluster's pin when needed: admit or refuse, never unknown
  /// (a pin that cannot be read refuses). May block (bounded): call on the worker pool.
  /// One read at a time; the others then answer from what it read.
  verdict settle(std::string_view id) {
    std::lock_guard reading{read_mtx_};
    std::function<std::optional<std::string>()> read;
    {
      std::lock_guard guard{mtx_};
      auto v = check_locked(id, std::chrono::steady_clock::now());
      if (v != verdict::unknown)
        return v;
      read = shared_get_;
    }
    auto shared = read();
    std::lock_guard guard{mtx_};
    if (!shared) {
      failed_at_ = std::chrono::steady_clock::now();
      return verdict::refuse;
    }
    failed_at_.reset();
    if (!value_.empty() || shared->empty())
      // Nothing pinned anywhere yet: any instance may act (the first handshake pins).
      return value_.empty() || equal(value_, id) ? verdict::admit : verdict::refuse;
    value_ = *shared; // kept: a cluster's pin never changes once set
    return equal(value_, id) ? verdict::admit : verdict::refuse;
  }

  /// Pins `id` when nothing is pinned; true when `id` is (now) the pinned instance. On a
  /// cluster node with nothing pinned here it writes etcd: call it on the worker pool.
  bool pin(std::string_view id) {
    std::lock_guard reading{read_mtx_};
    std::function<std::string(std::string_view)> write;
    {
      std::lock_guard guard{mtx_};
      if (!value_.empty())
        return equal(value_, id);
      if (!shared_pin_) {
        value_ = std::string{id};
        return true;
      }
      write = shared_pin_;
    }
    auto pinned = write(id);
    std::lock_guard guard{mtx_};
    if (value_.empty())
      value_ = pinned;
    return !value_.empty() && equal(value_, id);
  }

 private:
  /// Compared in constant time: the instance id is a credential of the host.
  static bool equal(std::string_view a, std::string_view b) {
    return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
  }

  verdict check_locked(std::string_view id, std::chrono::steady_clock::time_point now) const {
    if (!value_.empty())
      return equal(value_, id) ? verdict::admit : verdict::refuse;
    if (!shared_get_)
      return verdict::admit;
    if (failed_at_ && now - *failed_at_ < retry_after_)
      return verdict::refuse;
    return verdict::unknown;
  }

  mutable std::mutex mtx_;
  /// Held across a read or write of the cluster's pin (never by check()).
  std::mutex read_mtx_;
  std::string value_;
  std::function<std::string(std::string_view)> shared_pin_;
  std::function<std::optional<std::string>()> shared_get_;
  std::chrono::milliseconds retry_after_{1000};
  std::optional<std::chrono::steady_clock::time_point> failed_at_;
};

} // namespace boxrt
