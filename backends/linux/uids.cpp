#include "backends/linux/uids.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include "backends/linux/beneath.hpp"

namespace boxrt {

namespace {

/// Sessions and folders share the maps; a session key can never be a path.
std::string session_key(const std::string& session) {
  return "session:" + session;
}

} // namespace

uid_allocator::uid_allocator(uint32_t first, uint32_t last) : first_(first), last_(last) {
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
    if (st.st_uid < first_ || st.st_uid > last_ || by_uid_.contains(st.st_uid))
      continue;
    auto key = real + "/" + n;
    by_key_[key] = st.st_uid;
    by_uid_[st.st_uid] = key;
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
  uint32_t uid = first_;
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
  by_key_[key] = uid;
  by_uid_[uid] = key;
  return uid;
}

result<uint32_t> uid_allocator::for_workspace(const std::string& real_path, uint32_t owner) {
  std::lock_guard lock{mtx_};
  if (auto it = by_key_.find(real_path); it != by_key_.end())
    return it->second;
  if (owner >= first_ && owner <= last_ && !by_uid_.contains(owner)
      && (!reserve_ || reserve_(owner, real_path, false) > 0)) {
    by_key_[real_path] = owner;
    by_uid_[owner] = real_path;
    return owner;
  }
  return take(real_path);
}

result<uint32_t> uid_allocator::for_session(const std::string& session) {
  std::lock_guard lock{mtx_};
  return take(session_key(session));
}

void uid_allocator::release(const std::string& session) {
  std::lock_guard lock{mtx_};
  auto it = by_key_.find(session_key(session));
  if (it == by_key_.end())
    return;
  if (unreserve_)
    unreserve_(it->second, it->first);
  by_uid_.erase(it->second);
  by_key_.erase(it);
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
  by_key_.erase(it);
  by_key_[real_path] = uid;
  by_uid_[uid] = real_path;
  return true;
}

size_t uid_allocator::assigned() const {
  std::lock_guard lock{mtx_};
  return by_key_.size();
}

} // namespace boxrt
