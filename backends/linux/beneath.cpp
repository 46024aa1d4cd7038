#include "backends/linux/beneath.hpp"

#include <dirent.h>
#include <endian.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <linux/posix_acl.h>
#include <linux/posix_acl_xattr.h>
#include <sys/xattr.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <system_error>

namespace boxrt::beneath {

namespace {

/// How often a resolution is retried after the kernel saw a rename race (EAGAIN).
constexpr int resolve_retries = 64;

/// How often a removal starts again from the top after a tenant moved its folders.
constexpr int removal_restarts = 16;

int openat2_retry(int dirfd, const char* path, int flags, mode_t mode, uint64_t resolve) {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags) | O_CLOEXEC;
  how.mode = (flags & (O_CREAT | __O_TMPFILE)) != 0 ? mode : 0;
  how.resolve = resolve;
  for (int i = 0;; ++i) {
    auto fd = static_cast<int>(::syscall(SYS_openat2, dirfd, path, &how, sizeof how));
    if (fd >= 0 || errno != EAGAIN || i >= resolve_retries)
      return fd;
  }
}

uint64_t resolve_flags(links l) {
  uint64_t r = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  if (l == links::none)
    r |= RESOLVE_NO_SYMLINKS;
  return r;
}

/// Splits "a/b/c" into its non-empty components ("." dropped; ".." kept, the kernel
/// refuses it above the root).
std::vector<std::string_view> components(std::string_view rel) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (pos <= rel.size()) {
    auto end = rel.find('/', pos);
    if (end == std::string_view::npos)
      end = rel.size();
    auto part = rel.substr(pos, end - pos);
    if (!part.empty() && part != ".")
      out.push_back(part);
    pos = end + 1;
  }
  return out;
}

/// The identity of a directory: device, inode and mount.
struct ident {
  uint64_t dev = 0;
  uint64_t ino = 0;
  uint64_t mnt = 0;
  friend bool operator==(const ident&, const ident&) = default;
};

bool ident_of(int dirfd, const char* name, int flags, ident& out, mode_t* mode = nullptr) {
  struct statx sx{};
  if (::statx(dirfd, name, flags | AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_TYPE | STATX_INO | STATX_MNT_ID,
              &sx) != 0)
    return false;
  out.dev = (static_cast<uint64_t>(sx.stx_dev_major) << 32) | sx.stx_dev_minor;
  out.ino = sx.stx_ino;
  out.mnt = (sx.stx_mask & STATX_MNT_ID) != 0 ? sx.stx_mnt_id : 0;
  if (mode != nullptr)
    *mode = sx.stx_mode;
  return true;
}

/// The entry `name` of the folder `dir` (one component), resolved without following a
/// link and without crossing into another mount.
unique_fd child_of(int dir, const std::string& name, int flags) {
  return unique_fd{openat2_retry(dir, name.c_str(), flags, 0,
                                 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)};
}

/// One directory of the walk: its name in its parent and its identity.
struct level {
  std::string name;
  ident id;
};

enum class pass { done, restart, failed };

/// One walk from `top` (already open): removes entries depth-first, going back up with
/// "..", checked against the recorded identity of each parent.
/// How many times one walk looks at a folder again after an entry changed type under
/// it (a tenant swapping a folder and a link) before it gives up.
constexpr int changed_entries_budget = 256;

/// Errors of a step on an entry that a concurrent swap explains: the entry is looked at
/// again.
bool changed_meanwhile(int e) {
  return e == ENOENT || e == EISDIR || e == ENOTDIR || e == ENOTEMPTY || e == EEXIST;
}

/// Removes the non-folder entries of `dir` until it finds a subfolder (its name in
/// `child`) or none is left.
enum class scan_result { child, empty, again, failed };

