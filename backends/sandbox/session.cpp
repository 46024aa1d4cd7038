// The sandbox of one session at run time: its control channel to boxrt-init,
// its managed processes and their end with it, and the helpers of the driver.
#include "backends/sandbox/detail.hpp"

namespace boxrt {

const char* driver_name(sandbox_driver d) {
  return d == sandbox_driver::nsjail ? "nsjail" : "bwrap";
}

namespace sandbox_detail {

std::vector<std::string> sandbox_env(const std::map<std::string, std::string>& env) {
  std::vector<std::string> out{std::string{"PATH="} + sandbox_path, "HOME=/home", "PYTHONUNBUFFERED=1",
                               "LANG=C.UTF-8"};
  for (auto& [k, v] : env)
    out.push_back(k + "=" + v);
  return out;
}

bool make_fifo(int dir, const std::string& name, uint32_t uid, uint32_t gid) {
  ::unlinkat(dir, name.c_str(), 0);
  return ::mkfifoat(dir, name.c_str(), 0600) == 0 && ::fchownat(dir, name.c_str(), uid, gid, AT_SYMLINK_NOFOLLOW) == 0;
}

std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t i = 0;
  while (i <= dirs.size()) {
    auto j = dirs.find(':', i);
    if (j == std::string::npos)
      j = dirs.size();
    auto candidate = dirs.substr(i, j - i) + "/" + name;
    if (j > i && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    i = j + 1;
  }
  return {};
}

std::string self_dir() {
  std::error_code err;
  auto exe = fs::read_symlink("/proc/self/exe", err);
  return err ? std::string{} : exe.parent_path().string();
}

int high_fd(int fd) {
  if (fd < 0)
    return fd;
  int h = ::fcntl(fd, F_DUPFD_CLOEXEC, 16);
  ::close(fd);
  return h;
}

void close_fd(int& fd) {
  if (fd >= 0)
    ::close(fd);
  fd = -1;
}

std::string read_available(int fd) {
  std::string out;
  char chunk[4096];
  for (int i = 0; i < 16; ++i) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, i == 0 ? 200 : 0) <= 0)
      break;
    auto n = ::read(fd, chunk, sizeof chunk);
    if (n <= 0)
      break;
    out.append(chunk, static_cast<size_t>(n));
  }
  return std::string{py::strip(out)};
}

void hand_over(int fd, uint32_t uid, uint32_t gid, const std::string& shown, int64_t host_gid) {
  struct stat st{};
  if (::fstat(fd, &st) == 0 && st.st_uid == uid && st.st_gid == gid) {
    // Handed over before, or the root of a quota image that mkfs made the uid's: the
    // contents are the uid's already, but the top's mode and ACLs are set on every
    // mount, since an image's root starts as 0755 with none and a mount hides the
    // folder below it (which has them).
    if (host_gid >= 0)
      if (auto e = beneath::grant_group(fd, static_cast<uint32_t>(host_gid), true); e != 0)
        spdlog::warn("sandbox: cannot close {} to other users: {}", shown, std::strerror(e));
    return;
  }
  if (auto e = beneath::hand_over(fd, uid, gid, host_gid); e != 0)
    spdlog::warn("sandbox: cannot hand {} over to uid {}: {}", shown, uid, std::strerror(e));
}

pid_t child_pid_of(const std::string& info) {
  constexpr std::string_view key = "\"child-pid\"";
  auto at = info.find(key);
  if (at == std::string::npos)
    return -1;
  at = info.find_first_of("0123456789", at + key.size());
  if (at == std::string::npos)
    return -1;
  pid_t pid = 0;
  auto [end, errc] = std::from_chars(info.data() + at, info.data() + info.size(), pid);
  return errc == std::errc{} ? pid : -1;
}

std::vector<system_path> system_paths() {
  std::vector<system_path> out{{"/usr", {}}};
  std::error_code err;
  for (const char* dir : {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}) {
    auto st = fs::symlink_status(dir, err);
    if (err || !fs::exists(st))
      continue;
    out.push_back({dir, fs::is_symlink(st) ? fs::read_symlink(dir, err).string() : std::string{}});
  }
  for (const char* e : {"/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
                        "/etc/ssl/certs", "/etc/localtime"})
    if (fs::exists(e, err))
      out.push_back({e, {}});
  return out;
}

