// The backend this node runs its sessions on. Chosen at start, and again by a box_init
// that names another backend while no session exists (protocol.md §4.10.1). The
// directory writes it; supervisors read it whenever they start a session or a skill
// store. It holds a backend object (descriptors, threads of this node), so it is
// node-local shared state like the worker pool, never a message. Thread-safe. Plain C++.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "backends/backend.hpp"

namespace boxrt {

/// What selecting a backend for a config gives: the backend (null when unusable), the
/// selected or requested name, and why it is unusable.
struct backend_pick {
  backend_ptr backend;
  std::string name;
  std::string reason;
};

/// Selects the backend a config names (boxd: backends/registry's select_backend). It
/// gets the current backend, which it returns when the config would select the same
/// one again (a second bwrap on the same state folder could not take its lock).
using backend_selector = std::function<backend_pick(const box_config&, const backend_ptr& current)>;

class backend_slot {
 public:
  backend_slot() = default;
  /// `backend` may be null: then `reason` says why none is usable.
  backend_slot(backend_ptr backend, std::string name, std::string reason)
    : backend_(std::move(backend)), name_(std::move(name)), reason_(std::move(reason)) {}

  /// The current backend (null when none is usable).
  backend_ptr get() const {
    std::lock_guard lock{mtx_};
    return backend_;
  }

  /// The selected or requested backend's name, and why it is unusable ("" when it is).
  std::pair<std::string, std::string> name_and_reason() const {
    std::lock_guard lock{mtx_};
    return {backend_ ? backend_->name() : name_, reason_};
  }

  void set(backend_pick pick) {
    std::lock_guard lock{mtx_};
    backend_ = std::move(pick.backend);
    name_ = std::move(pick.name);
    reason_ = std::move(pick.reason);
  }

 private:
  mutable std::mutex mtx_;
  backend_ptr backend_;
  std::string name_;
  std::string reason_;
};

} // namespace boxrt
