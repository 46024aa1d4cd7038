// Host uids of sandboxes (contract §4.7). Each workspace's commands run as a uid of its
// own from a configured range. The record is the owner of the workspace's own folder
// (or of its quota image's root), so a scan at start finds every assignment again; no
// uid is ever shared by two workspaces and a full range is refused. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "messages/error.hpp"

namespace boxrt {

class uid_allocator {
 public:
  /// Hands out uids in [first, last] (inclusive).
  uid_allocator(uint32_t first, uint32_t last);

  uint32_t first() const { return first_; }
  uint32_t last() const { return last_; }

  /// Records the owners of the subfolders of `dir` (a tenants folder): each folder
  /// owned by a uid in the range keeps it, unless an earlier folder holds it already.
  void scan(const std::string& dir);

  /// The uid of the workspace whose own folder is `real_path`, owned now by `owner`: that
  /// owner when it is in range and no other workspace holds it, else the lowest free
  /// uid (the caller then hands the folder over). BoxCapacityExceededError when none is free.
  result<uint32_t> for_workspace(const std::string& real_path, uint32_t owner);

  /// A uid for a session without a folder of its own, held until release().
  result<uint32_t> for_session(const std::string& session);
  void release(const std::string& session);

  /// Gives the uid `session` holds to the new workspace whose own folder is `real_path`
  /// (owned now by `owner`): a warm sandbox adopted by a first use. False, changing
  /// nothing, when that workspace has a uid already (recorded, or `owner` is one
  /// for_workspace would keep) or the session holds none; then the normal path applies.
  bool give_to_workspace(const std::string& session, const std::string& real_path, uint32_t owner);

  /// True when for_workspace would hand the workspace a uid it does not have yet.
  bool is_new_workspace(const std::string& real_path, uint32_t owner) const;


  /// A cluster node (docs/cluster.md): a uid is handed out only when `reserve(uid, key,
  /// session)` also reserves it cluster-wide for that key (a workspace's real path, or
  /// "session:<id>"): 1 reserved, 0 held for another key (skipped, and remembered), -1
  /// cannot tell now (etcd unreachable, no lease: this allocation fails, nothing is
  /// remembered). `unreserve` gives a session's back. Set before any use.
  void use_reservations(std::function<int(uint32_t, const std::string&, bool)> reserve,
                        std::function<void(uint32_t, const std::string&)> unreserve) {
    reserve_ = std::move(reserve);
    unreserve_ = std::move(unreserve);
  }

  /// The workspace folders and sessions that hold a uid now.
  size_t assigned() const;

 private:
  result<uint32_t> take(const std::string& key);

  uint32_t first_;
  uint32_t last_;
  std::function<int(uint32_t, const std::string&, bool)> reserve_;
  std::function<void(uint32_t, const std::string&)> unreserve_;
  mutable std::mutex mtx_;
  std::map<std::string, uint32_t> by_key_;
  std::map<uint32_t, std::string> by_uid_;
};

} // namespace boxrt