scan_result scan(int dir, uint64_t top_mnt, std::string& child, removal_error& err) {
  child.clear();
  int copy = ::dup(dir);
  if (copy < 0) {
    err = {errno, "dup"};
    return scan_result::failed;
  }
  DIR* d = ::fdopendir(copy);
  if (d == nullptr) {
    ::close(copy);
    err = {errno, "opendir"};
    return scan_result::failed;
  }
  ::rewinddir(d);
  auto result = scan_result::empty;
  while (auto* e = ::readdir(d)) {
    std::string_view n{e->d_name};
    if (n == "." || n == "..")
      continue;
    ident id;
    mode_t mode = 0;
    if (!ident_of(dir, e->d_name, 0, id, &mode)) {
      if (errno == ENOENT)
        continue; // gone meanwhile
      err = {errno, "stat " + std::string{n}};
      result = scan_result::failed;
      break;
    }
    if (S_ISDIR(mode)) {
      if (id.mnt != top_mnt) {
        err = {EBUSY, std::string{n} + " is a mount point"};
        result = scan_result::failed;
        break;
      }
      child = n;
      result = scan_result::child;
      break;
    }
    if (::unlinkat(dir, e->d_name, 0) != 0 && errno != ENOENT) {
      err = {errno, "unlink " + std::string{n}};
      result = changed_meanwhile(errno) ? scan_result::again : scan_result::failed;
      break;
    }
  }
  ::closedir(d);
  return result;
}

