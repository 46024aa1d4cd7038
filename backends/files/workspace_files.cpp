#include "backends/files/workspace_files.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <deque>
#include <vector>

#include "backends/linux/beneath.hpp"
#include "messages/base/base64.hpp"
#include "messages/base/json.hpp"
#include "messages/base/unique_fd.hpp"

namespace boxrt::files {

namespace {

/// The calling thread's file-system identity, switched to a workspace's for the guard's
/// life. The raw system calls change this thread only (glibc's setgroups would change
/// every thread of boxd). A switch from fsuid 0 clears the file capabilities (the kernel
/// does so itself), so permissions hold for the host as for the tenant.
class as_identity {
 public:
  as_identity(int64_t uid, int64_t gid) {
    if (uid < 0)
      return;
    int n = ::getgroups(0, nullptr);
    if (n > 0) {
      groups_.resize(static_cast<size_t>(n));
      n = ::getgroups(n, groups_.data());
      groups_.resize(n > 0 ? static_cast<size_t>(n) : 0);
    }
    old_gid_ = static_cast<gid_t>(::syscall(SYS_setfsgid, -1));
    old_uid_ = static_cast<uid_t>(::syscall(SYS_setfsuid, -1));
    auto g = static_cast<gid_t>(gid);
    ok_ = ::syscall(SYS_setgroups, 1, &g) == 0;
    ::syscall(SYS_setfsgid, g);
    ::syscall(SYS_setfsuid, static_cast<uid_t>(uid));
    // setfsuid answers the previous value whatever happened: ask again.
    ok_ = ok_ && static_cast<int64_t>(::syscall(SYS_setfsuid, -1)) == uid
          && static_cast<int64_t>(::syscall(SYS_setfsgid, -1)) == gid;
    switched_ = true;
  }
  ~as_identity() {
    if (!switched_)
      return;
    ::syscall(SYS_setfsuid, old_uid_);
    ::syscall(SYS_setfsgid, old_gid_);
    ::syscall(SYS_setgroups, groups_.size(), groups_.data());
  }
  as_identity(const as_identity&) = delete;
  as_identity& operator=(const as_identity&) = delete;
  bool ok() const { return !switched_ || ok_; }

 private:
  bool switched_ = false;
  bool ok_ = false;
  uid_t old_uid_ = 0;
  gid_t old_gid_ = 0;
  std::vector<gid_t> groups_;
};

struct context {
  const workspace& ws;
  const limits& lim;