std::vector<std::string> hidden_proc_files() {
  std::vector<std::string> out;
  std::error_code err;
  // The kernel's build configuration: which hardening and drivers the host has.
  for (const char* f : {"/proc/config.gz"})
    if (fs::exists(f, err))
      out.emplace_back(f);
  return out;
}

pid_t only_child_of(pid_t pid) {
  auto path = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children";
  std::ifstream in{path};
  pid_t child = -1, more = -1;
  if (!(in >> child) || child <= 0 || (in >> more))
    return -1;
  return child;
}

namespace {

struct namespace_call {
  int pidfd;
  const std::function<int()>* fn;
};

/// The helper's body: joins the namespace and runs the call. It shares boxd's memory and
/// descriptor table, so it only makes system calls and closes what it opens.
int namespace_child(void* arg) {
  auto* call = static_cast<namespace_call*>(arg);
  if (call->pidfd < 0 || ::setns(call->pidfd, CLONE_NEWNS) != 0)
    ::_exit(errno & 0xff);
  ::_exit((*call->fn)() & 0xff);
}

} // namespace

int run_clone(int (*body)(void*), void* arg, int flags) {
  constexpr size_t stack_size = 256 * 1024;
  auto stack = std::make_unique<char[]>(stack_size);
  pid_t pid = ::clone(body, stack.get() + stack_size, flags | SIGCHLD, arg);
  if (pid < 0)
    return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
}

int in_mount_namespace(int pidfd, const std::function<int()>& fn) {
  // Not a fork: a fork copies boxd's descriptor table and page tables, which grow with
  // every live sandbox, so each per-exec mount cost more as the host filled. The helper
  // shares both (CLONE_VM | CLONE_FILES) and the calling thread waits until it is done
  // (CLONE_VFORK); only its file system context is its own, which setns needs.
  namespace_call call{pidfd, &fn};
  int status = run_clone(namespace_child, &call, CLONE_VM | CLONE_VFORK | CLONE_FILES);
  if (status == -1)
    return errno;
  return status < 0 ? EIO : status;
}

int open_dir_no_links(int at, const std::string& path, uint64_t resolve) {
  open_how how{};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | resolve;
  return static_cast<int>(::syscall(SYS_openat2, at, path.c_str(), &how, sizeof how));
}

bool within(const std::string& p, const std::string& base) {
  return p == base || p.starts_with(base + "/");
}

std::string skill_mount_name(const box_spec& spec, const mount_spec& m) {
  if (!is_skill_mount(spec, m))
    return {};
  return m.mount_path.substr(spec.mount_path.size() + 9); // after "/.skills/"
}