pass walk(unique_fd cur, const ident& top_id, removal_error& err) {
  std::vector<level> stack;
  stack.push_back({{}, top_id});
  int budget = changed_entries_budget;
  // A step failed in a way a concurrent swap explains: look at the folder again.
  auto again = [&](int e, std::string what) {
    if (changed_meanwhile(e) && --budget > 0)
      return true;
    err = {e, std::move(what)};
    return false;
  };
  for (;;) {
    std::string child;
    switch (scan(cur.get(), top_id.mnt, child, err)) {
      case scan_result::failed:
        return pass::failed;
      case scan_result::again:
        if (!again(err.error, err.detail))
          return pass::failed;
        err = {};
        continue;
      case scan_result::child: {
        if (::unlinkat(cur.get(), child.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT)
          continue; // it was empty
        if (errno != ENOTEMPTY && errno != EEXIST) {
          if (!again(errno, "rmdir " + child))
            return pass::failed;
          continue;
        }
        auto sub = child_of(cur.get(), child, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
        ident id;
        if (!sub || !ident_of(sub.get(), "", AT_EMPTY_PATH, id) || id.mnt != top_id.mnt) {
          if (!again(ENOENT, "open " + child))
            return pass::failed;
          continue; // swapped for a link meanwhile
        }
        stack.push_back({child, id});
        cur = std::move(sub);
        continue;
      }
      case scan_result::empty:
        break;
    }
    if (stack.size() == 1)
      return pass::done;
    unique_fd up{::openat(cur.get(), "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
    ident up_id;
    if (!up || !ident_of(up.get(), "", AT_EMPTY_PATH, up_id) || !(up_id == stack[stack.size() - 2].id))
      return pass::restart; // moved by the tenant
    auto done = std::move(stack.back());
    stack.pop_back();
    cur = std::move(up);
    if (::unlinkat(cur.get(), done.name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT
        && !again(errno, "rmdir " + done.name))
      return pass::failed;
  }
}

removal_error remove_below(int parent, const std::string& name, bool keep_top) {
  removal_error err;
  for (int round = 0; round < removal_restarts; ++round) {
    unique_fd top;
    if (keep_top) {
      top.reset(::openat(parent, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    } else {
      ident id;
      mode_t mode = 0;
      if (!ident_of(parent, name.c_str(), 0, id, &mode))
        return errno == ENOENT ? removal_error{} : removal_error{errno, "stat " + name};
      if (!S_ISDIR(mode)) {
        if (::unlinkat(parent, name.c_str(), 0) == 0 || errno == ENOENT)
          return {};
        return {errno, "unlink " + name};
      }
      top.reset(::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    }
    ident top_id;
    if (!top || !ident_of(top.get(), "", AT_EMPTY_PATH, top_id)) {
      if (errno == ENOENT)
        return {};
      continue; // swapped between the stat and the open
    }
    switch (walk(std::move(top), top_id, err)) {
      case pass::failed:
        return err;
      case pass::restart:
        continue;
      case pass::done:
        break;
    }
    if (keep_top)
      return {};
    if (::unlinkat(parent, name.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT)
      return {};
    if (errno != ENOTEMPTY)
      return {errno, "rmdir " + name};
    // Refilled meanwhile: go again.
  }
  return {EAGAIN, "the tree kept changing while it was removed"};
}

/// A folder nobody but root (or boxd's own uid) can add entries to: a link found in it
/// was made by the operator, not by a tenant.
bool trusted_folder(int dir) {
  struct stat st{};
  if (::fstat(dir, &st) != 0)
    return false;
  return (st.st_uid == 0 || st.st_uid == ::geteuid()) && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

/// Maximum number of links one trusted walk follows (the kernel's own limit).
constexpr int max_link_hops = 40;

unique_fd walk_trusted(const std::string& path, int flags, bool create, mode_t mode) {
  if (path.empty() || path.front() != '/') {
    errno = EINVAL;
    return unique_fd{};
  }
  unique_fd cur{::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)};
  std::deque<std::string> pending;
  for (auto part : components(path)) {
    // ".." of the path itself would be walked physically while policy checks judged
    // the path lexically; a host path never needs one.
    if (part == "..") {
      errno = EINVAL;
      return unique_fd{};
    }
    pending.emplace_back(part);
  }
  int hops = 0;
  bool opened_as_asked = false;
  while (!pending.empty()) {
    opened_as_asked = false;
    auto name = std::move(pending.front());
    pending.pop_front();
    if (name == "..") {
      // Only in a trusted link's target, and only up from a folder no tenant can move.
      if (!trusted_folder(cur.get())) {
        errno = ELOOP;
        return unique_fd{};
      }
      unique_fd up{::openat(cur.get(), "..", O_PATH | O_DIRECTORY | O_CLOEXEC)};
      if (!up)
        return up;
      cur = std::move(up);
      continue;
    }
    struct stat st{};
    if (::fstatat(cur.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT || !create)
        return unique_fd{};
      if (::mkdirat(cur.get(), name.c_str(), mode) != 0 && errno != EEXIST)
        return unique_fd{};
      if (::fstatat(cur.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
        return unique_fd{};
    }
    if (S_ISLNK(st.st_mode)) {
      if (!trusted_folder(cur.get()) || ++hops > max_link_hops) {
        errno = ELOOP;
        return unique_fd{};
      }
      std::string target(4096, '\0');
      auto n = ::readlinkat(cur.get(), name.c_str(), target.data(), target.size());
      if (n < 0 || static_cast<size_t>(n) >= target.size()) {
        errno = n < 0 ? errno : ENAMETOOLONG;
        return unique_fd{};
      }
      target.resize(static_cast<size_t>(n));
      if (target.starts_with("/")) {
        unique_fd top{::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)};
        cur = std::move(top);
      }
      auto parts = components(target);
      for (auto it = parts.rbegin(); it != parts.rend(); ++it)
        pending.emplace_front(*it);
      continue;
    }
    const bool last = pending.empty();
    // O_NOFOLLOW: an entry swapped for a link since the fstatat is not followed.
    int how = last ? flags : O_PATH | O_DIRECTORY;
    unique_fd next{::openat(cur.get(), name.c_str(), how | O_NOFOLLOW | O_CLOEXEC)};
    if (!next)
      return next;
    if ((how & O_PATH) != 0) {
      struct stat now{};
      if (::fstat(next.get(), &now) != 0 || S_ISLNK(now.st_mode)) {
        errno = ELOOP;
        return unique_fd{};
      }
    }
    cur = std::move(next);
    opened_as_asked = last;
  }
  if (!opened_as_asked) {
    // The path ended at "/" or in "..": reopen that folder with the caller's flags.
    unique_fd again{::openat(cur.get(), ".", flags | O_CLOEXEC)};
    return again;
  }
  return cur;
}

} // namespace

unique_fd open_trusted(const std::string& path, int flags) {
  return walk_trusted(path, flags, false, 0);
}

unique_fd make_dirs_trusted(const std::string& path, mode_t mode) {
  return walk_trusted(path, O_PATH | O_DIRECTORY, true, mode);
}

unique_fd open_root(const std::string& path, int flags) {
  return open_trusted(path, flags);
}

namespace {

/// "/proc/self/fd/N": the path-taking calls that have no descriptor form (xattrs and
/// chmod on an O_PATH descriptor) reach exactly the open file through it.
std::string fd_path(int fd) {
  return "/proc/self/fd/" + std::to_string(fd);
}

void put_entry(std::string& out, uint16_t tag, uint16_t perm, uint32_t id) {
  posix_acl_xattr_entry e{};
  e.e_tag = htole16(tag);
  e.e_perm = htole16(perm);
  e.e_id = htole32(id);
  out.append(reinterpret_cast<const char*>(&e), sizeof e);
}

/// An ACL in the kernel's xattr form: owner, owning group, `gid`, mask, others (the
/// order the kernel requires).
std::string acl_of(uint16_t user, uint16_t group, uint32_t gid, uint16_t named, uint16_t other) {
  std::string out;
  posix_acl_xattr_header h{};
  h.a_version = htole32(POSIX_ACL_XATTR_VERSION);
  out.append(reinterpret_cast<const char*>(&h), sizeof h);
  constexpr uint32_t undefined = static_cast<uint32_t>(ACL_UNDEFINED_ID);
  put_entry(out, ACL_USER_OBJ, user, undefined);
  put_entry(out, ACL_GROUP_OBJ, group, undefined);
  put_entry(out, ACL_GROUP, named, gid);
  put_entry(out, ACL_MASK, static_cast<uint16_t>(group | named), undefined);
  put_entry(out, ACL_OTHER, other, undefined);
  return out;
}

} // namespace

int grant_group(int fd, uint32_t gid, bool close_others) {
  struct stat st{};
  if (::fstat(fd, &st) != 0)
    return errno;
  if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
    return 0; // links, FIFOs, sockets: nothing to read or write through
  const bool dir = S_ISDIR(st.st_mode);
  auto path = fd_path(fd);
  if (close_others && ::chmod(path.c_str(), st.st_mode & 07770) != 0)
    return errno;
  const auto user = static_cast<uint16_t>((st.st_mode >> 6) & 7);
  const auto group = static_cast<uint16_t>((st.st_mode >> 3) & 7);
  const auto other = static_cast<uint16_t>(close_others ? 0 : st.st_mode & 7);
  const uint16_t named = dir ? 7 : 6;
  auto access = acl_of(user, group, gid, named, other);
  if (::setxattr(path.c_str(), "system.posix_acl_access", access.data(), access.size(), 0) != 0)
    return errno;
  if (dir) {
    // What the tenant creates inside is the host group's too, and closed to others.
    auto inherited = acl_of(7, 7, gid, 7, 0);
    if (::setxattr(path.c_str(), "system.posix_acl_default", inherited.data(), inherited.size(), 0) != 0)
      return errno;
  }
  return 0;
}

int hand_over(int dir, uint32_t uid, uint32_t gid, int64_t host_gid) {
  struct frame {
    std::string name;
    ident id;
    std::vector<std::string> names;
    size_t next = 0;
  };
  for (int round = 0; round < removal_restarts; ++round) {
    unique_fd cur{::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
    ident top;
    if (!cur || !ident_of(cur.get(), "", AT_EMPTY_PATH, top))
      return errno;
    std::vector<frame> stack;
    bool over = false;
    auto names = list(cur.get(), SIZE_MAX, over);
    if (!names)
      return errno;
    stack.push_back({{}, top, std::move(*names), 0});
    bool restart = false;
    while (!stack.empty() && !restart) {
      auto& f = stack.back();
      if (f.next == f.names.size()) {
        if (stack.size() == 1) {
          // The top last: its owner is the record that the hand-over is complete.
          if (host_gid >= 0)
            if (int e = grant_group(cur.get(), static_cast<uint32_t>(host_gid), true); e != 0)
              return e;
          return ::fchown(cur.get(), uid, gid) == 0 ? 0 : errno;
        }
        unique_fd up{::openat(cur.get(), "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
        ident up_id;
        stack.pop_back();
        if (!up || !ident_of(up.get(), "", AT_EMPTY_PATH, up_id) || !(up_id == stack.back().id)) {
          restart = true;
          break;
        }
        cur = std::move(up);
        continue;
      }
      const auto name = f.names[f.next++];
      // The entry itself, opened once and worked on through that descriptor: never
      // what a link points to, never the root of another mount (a tenant may swap a
      // folder for a mount point of boxd's namespace; RESOLVE_NO_XDEV refuses it), and
      // exactly what was checked.
      auto entry = child_of(cur.get(), name, O_PATH | O_NOFOLLOW);
      ident id;
      mode_t mode = 0;
      if (!entry || !ident_of(entry.get(), "", AT_EMPTY_PATH, id, &mode) || id.mnt != top.mnt)
        continue; // gone, swapped for a mount point, or unreadable: nothing to hand over
      if (::fchownat(entry.get(), "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0 && errno != ENOENT)
        return errno;
      if (host_gid >= 0 && (S_ISREG(mode) || S_ISDIR(mode)))
        if (int e = grant_group(entry.get(), static_cast<uint32_t>(host_gid), false); e != 0 && e != ENOENT)
          return e;
      if (!S_ISDIR(mode))
        continue;
      unique_fd sub{::openat(entry.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
      ident sub_id;
      if (!sub || !ident_of(sub.get(), "", AT_EMPTY_PATH, sub_id) || !(sub_id == id))
        continue;
      auto below = list(sub.get(), SIZE_MAX, over);
      if (!below)
        continue;
      stack.push_back({name, sub_id, std::move(*below), 0});
      cur = std::move(sub);
    }
  }
  return EAGAIN;
}

unique_fd open(int root, std::string_view rel, int flags, links l, mode_t mode) {
  std::string path{rel};
  if (path.empty())
    path = ".";
  return unique_fd{openat2_retry(root, path.c_str(), flags, mode, resolve_flags(l))};
}

bool stat(int root, std::string_view rel, links l, struct stat& st) {
  // O_PATH opens the entry itself (a symlink too, with O_NOFOLLOW) without reading it.
  int flags = O_PATH;
  if (l == links::none)
    flags |= O_NOFOLLOW;
  auto fd = open(root, rel, flags, l);
  if (!fd) {
    // A trailing symlink under links::none: report the link itself, as lstat does.
    return false;
  }
  return ::fstat(fd.get(), &st) == 0;
}

int make_dirs(int root, std::string_view rel, mode_t mode, links l) {
  auto parts = components(rel);
  std::string prefix;
  unique_fd parent{::dup(root)};
  if (!parent)
    return errno;
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string name{parts[i]};
    if (name == "..")
      return EXDEV;
    if (::mkdirat(parent.get(), name.c_str(), mode) != 0 && errno != EEXIST)
      return errno;
    prefix += (prefix.empty() ? "" : "/") + name;
    // Resolve the whole prefix beneath the root again: a component swapped for a link
    // meanwhile is followed only as `l` allows.
    auto next = open(root, prefix, O_PATH | O_DIRECTORY, l);
    if (!next)
      return errno == ENOTDIR ? EEXIST : errno;
    parent = std::move(next);
  }
  return 0;
}

std::optional<std::vector<std::string>> list(int dir, size_t limit, bool& over_limit) {
  over_limit = false;
  int copy = ::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (copy < 0)
    return std::nullopt;
  DIR* d = ::fdopendir(copy);
  if (d == nullptr) {
    int e = errno;
    ::close(copy);
    errno = e;
    return std::nullopt;
  }
  std::vector<std::string> names;
  while (auto* ent = ::readdir(d)) {
    std::string_view n = ent->d_name;
    if (n == "." || n == "..")
      continue;
    if (names.size() >= limit) {
      over_limit = true;
      break;
    }
    names.emplace_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

removal_error remove_tree(int parent, const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos)
    return {EINVAL, "not one entry: " + name};
  return remove_below(parent, name, false);
}

removal_error remove_contents(int dir) {
  return remove_below(dir, ".", true);
}

std::string path_of(int fd) {
  std::string link = "/proc/self/fd/" + std::to_string(fd);
  std::string buf(4096, '\0');
  for (;;) {
    auto n = ::readlink(link.c_str(), buf.data(), buf.size());
    if (n < 0)
      return {};
    if (static_cast<size_t>(n) < buf.size()) {
      buf.resize(static_cast<size_t>(n));
      return buf;
    }
    buf.resize(buf.size() * 2);
  }
}

std::string os_error_text(int err, const std::string& path) {
  return "[Errno " + std::to_string(err) + "] " + std::system_category().message(err) + ": '" + path + "'";
}

std::optional<std::string> read_limited(int fd, uint64_t limit, bool& too_big) {
  too_big = false;
  std::string data;
  char buf[65536];
  for (;;) {
    auto n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return std::nullopt;
    if (n == 0)
      break;
    data.append(buf, static_cast<size_t>(n));
    if (data.size() > limit) {
      too_big = true;
      break;
    }
  }
  return data;
}

} // namespace boxrt::beneath
