// The directory's instance settings as of its last change, published for the connection
// actors: they read the config and readiness without a request to the directory. The
// directory is the only writer; a reader gets an immutable copy.
#pragma once

#include <memory>
#include <mutex>

#include "messages/requests.hpp"

namespace boxrt {

class settings_snapshot {
 public:
  /// The settings of the directory's last change; null before its first readiness probe
  /// finished (readers then ask the directory, which answers once it has).
  std::shared_ptr<const instance_settings> get() const {
    std::lock_guard lock{mtx_};
    return value_;
  }

  /// Publishes `s` (the directory, after every change of its settings).
  void set(const instance_settings& s) {
    auto next = std::make_shared<const instance_settings>(s);
    std::lock_guard lock{mtx_};
    value_ = std::move(next);
  }

 private:
  mutable std::mutex mtx_;
  std::shared_ptr<const instance_settings> value_;
};

} // namespace boxrt
