// Host uids of sandboxes (contract §4.7). Each workspace's commands run as a uid of its
// own from a configured range. The record is the uid ledger (<state>/uids.sqlite),
// written before a uid is handed out; a uid goes to no other workspace while a tree boxd
// handed to it may exist, and a full range is refused. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "backends/state/uid_ledger.hpp"
#include "messages/error.hpp"

namespace boxrt {

class uid_allocator {
 public:
  /// Hands out uids in [first, last] (inclusive), each recorded in `ledger` before it
  /// is returned. Without a ledger (unit tests) nothing outlives the allocator.
  uid_allocator(uint32_t first, uint32_t last, std::unique_ptr<uid_ledger> ledger = {});

  uint32_t first() const { return first_; }
  uint32_t last() const { return last_; }

  /// Takes the ledger's rows in the range: a workspace's is held for its folder again; a
  /// session's by a key no new session matches (session ids repeat across runs), until
  /// forget_removed_sessions finds its tree gone. Call once, before any assignment.
  box_error load();

  /// Seeds assignments of earlier versions, which kept no ledger: each subfolder of
  /// `dir` (a tenants folder) owned by a uid in the range that nothing holds keeps it,
  /// recorded in the ledger from now on.
  void scan(const std::string& dir);

  /// The uid of the workspace whose own folder is `real_path`, owned now by `owner`: that
  /// owner when it is in range and no other workspace holds it, else the lowest free
  /// uid (the caller then hands the folder over). BoxCapacityExceededError when none is free.
  result<uint32_t> for_workspace(const std::string& real_path, uint32_t owner);

  /// A uid for a session without a folder of its own, held until release().
  result<uint32_t> for_session(const std::string& session);

  /// The session has ended. Its uid is free again only when `tree_removed` (its private
  /// tree under the state folder is gone) and it is not pinned; else it stays held, by
  /// no session, until forget_removed_sessions.
  void release(const std::string& session, bool tree_removed);

  /// The uid will own a tree boxd never removes (a host folder a session mounts
  /// writable): it is never freed. Recorded before it returns; the error when it cannot be.
  box_error pin(uint32_t uid);

  /// Frees the uids of ended sessions (earlier runs' among them) that are not pinned and
  /// whose tree is gone: `tree_exists(sid)` answers for `<state>/sessions/<sid>`. Returns
  /// how many were freed.
  size_t forget_removed_sessions(const std::function<bool(const std::string& sid)>& tree_exists);

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
  /// remembered). `unreserve` gives a session's back once its uid is free here (see
  /// release). Set before any use.
  void use_reservations(std::function<int(uint32_t, const std::string&, bool)> reserve,
                        std::function<void(uint32_t, const std::string&)> unreserve) {
    reserve_ = std::move(reserve);
    unreserve_ = std::move(unreserve);
  }

  /// The workspace folders and sessions (ended ones whose uid is still held among them)
  /// that hold a uid now.
  size_t assigned() const;

  /// Every uid held here, with its cluster reservation key (a workspace's real path or
  /// "session:<sid>"): what a cluster node keeps reserved (backends/cluster/node.hpp).
  std::map<uint32_t, std::string> held() const;

 private:
  result<uint32_t> take(const std::string& key);
  /// Holds `uid` for `key` in memory, after writing it to the ledger; the error (and no
  /// change) when the write fails.
  box_error hold(uint32_t uid, const std::string& key);
  /// Frees `uid` (its ledger row first) and gives back its cluster reservation of
  /// `reservation`. False, still held, when the row cannot be erased.
  bool free_uid(uint32_t uid, const std::string& reservation);

  uint32_t first_;
  uint32_t last_;
  std::function<int(uint32_t, const std::string&, bool)> reserve_;
  std::function<void(uint32_t, const std::string&)> unreserve_;
  mutable std::mutex mtx_;
  std::unique_ptr<uid_ledger> ledger_;
  std::map<std::string, uint32_t> by_key_;
  std::map<uint32_t, std::string> by_uid_;
  std::set<uint32_t> pinned_;
  /// No uid below this one is free: where the search for the lowest free uid starts, so
  /// a start does not walk every uid in use (lowered when one is freed).
  uint32_t no_free_below_ = 0;
};

} // namespace boxrt