result<unique_fd> detached_copy(int source, const std::string& shown, bool ro) {
  unique_fd tree{static_cast<int>(::open_tree(source, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE))};
  if (!tree)
    return make_box_error(ec::box_error, "cannot mount " + shown + ": " + std::strerror(errno));
  mount_attr attr{};
  attr.attr_set = ro ? MOUNT_ATTR_RDONLY : 0;
  attr.propagation = MS_PRIVATE;
  if (::mount_setattr(tree.get(), "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0)
    return make_box_error(ec::box_error, std::string{"cannot make "} + (ro ? "a read-only" : "a private") + " copy of "
                                           + shown + ": " + std::strerror(errno));
  return tree;
}

bool unmount_and_remove(const std::string& dir) {
  for (auto& m : mounts_under(dir))
    ::umount2(m.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
  if (!mounts_under(dir).empty()) {
    spdlog::warn("sandbox: {} still has mounts; not removed", dir);
    return false;
  }
  auto slash = dir.rfind('/');
  auto parent = beneath::open_root(dir.substr(0, slash == 0 ? 1 : slash));
  if (!parent)
    return errno == ENOENT; // no parent, no tree
  if (auto err = beneath::remove_tree(parent.get(), dir.substr(slash + 1))) {
    spdlog::warn("sandbox: cannot remove {} ({}: {}); retried at the next start", dir, err.detail,
                 std::strerror(err.error));
    return false;
  }
  return true;
}

std::vector<ephemeral_mount> ephemeral_mounts(const sandbox_options& o, int64_t memory_mb) {
  struct want {
    const char* target;
    const char* folder;
    int64_t mb;
  };
  const want wanted[] = {{"/tmp", "tmp", o.tmp_size_mb}, {"/home", "home", o.home_size_mb},
                         {"/dev/shm", "shm", o.shm_size_mb}};
  int64_t sum = 0;
  for (auto& w : wanted)
    sum += std::max<int64_t>(w.mb, 1);
  const int64_t budget = std::max<int64_t>(memory_mb / 2, 3);
  std::vector<ephemeral_mount> out;
  for (auto& w : wanted) {
    auto size = std::max<int64_t>(w.mb, 1);
    if (sum > budget)
      size = std::max<int64_t>(size * budget / sum, 1);
    out.push_back({w.target, w.folder, size * 1048576, size * inodes_per_mb, std::string_view{w.target} != "/home"});
  }
  return out;
}

scratch_bounds scratch_space(const sandbox_options& o, int64_t memory_mb) {
  scratch_bounds out{0, 8};
  for (auto& m : ephemeral_mounts(o, memory_mb)) {
    out.bytes += m.bytes;
    out.inodes += m.inodes;
  }
  return out;
}

std::string managed_tenant_name(const std::string& host_path) {
  static const std::regex pattern{"ws-[0-9a-f]{24}"};
  fs::path p{host_path};
  auto name = p.filename().string();
  if (p.parent_path().filename() == "tenants" && std::regex_match(name, pattern))
    return name;
  return {};
}

} // namespace sandbox_detail

result<proto::control_reply> sandbox_session::control(std::string frame, int64_t id) {
  std::lock_guard lock{ctl_mtx};
  if (!ctl || !alive())
    return make_box_error(ec::box_error, what() + " is not running");
  auto deadline = clock_type::now() + control_timeout;
  if (write_frame(ctl.get(), frame, deadline, &interrupted_) != read_status::ok)
    return make_box_error(ec::box_error, what() + " does not take requests");
  for (;;) {
    std::string payload;
    // init holds the socket's only other end, so a dead sandbox ends the wait.
    auto st = read_frame(ctl.get(), payload, deadline, &interrupted_, 64 * 1024);
    if (st == read_status::timeout)
      return make_box_error(ec::box_error, what() + " did not answer in time");
    if (st == read_status::closed)
      return make_box_error(ec::box_error, what() + " has ended");
    auto reply = proto::decode_control_reply(payload);
    if (!reply)
      return make_box_error(ec::box_error, what() + " sent a malformed reply");
    if (reply->id == id)
      return *reply;
  }
}

std::shared_ptr<unique_fd> sandbox_session::open_session_fs() const {
  // The driver is boxd's child, reaped only by end_sandbox (which clears fs_dev first
  // under the same lock its callers hold), so its pid names it; its root and namespace
  // are the launcher's, which nothing inside the sandbox can change. The folder found
  // there must be the very mount the launch made (device and inode), else nothing.
  if (pid <= 0 || fs_dev == 0)
    return nullptr;
  unique_fd root{::open(("/proc/" + std::to_string(pid) + "/root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)};
  if (!root)
    return nullptr;
  unique_fd fs{open_dir_no_links(root.get(), fs_at, RESOLVE_BENEATH)};
  struct stat st{};
  if (!fs || ::fstat(fs.get(), &st) != 0 || st.st_dev != fs_dev || st.st_ino != fs_ino)
    return nullptr;
  return std::make_shared<unique_fd>(high_fd(fs.release()));
}

void sandbox_session::sandbox_ended() {
  std::vector<std::shared_ptr<sandbox_managed_process>> alive;
  {
    std::lock_guard lock{procs_mtx_};
    for (auto& w : procs_)
      if (auto p = w.lock())
        alive.push_back(std::move(p));
    procs_.clear();
  }
  for (auto& p : alive)
    p->sandbox_ended();
}

// -- sandbox_session and sandbox_managed_process (detail.hpp) ---------------------------

void sandbox_session::interrupt() {
  interrupted_ = true;
  alive_ = false;
  // Whoever holds the lock is killing the sandbox already (or installing a new one,
  // which checks interrupted_ when it is done): the actor thread never waits here.
  std::unique_lock lock{kill_mtx_, std::try_to_lock};
  if (!lock.owns_lock())
    return;
  if (group)
    group->signal_all();
  kill_driver();
}

void sandbox_session::kill_sandbox(bool over) {
  if (over)
    alive_ = false;
  std::lock_guard lock{kill_mtx_};
  if (group)
    group->kill_all();
  kill_driver();
}

bool sandbox_session::died() const {
  if (pid <= 0)
    return true;
  // The driver is boxd's child and is reaped only by end_sandbox: looked at, not reaped.
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid)
    return true;
  // The sandbox's reaper (pid 1 inside), which ends with init.
  pollfd p{ns_pidfd.get(), POLLIN, 0};
  return ns_pidfd && ::poll(&p, 1, 0) > 0;
}

void sandbox_session::end_sandbox() {
  std::unique_lock state{sandbox_mtx};
  if (channel)
    ::shutdown(channel.get(), SHUT_WR); // boxrt-init exits on end of input
  kill_sandbox(false);
  if (pid > 0) {
    // Reaped under the lock kill_driver signals under, so its pid is never a reused one.
    std::lock_guard lock{kill_mtx_};
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    pid = -1;
  }
  ns_pid = -1;
  ns_pidfd.reset();
  channel.reset();
  {
    std::lock_guard lock{ctl_mtx};
    ctl.reset();
  }
  net.reset();
  sandbox_ended(); // before the io folder goes
  {
    std::lock_guard lock{kill_mtx_};
    if (group)
      group->destroy();
    group.reset();
  }
  // The views and the io folder were mounted only inside the sandbox, which is gone.
  fs_dev = 0;
  fs_ino = 0;
  skills.sub.clear();
  artifacts.sub.clear();
  skills.mounted.clear();
  artifacts.mounted.clear();
}

unique_fd sandbox_session::workspace_root_locked() const {
  // The quota image's root as it was mounted; else the host path or the private
  // workspace, opened by a walk that follows no link a sandbox could have planted.
  if (workspace_fd)
    return unique_fd{::fcntl(workspace_fd.get(), F_DUPFD_CLOEXEC, 0)};
  if (mounts_host_path(spec))
    return beneath::open_trusted(spec.host_path, O_PATH | O_DIRECTORY);
  return beneath::open_trusted(private_dir + "/workspace", O_PATH | O_DIRECTORY);
}

void sandbox_session::teardown() {
  std::lock_guard lock{teardown_mtx_};
  if (torn_down_)
    return;
  torn_down_ = true;
  alive_ = false;
  end_sandbox();
  workspace_fd.reset();
  skill_lease.reset();
  leases.clear();
  const bool removed = private_dir.empty() || unmount_and_remove(private_dir);
  if (release_uid)
    release_uid(removed);
}

boxrt::backend::usage sandbox_session::usage() {
  boxrt::backend::usage out;
  std::lock_guard torn{teardown_mtx_};
  if (torn_down_)
    return out;
  {
    std::lock_guard lock{kill_mtx_};
    if (group) {
      out.cpu_usec = group->cpu_usec();
      out.memory_bytes = group->memory_bytes();
    }
  }
  // The quota image's root, held by descriptor since it was mounted: no path is
  // walked here, so a tenant that swaps a folder on the way cannot point this at
  // another filesystem. fstatfs reads the filesystem's own counters.
  struct statfs fs{};
  if (workspace_fd && ::fstatfs(workspace_fd.get(), &fs) == 0)
    out.workspace_bytes = static_cast<int64_t>((fs.f_blocks - fs.f_bfree) * static_cast<uint64_t>(fs.f_bsize));
  return out;
}

std::optional<int64_t> sandbox_managed_process::read_exit_file() const {
  int fd = ::openat(io_->get(), exit_name_.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return std::nullopt;
  struct stat st{};
  char buf[32] = {};
  ssize_t n = -1;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
    n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0)
    return std::nullopt;
  auto text = py::strip(std::string_view{buf, static_cast<size_t>(n)});
  int64_t code = 0;
  auto [end, errc] = std::from_chars(text.data(), text.data() + text.size(), code);
  if (errc != std::errc{} || end != text.data() + text.size())
    return std::nullopt;
  return code;
}

void sandbox_managed_process::send_signal(int sig) {
  auto s = session_.lock();
  if (!s || ended_)
    return;
  proto::kill_request req;
  req.id = 0;
  req.name = name_;
  req.signal = sig;
  {
    std::lock_guard lock{s->ctl_mtx};
    req.id = ++s->ctl_seq;
  }
  if (auto r = s->control(proto::encode(req), req.id); !r)
    spdlog::debug("{}: cannot signal managed process {} in {}: {}", s->driver, name_, s->id(), r.error().message);
}

} // namespace boxrt
