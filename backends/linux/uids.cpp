#include "backends/linux/uids.hpp"

#include <algorithm>
#include <fcntl.h>
#include <sys/stat.h>

#include <spdlog/spdlog.h>

#include "backends/linux/beneath.hpp"

namespace boxrt {

namespace {

/// Sessions and folders share the maps; a session key can never be a path. The ledger
/// and the cluster know a session by this key too.
std::string session_key(const std::string& session) {
  return "session:" + session;
}

/// An ended session whose uid is still held: the uid makes the key unique, since
/// session ids repeat across runs (their serial starts again), and no new session can
/// match it.
std::string stale_key(uint32_t uid, const std::string& session) {
  return "stale:" + std::to_string(uid) + ":" + session;
}

/// The session id of a stale key; "" for any other key.
std::string stale_session(const std::string& key) {
  if (!key.starts_with("stale:"))
    return {};
  auto colon = key.find(':', 6);
  return colon == std::string::npos ? std::string{} : key.substr(colon + 1);
}

/// How the ledger and the cluster name the holder of a key: a workspace's path, or
/// "session:<sid>" for a live or ended session. "" for a uid held for no one key
/// ("held:<uid>", a second row of one workspace).
std::string holder_of(const std::string& key) {
  if (key.starts_with("stale:"))
    return session_key(stale_session(key));
  if (key.starts_with("held:"))
    return {};
  return key;
}

box_error not_recorded(uint32_t uid, const box_error& e) {
  return make_box_error(ec::runtime_unavailable,
                        "Box sandbox uid " + std::to_string(uid) + " cannot be recorded: " + e.message);
}

} // namespace

uid_allocator::uid_allocator(uint32_t first, uint32_t last, std::unique_ptr<uid_ledger> ledger)
  : first_(first), last_(last), ledger_(std::move(ledger)) {
}

box_error uid_allocator::load() {
  if (!ledger_)
    return {};
  auto rows = ledger_->load();
  if (!rows)
    return rows.error();
  std::lock_guard lock{mtx_};
  for (auto& r : *rows) {
    // A uid outside the configured range is never handed out here: nothing to hold.
    if (r.uid < first_ || r.uid > last_)
      continue;
    std::string key = r.holder.starts_with("session:") ? stale_key(r.uid, r.holder.substr(8))
                      : by_key_.contains(r.holder)     ? "held:" + std::to_string(r.uid)
                                                       : r.holder;
    by_key_[key] = r.uid;
    by_uid_[r.uid] = key;
    if (r.pinned)
      pinned_.insert(r.uid);
  }
  return {};
}

box_error uid_allocator::hold(uint32_t uid, const std::string& key) {
  if (ledger_)
    if (auto e = ledger_->put(uid, holder_of(key), pinned_.contains(uid)))
      return not_recorded(uid, e);
  by_key_[key] = uid;
  by_uid_[uid] = key;
  return {};
}

bool uid_allocator::free_uid(uint32_t uid, const std::string& reservation) {
  if (ledger_)
    if (auto e = ledger_->erase(uid)) {
      spdlog::warn("sandbox uids: uid {} stays held: {}", uid, e.message);
      return false;
    }
  by_uid_.erase(uid);
  no_free_below_ = std::min(no_free_below_, uid);
  if (unreserve_)
    unreserve_(uid, reservation);
  return true;
}

void uid_allocator::scan(const std::string& dir) {
  auto root = beneath::open_root(dir, O_RDONLY | O_DIRECTORY);
  if (!root)
    return;
  bool over = false;
  auto names = beneath::list(root.get(), SIZE_MAX, over);
  if (!names)
    return;
  auto real = beneath::path_of(root.get());
  std::lock_guard lock{mtx_};
  for (const auto& n : *names) {
    struct stat st{};
    if (::fstatat(root.get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode))
      continue;
    auto key = real + "/" + n;
    if (st.st_uid < first_ || st.st_uid > last_ || by_uid_.contains(st.st_uid) || by_key_.contains(key))
      continue;
    // Unrecorded now, it is found by the next start's scan again.
    if (auto e = hold(st.st_uid, key))
      spdlog::warn("sandbox uids: {}", e.message);
  }
}

result<uint32_t> uid_allocator::take(const std::string& key) {
  if (auto it = by_key_.find(key); it != by_key_.end())
    return it->second;
  // The lowest free uid: the range stays compact and assignments are reproducible. In a
  // cluster, a uid another node reserved is skipped (and remembered as taken).
  auto exhausted = [&] {
    return make_box_error(ec::capacity_exceeded, "Box sandbox uid range " + std::to_string(first_) + "-"
                                                   + std::to_string(last_) + " is exhausted");
  };
  uint32_t uid = std::max(first_, no_free_below_);
  for (;;) {
    for (auto it = by_uid_.lower_bound(uid); it != by_uid_.end() && it->first == uid; ++it) {
      if (uid == last_)
        return exhausted();
      ++uid;
    }
    if (uid > last_ || by_uid_.contains(uid))
      return exhausted();
    if (!reserve_)
      break;
    auto held = reserve_(uid, key, key.rfind("session:", 0) == 0);
    if (held > 0)
      break;
    if (held < 0)
      return make_box_error(ec::runtime_unavailable,
                            "Box sandbox uid " + std::to_string(uid) + " cannot be reserved in the cluster now");
    by_uid_[uid] = "elsewhere:" + std::to_string(uid);
  }
  no_free_below_ = uid; // every uid below it was found in use
  if (auto e = hold(uid, key)) {
    // A workspace's reservation is kept: it names that workspace alone, which gets this
    // uid again when it asks next.
    if (unreserve_ && key.starts_with("session:"))
      unreserve_(uid, key);
    return e;
  }
  return uid;
}

result<uint32_t> uid_allocator::for_workspace(const std::string& real_path, uint32_t owner) {
  std::lock_guard lock{mtx_};
  if (auto it = by_key_.find(real_path); it != by_key_.end())
    return it->second;
  if (owner >= first_ && owner <= last_ && !by_uid_.contains(owner)
      && (!reserve_ || reserve_(owner, real_path, false) > 0)) {
    if (auto e = hold(owner, real_path))
      return e;
    return owner;
  }
  return take(real_path);
}

result<uint32_t> uid_allocator::for_session(const std::string& session) {
  std::lock_guard lock{mtx_};
  return take(session_key(session));
}

void uid_allocator::release(const std::string& session, bool tree_removed) {
  std::lock_guard lock{mtx_};
  auto key = session_key(session);
  auto it = by_key_.find(key);
  if (it == by_key_.end())
    return;
  auto uid = it->second;
  by_key_.erase(it);
  if (tree_removed && !pinned_.contains(uid) && free_uid(uid, key))
    return;
  // Files of the uid may remain (or it is pinned): held by no session, its row as it was.
  auto stale = stale_key(uid, session);
  by_key_[stale] = uid;
  by_uid_[uid] = stale;
}

box_error uid_allocator::pin(uint32_t uid) {
  std::lock_guard lock{mtx_};
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end() || pinned_.contains(uid))
    return {};
  if (ledger_)
    if (auto e = ledger_->put(uid, holder_of(it->second), true))
      return not_recorded(uid, e);
  pinned_.insert(uid);
  return {};
}