  std::string shown(const std::string& rel) const {
    if (rel.empty())
      return ws.shown;
    return (ws.shown == "/" ? std::string{} : ws.shown) + "/" + rel;
  }
  /// The file system's refusal of `rel`.
  box_error os_error(int err, const std::string& rel) const {
    if (err == EXDEV)
      return {ec::validation, "path " + shown(rel) + " leads outside the workspace"};
    return {ec::box_error, beneath::os_error_text(err, shown(rel))};
  }
  box_error read_only(const std::string& rel) const { return os_error(EROFS, rel); }
};

/// "dir/name" split at its last slash ("" for the root's own entries).
std::pair<std::string, std::string> split(const std::string& rel) {
  auto slash = rel.rfind('/');
  if (slash == std::string::npos)
    return {std::string{}, rel};
  return {rel.substr(0, slash), rel.substr(slash + 1)};
}

std::string type_of(mode_t m) {
  if (S_ISREG(m))
    return "file";
  if (S_ISDIR(m))
    return "dir";
  if (S_ISLNK(m))
    return "symlink";
  return "other";
}

/// The entry `name` of the open folder `dir`, as lstat sees it.
bool entry_of(int dir, const std::string& name, const std::string& shown_path, file_entry& out) {
  struct stat st{};
  if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return false;
  out.path = shown_path;
  out.type = type_of(st.st_mode);
  out.size = st.st_size;
  out.mode = static_cast<int32_t>(st.st_mode & 07777);
  out.mtime = static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) / 1e9;
  if (S_ISLNK(st.st_mode)) {
    std::string buf(4096, '\0');
    auto n = ::readlinkat(dir, name.c_str(), buf.data(), buf.size());
    if (n > 0)
      out.target.assign(buf.data(), static_cast<size_t>(n));
  }
  return true;
}

/// The parent folder of `rel`, opened beneath the root (links inside followed).
unique_fd parent_of(const context& c, const std::string& rel, std::string& name) {
  auto [dir, base] = split(rel);
  name = base;
  return beneath::open(c.ws.root, dir, O_PATH | O_DIRECTORY, beneath::links::inside);
}

result<file_result> do_read(const context& c, const file_op& op) {
  if (op.offset < 0)
    return box_error{ec::validation, "offset must not be negative"};
  if (op.length > c.lim.max_call_bytes)
    return box_error{ec::validation, "length " + std::to_string(op.length) + " is more than one call may read ("
                                       + std::to_string(c.lim.max_call_bytes) + " bytes, server.max_file_call_bytes)"};
  auto fd = beneath::open(c.ws.root, op.path, O_RDONLY | O_NOCTTY | O_NONBLOCK, beneath::links::inside);
  if (!fd)
    return c.os_error(errno, op.path);
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0)
    return c.os_error(errno, op.path);
  if (S_ISDIR(st.st_mode))
    return c.os_error(EISDIR, op.path);
  if (!S_ISREG(st.st_mode))
    return box_error{ec::validation, c.shown(op.path) + " is not a regular file"};
  file_result r;
  r.size = st.st_size;
  int64_t want = op.length < 0 ? std::max<int64_t>(0, std::min<int64_t>(st.st_size - op.offset, c.lim.max_call_bytes))
                               : op.length;
  r.data.resize(static_cast<size_t>(want));
  int64_t got = 0;
  while (got < want) {
    auto n = ::pread(fd.get(), r.data.data() + got, static_cast<size_t>(want - got), op.offset + got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return c.os_error(errno, op.path);
    if (n == 0)
      break;
    got += n;
  }
  r.data.resize(static_cast<size_t>(got));
  // The size now: the file may have grown or shrunk while it was read.
  if (::fstat(fd.get(), &st) == 0)
    r.size = st.st_size;
  r.eof = op.offset + got >= r.size;
  return r;
}

/// Writes all of `data` at `offset` (-1: at the end, the descriptor being O_APPEND).
int write_at(int fd, const std::string& data, int64_t offset) {
  size_t done = 0;
  while (done < data.size()) {
    auto n = offset < 0 ? ::write(fd, data.data() + done, data.size() - done)
                        : ::pwrite(fd, data.data() + done, data.size() - done, offset + static_cast<int64_t>(done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return errno;
    done += static_cast<size_t>(n);
  }
  return 0;
}

result<file_result> do_write(const context& c, const file_op& op) {
  if (op.path.empty())
    return c.os_error(EISDIR, op.path);
  if (c.ws.read_only)
    return c.read_only(op.path);
  if (op.offset < 0)
    return box_error{ec::validation, "offset must not be negative"};
  if (static_cast<int64_t>(op.content.size()) > c.lim.max_call_bytes)
    return write_too_large(static_cast<int64_t>(op.content.size()), c.lim.max_call_bytes);
  if (op.mode > 07777)
    return box_error{ec::validation, "mode must be between 0 and 0o7777"};
  if (op.make_parents) {
    auto [dir, base] = split(op.path);
    if (!dir.empty())
      if (int err = beneath::make_dirs(c.ws.root, dir, 0755, beneath::links::inside))
        return c.os_error(err == EEXIST ? ENOTDIR : err, dir);
  }
  std::string name;
  auto parent = parent_of(c, op.path, name);
  if (!parent)
    return c.os_error(errno, split(op.path).first);
  struct stat existing{};
  const bool exists = ::fstatat(parent.get(), name.c_str(), &existing, AT_SYMLINK_NOFOLLOW) == 0;
  if (exists && S_ISDIR(existing.st_mode))
    return c.os_error(EISDIR, op.path);
  file_result r;
  // A whole file (from offset 0, cut where the write ends) is written under a temporary
  // name and renamed over the target: a write that fails (ENOSPC) leaves the target as
  // it was, never a partial file under its name. A symlink there is replaced, not
  // followed.
  if (!op.append && op.offset == 0 && (op.truncate || !exists)) {
    mode_t mode = op.mode >= 0 ? static_cast<mode_t>(op.mode)
                  : exists && S_ISREG(existing.st_mode) ? (existing.st_mode & 07777) : 0644;
    std::string tmp;
    unique_fd fd;
    for (int i = 0; i < 100 && !fd; ++i) {
      char buf[64];
      std::snprintf(buf, sizeof buf, ".boxrt-write-%d-%ld-%d", ::getpid(), static_cast<long>(::syscall(SYS_gettid)), i);
      tmp = buf;
      fd.reset(::openat(parent.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
      if (!fd && errno != EEXIST)
        return c.os_error(errno, op.path);
    }
    if (!fd)
      return c.os_error(EEXIST, op.path);
    int err = write_at(fd.get(), op.content, 0);
    if (!err && ::fchmod(fd.get(), mode) != 0)
      err = errno;
    if (!err && ::renameat(parent.get(), tmp.c_str(), parent.get(), name.c_str()) != 0)
      err = errno;
    if (err) {
      ::unlinkat(parent.get(), tmp.c_str(), 0);
      return c.os_error(err, op.path);
    }
    r.written = static_cast<int64_t>(op.content.size());
    r.size = r.written;
    return r;
  }
  // A ranged write or an append works in place on the file (a symlink inside the
  // workspace is followed, as a command's write would).
  int flags = O_WRONLY | O_CREAT | O_NOCTTY | O_NONBLOCK | (op.append ? O_APPEND : 0);
  auto fd = beneath::open(c.ws.root, op.path, flags, beneath::links::inside,
                          op.mode >= 0 ? static_cast<mode_t>(op.mode) : 0644);
  if (!fd)
    return c.os_error(errno, op.path);
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0)
    return c.os_error(errno, op.path);
  if (!S_ISREG(st.st_mode))
    return box_error{ec::validation, c.shown(op.path) + " is not a regular file"};
  if (int err = write_at(fd.get(), op.content, op.append ? -1 : op.offset))
    return c.os_error(err, op.path);
  if (op.truncate && !op.append
      && ::ftruncate(fd.get(), op.offset + static_cast<int64_t>(op.content.size())) != 0)
    return c.os_error(errno, op.path);
  r.written = static_cast<int64_t>(op.content.size());
  if (::fstat(fd.get(), &st) == 0)
    r.size = st.st_size;
  return r;
}

result<file_result> do_stat(const context& c, const file_op& op) {
  file_result r;
  file_entry e;
  if (op.path.empty()) {
    if (!entry_of(c.ws.root, ".", "", e))
      return c.os_error(errno, op.path);
    e.path = c.ws.shown;
  } else {
    std::string name;
    auto parent = parent_of(c, op.path, name);
    if (!parent)
      return c.os_error(errno, split(op.path).first);
    if (!entry_of(parent.get(), name, c.shown(op.path), e))
      return c.os_error(errno, op.path);
  }
  r.size = e.size;
  r.entries.push_back(std::move(e));
  return r;
}

result<file_result> do_list(const context& c, const file_op& op) {
  if (op.depth < 1 || op.depth > c.lim.max_list_depth)
    return box_error{ec::validation, "depth must be between 1 and " + std::to_string(c.lim.max_list_depth)};
  auto top = beneath::open(c.ws.root, op.path, O_RDONLY | O_DIRECTORY, beneath::links::inside);
  if (!top)
    return c.os_error(errno == ENOTDIR ? ENOTDIR : errno, op.path);
  file_result r;
  const auto cap = static_cast<size_t>(std::max<int64_t>(c.lim.max_list_entries, 0));
  // Breadth first, each folder opened by name beneath its parent's descriptor with
  // O_NOFOLLOW: a folder swapped for a link is not entered.
  struct level {
    unique_fd dir;
    std::string prefix;
    int depth;
  };
  std::deque<level> todo;
  todo.push_back({std::move(top), std::string{}, 1});
  while (!todo.empty()) {
    auto cur = std::move(todo.front());
    todo.pop_front();
    bool over = false;
    auto names = beneath::list(cur.dir.get(), cap + 1, over);
    if (!names) {
      if (cur.prefix.empty())
        return c.os_error(errno, op.path);
      continue; // a folder below that went away or may not be read: skipped
    }
    for (auto& name : *names) {
      if (r.entries.size() >= cap) {
        r.truncated = true;
        return r;
      }
      file_entry e;
      auto rel = cur.prefix.empty() ? name : cur.prefix + "/" + name;
      if (!entry_of(cur.dir.get(), name, rel, e))
        continue; // gone meanwhile
      bool descend = e.type == "dir" && cur.depth < op.depth;
      r.entries.push_back(std::move(e));
      if (descend) {
        unique_fd sub{::openat(cur.dir.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)};
        if (sub)
          todo.push_back({std::move(sub), rel, cur.depth + 1});
      }
    }
    if (over)
      r.truncated = true;
  }
  return r;
}

result<file_result> do_remove(const context& c, const file_op& op) {
  if (op.path.empty())
    return box_error{ec::validation, "the workspace root " + c.ws.shown + " cannot be removed"};
  if (c.ws.read_only)
    return c.read_only(op.path);
  std::string name;
  auto parent = parent_of(c, op.path, name);
  if (!parent)
    return c.os_error(errno, split(op.path).first);
  struct stat st{};
  if (::fstatat(parent.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return c.os_error(errno, op.path);
  if (S_ISDIR(st.st_mode)) {
    if (op.recursive) {
      if (auto err = beneath::remove_tree(parent.get(), name))
        return c.os_error(err.error, op.path);
    } else if (::unlinkat(parent.get(), name.c_str(), AT_REMOVEDIR) != 0) {
      return c.os_error(errno, op.path);
    }
  } else if (::unlinkat(parent.get(), name.c_str(), 0) != 0) {
    return c.os_error(errno, op.path);
  }
  return file_result{};
}

result<file_result> do_mkdir(const context& c, const file_op& op) {
  if (op.path.empty())
    return c.os_error(EEXIST, op.path);
  if (c.ws.read_only)
    return c.read_only(op.path);
  if (op.mode > 07777)
    return box_error{ec::validation, "mode must be between 0 and 0o7777"};
  auto mode = op.mode >= 0 ? static_cast<mode_t>(op.mode) : 0755;
  if (op.make_parents) {
    if (int err = beneath::make_dirs(c.ws.root, op.path, mode, beneath::links::inside))
      return c.os_error(err, op.path);
    return file_result{};
  }
  std::string name;
  auto parent = parent_of(c, op.path, name);
  if (!parent)
    return c.os_error(errno, split(op.path).first);
  if (::mkdirat(parent.get(), name.c_str(), mode) != 0)
    return c.os_error(errno, op.path);
  return file_result{};
}

result<file_result> do_move(const context& c, const file_op& op) {
  if (op.path.empty() || op.to.empty())
    return box_error{ec::validation, "the workspace root " + c.ws.shown + " cannot be moved"};
  if (c.ws.read_only)
    return c.read_only(op.path);
  if (op.make_parents) {
    auto [dir, base] = split(op.to);
    if (!dir.empty())
      if (int err = beneath::make_dirs(c.ws.root, dir, 0755, beneath::links::inside))
        return c.os_error(err == EEXIST ? ENOTDIR : err, dir);
  }
  std::string from_name, to_name;
  auto from = parent_of(c, op.path, from_name);
  if (!from)
    return c.os_error(errno, split(op.path).first);
  auto to = parent_of(c, op.to, to_name);
  if (!to)
    return c.os_error(errno, split(op.to).first);
  auto flags = op.overwrite ? 0U : static_cast<unsigned>(RENAME_NOREPLACE);
  if (::renameat2(from.get(), from_name.c_str(), to.get(), to_name.c_str(), flags) != 0)
    return c.os_error(errno == EEXIST ? EEXIST : errno, errno == EEXIST ? op.to : op.path);
  return file_result{};
}

} // namespace

result<file_result> run(const workspace& ws, const file_op& op, const limits& lim) {
  if (ws.root < 0)
    return box_error{ec::box_error, "the session's workspace is not available"};
  as_identity who{ws.uid, ws.gid};
  if (!who.ok())
    return box_error{ec::box_error, "cannot act as the workspace's user"};
  context c{ws, lim};
  // The tenant's paths, made relative to the workspace root (or refused) first.
  file_op rel = op;
  auto path = normalize(op.path, ws.shown);
  if (!path)
    return path.error();
  rel.path = std::move(path.value());
  if (op.verb == file_verb::move) {
    auto to = normalize(op.to, ws.shown);
    if (!to)
      return to.error();
    rel.to = std::move(to.value());
  }
  if (op.verb == file_verb::write && op.encoding == "base64") {
    std::string why;
    auto raw = base64_decode(op.content, &why);
    if (!raw)
      return box_error{ec::validation, "content is not valid base64: " + why};
    rel.content = std::move(*raw);
  }
  auto r = [&]() -> result<file_result> {
    switch (op.verb) {
      case file_verb::read: return do_read(c, rel);
      case file_verb::write: return do_write(c, rel);
      case file_verb::list: return do_list(c, rel);
      case file_verb::stat: return do_stat(c, rel);
      case file_verb::remove: return do_remove(c, rel);
      case file_verb::mkdir: return do_mkdir(c, rel);
      case file_verb::move: return do_move(c, rel);
    }
    return box_error{ec::validation, "unknown file action"};
  }();
  if (r) {
    r->verb = op.verb;
    r->path = c.shown(rel.path);
    if (op.verb == file_verb::move)
      r->to = c.shown(rel.to);
    r->encoding = op.encoding;
    r->offset = op.offset;
    if (op.verb == file_verb::read) {
      // The reply's text is made here, on the worker pool.
      r->length = static_cast<int64_t>(r->data.size());
      if (op.encoding == "base64")
        r->data = base64_encode(r->data);
      else if (op.encoding == "utf-8")
        r->data = json::sanitize_utf8(r->data);
      // "raw" (the runtime as a library): the bytes as they are.
    }
  }
  return r;
}

box_error write_too_large(int64_t bytes, int64_t max_call_bytes) {
  return {ec::validation, "content of " + std::to_string(bytes) + " bytes is more than one call may write ("
                            + std::to_string(max_call_bytes) + " bytes, server.max_file_call_bytes)"};
}

result<std::string> normalize(const std::string& path, const std::string& mount_path) {
  if (path.find('\0') != std::string::npos)
    return box_error{ec::validation, "path must not contain a NUL byte"};
  std::string_view rest{path};
  if (!path.empty() && path.front() == '/') {
    std::string_view mount{mount_path};
    while (mount.size() > 1 && mount.back() == '/')
      mount.remove_suffix(1);
    if (mount == "/") {
      rest.remove_prefix(1);
    } else if (rest.starts_with(mount) && (rest.size() == mount.size() || rest[mount.size()] == '/')) {
      rest.remove_prefix(mount.size());
    } else {
      return box_error{ec::validation, "path " + path + " is outside the workspace " + mount_path};
    }
  }
  std::vector<std::string_view> parts;
  while (!rest.empty()) {
    auto slash = rest.find('/');
    auto part = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
    if (part.empty() || part == ".")
      continue;
    if (part == "..") {
      if (parts.empty())
        return box_error{ec::validation, "path " + path + " is outside the workspace " + mount_path};
      parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  std::string out;
  for (auto p : parts) {
    if (!out.empty())
      out += '/';
    out += p;
  }
  return out;
}

} // namespace boxrt::files
