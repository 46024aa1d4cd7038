// The managed processes alive in this boxd, by (physical session id, process id): the
// session actors that own them register them here, and the stdio relay (net/) finds
// them here. It holds process handles (descriptors of this node), so it is node-local
// shared state like the worker pool, never a message. Thread-safe. Plain C++.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "backends/backend.hpp"

namespace boxrt {

class process_registry {
 public:
  struct entry {
    std::shared_ptr<managed_process> process;
    /// The session was retired by a fence advance: a relay closes as stale. Written by
    /// the owning session actor before the processes are killed, read by the relay
    /// before each chunk it forwards. (Which relay holds the stdio is the session
    /// actor's to know: see its attach_atom.)
    std::atomic<bool> stale{false};
  };

  /// Registers (or replaces) the process `pid` of session `session`.
  std::shared_ptr<entry> put(const std::string& session, const std::string& pid,
                             std::shared_ptr<managed_process> process) {
    auto e = std::make_shared<entry>();
    e->process = std::move(process);
    std::lock_guard lock{mtx_};
    map_[{session, pid}] = e;
    return e;
  }

  void remove(const std::string& session, const std::string& pid) {
    std::lock_guard lock{mtx_};
    map_.erase({session, pid});
  }

  std::shared_ptr<entry> find(const std::string& session, const std::string& pid) const {
    std::lock_guard lock{mtx_};
    auto i = map_.find({session, pid});
    return i == map_.end() ? nullptr : i->second;
  }

  /// Starts in flight in every session (counted by the global cap with running()).
  void begin_start() { ++starting_; }
  void end_start() { --starting_; }
  size_t starting() const { return starting_.load(); }

  /// Running processes in every session (the global max_managed_processes cap).
  size_t running() const {
    std::lock_guard lock{mtx_};
    size_t n = 0;
    for (auto& [key, e] : map_)
      n += e->process && !e->process->exit_code() ? 1 : 0;
    return n;
  }

 private:
  std::atomic<size_t> starting_{0};
  mutable std::mutex mtx_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<entry>> map_;
};

} // namespace boxrt