size_t uid_allocator::forget_removed_sessions(const std::function<bool(const std::string& sid)>& tree_exists) {
  std::lock_guard lock{mtx_};
  size_t freed = 0;
  for (auto it = by_key_.begin(); it != by_key_.end();) {
    auto sid = stale_session(it->first);
    auto uid = it->second;
    if (sid.empty() || pinned_.contains(uid) || tree_exists(sid) || !free_uid(uid, session_key(sid))) {
      ++it;
      continue;
    }
    it = by_key_.erase(it);
    ++freed;
  }
  return freed;
}

bool uid_allocator::is_new_workspace(const std::string& real_path, uint32_t owner) const {
  std::lock_guard lock{mtx_};
  return !by_key_.contains(real_path) && !(owner >= first_ && owner <= last_ && !by_uid_.contains(owner));
}

bool uid_allocator::give_to_workspace(const std::string& session, const std::string& real_path, uint32_t owner) {
  std::lock_guard lock{mtx_};
  if (by_key_.contains(real_path) || (owner >= first_ && owner <= last_ && !by_uid_.contains(owner)))
    return false;
  auto it = by_key_.find(session_key(session));
  if (it == by_key_.end())
    return false;
  auto uid = it->second;
  // Recorded first; when it cannot be, the normal path reports why. No warm pool runs
  // on a cluster node, so no cluster reservation changes hands here.
  if (ledger_)
    if (auto e = ledger_->put(uid, real_path, pinned_.contains(uid))) {
      spdlog::warn("sandbox uids: {}", not_recorded(uid, e).message);
      return false;
    }
  by_key_.erase(it);
  by_key_[real_path] = uid;
  by_uid_[uid] = real_path;
  return true;
}

size_t uid_allocator::assigned() const {
  std::lock_guard lock{mtx_};
  return by_key_.size();
}

std::map<uint32_t, std::string> uid_allocator::held() const {
  std::lock_guard lock{mtx_};
  std::map<uint32_t, std::string> out;
  for (auto& [uid, key] : by_uid_)
    if (!key.starts_with("elsewhere:"))
      out[uid] = holder_of(key);
  return out;
}

} // namespace boxrt
