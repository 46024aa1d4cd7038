#include "backends/bwrap.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sched.h>
#include <shared_mutex>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>
#include <mutex>
#include <future>
#include <functional>
#include <deque>
#include <condition_variable>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>

#include <spdlog/spdlog.h>

#include "backends/cgroup.hpp"
#include "backends/deadline.hpp"
#include "backends/init_channel.hpp"
#include "backends/init_protocol.hpp"
#include "backends/linux/beneath.hpp"
#include "backends/linux/netstack.hpp"
#include "backends/linux/uids.hpp"
#include "backends/linux/unique_fd.hpp"
#include "backends/managed.hpp"
#include "backends/output.hpp"
#include "backends/quota.hpp"
#include "backends/readiness_keys.hpp"
#include "backends/seccomp.hpp"
#include "messages/base/pytext.hpp"
#include "messages/tenancy.hpp"

namespace boxrt {

namespace fs = std::filesystem;
namespace proto = init_protocol;
using init_channel::read_frame;
using init_channel::read_status;
using init_channel::write_frame;
using clock_type = std::chrono::steady_clock;

namespace {

/// Commands see this PATH (the reference's nsjail value).
constexpr const char* sandbox_path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Where boxrt-init appears inside every sandbox.
constexpr const char* init_in_sandbox = "/.boxrt/init";

/// Where the session's io folder (managed-process FIFOs, exit files, the control FIFOs
/// of boxrt-init) appears inside every sandbox.
constexpr const char* io_in_sandbox = "/.boxrt/io";

/// How long a control request (spawn, kill) may wait for boxrt-init's reply.
constexpr auto control_timeout = std::chrono::seconds{10};

/// The environment every command sees, then the spec's own variables.
std::vector<std::string> sandbox_env(const std::map<std::string, std::string>& env) {
  std::vector<std::string> out{std::string{"PATH="} + sandbox_path, "HOME=/home", "PYTHONUNBUFFERED=1",
                               "LANG=C.UTF-8"};
  for (auto& [k, v] : env)
    out.push_back(k + "=" + v);
  return out;
}

/// A FIFO the sandbox uid may open, made fresh: whatever the sandbox left under that
/// name (it owns the folder) is removed first, never followed.
bool make_fifo(const std::string& path, uint32_t uid, uint32_t gid) {
  ::unlink(path.c_str());
  return ::mkfifo(path.c_str(), 0600) == 0 && ::lchown(path.c_str(), uid, gid) == 0;
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

/// Moves `fd` to a number >= 10 (close-on-exec), so the launcher's dup2 onto 0..N
/// never clobbers another descriptor it still needs.
int high_fd(int fd) {
  if (fd < 0)
    return fd;
  int h = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
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

/// Gives the folder `fd` and everything below it to the sandbox uid, so the
/// unprivileged command can write what the spec says it may write (descriptor walk:
/// a sandbox that swaps a folder for a link meanwhile redirects nothing).
void hand_over(int fd, uint32_t uid, uint32_t gid, const std::string& shown, int64_t host_gid = -1) {
  struct stat st{};
  if (::fstat(fd, &st) == 0 && st.st_uid == uid && st.st_gid == gid)
    return;
  if (auto e = beneath::hand_over(fd, uid, gid, host_gid); e != 0)
    spdlog::warn("bwrap: cannot hand {} over to uid {}: {}", shown, uid, std::strerror(e));
}

/// The "child-pid" of bwrap's --info-fd JSON, or -1.
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

/// True when `p` is `base` or lies below it.
bool within(const std::string& p, const std::string& base) {
  return p == base || p.starts_with(base + "/");
}

/// The skill name when `m` is a skill mount: `<mount_path>/.skills/<name>`, one level
/// deep. Skill mounts come and go per exec without a new sandbox (see docs/sandbox.md).
std::string skill_mount_name(const box_spec& spec, const mount_spec& m) {
  if (!is_skill_mount(spec, m))
    return {};
  return m.mount_path.substr(spec.mount_path.size() + 9); // after "/.skills/"
}

/// Attaches the folder `source` (a descriptor) at `target` in boxd's own mount
/// namespace, read-only from the start when `ro` (a remount would not reach the
/// sandbox's copies), so the new mount propagates into the sandbox through the shared
/// skills view.
box_error attach_bind(int source, const std::string& shown, const std::string& target, bool ro) {
  int tree = static_cast<int>(::open_tree(source, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE));
  if (tree < 0)
    return make_box_error(ec::box_error, "cannot mount " + shown + ": " + std::strerror(errno));
  unique_fd owned{tree};
  if (ro) {
    mount_attr attr{};
    attr.attr_set = MOUNT_ATTR_RDONLY;
    if (::mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0)
      return make_box_error(ec::box_error, "cannot make " + shown + " read-only: " + std::strerror(errno));
  }
  if (::move_mount(tree, "", AT_FDCWD, target.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0)
    return make_box_error(ec::box_error, "cannot mount " + shown + " at " + target + ": " + std::strerror(errno));
  return {};
}

/// Detaches every mount at or below `dir`, then removes `dir` (a folder of boxd's state)
/// by descriptor: the removal never enters a mount, so it cannot reach into a skill
/// package or a workspace, and a failure is logged, not ignored.
void unmount_and_remove(const std::string& dir) {
  for (auto& m : mounts_under(dir))
    ::umount2(m.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
  if (!mounts_under(dir).empty()) {
    spdlog::warn("bwrap: {} still has mounts; not removed", dir);
    return;
  }
  auto slash = dir.rfind('/');
  auto parent = beneath::open_root(dir.substr(0, slash == 0 ? 1 : slash));
  if (!parent)
    return;
  if (auto err = beneath::remove_tree(parent.get(), dir.substr(slash + 1)))
    spdlog::warn("bwrap: cannot remove {} ({}: {}); retried at the next start", dir, err.detail,
                 std::strerror(err.error));
}

/// One bounded tmpfs of a sandbox, mounted by the launcher (bwrap 0.8 can size a tmpfs
/// but not cap its inodes, nor size /dev) and bound in.
struct ephemeral_mount {
  const char* target;
  int64_t bytes;
  int64_t inodes;
  bool shared;  // 1777 (/tmp, /dev/shm); else owned by the sandbox uid, 0755 (/home)
};

/// Inodes per MiB of a bounded tmpfs: each costs kernel memory the size does not count.
constexpr int64_t inodes_per_mb = 256;

/// /tmp, /home and /dev/shm with their configured sizes, scaled down together so that
/// they hold at most half of `memory_mb` (at least 1 MiB each).
std::vector<ephemeral_mount> ephemeral_mounts(const bwrap_options& o, int64_t memory_mb) {
  std::vector<std::pair<const char*, int64_t>> wanted{{"/tmp", o.tmp_size_mb}, {"/home", o.home_size_mb},
                                                      {"/dev/shm", o.shm_size_mb}};
  int64_t sum = 0;
  for (auto& [t, mb] : wanted)
    sum += std::max<int64_t>(mb, 1);
  const int64_t budget = std::max<int64_t>(memory_mb / 2, 3);
  std::vector<ephemeral_mount> out;
  for (auto& [t, mb] : wanted) {
    auto size = std::max<int64_t>(mb, 1);
    if (sum > budget)
      size = std::max<int64_t>(size * budget / sum, 1);
    out.push_back({t, size * 1048576, size * inodes_per_mb, std::string_view{t} != "/home"});
  }
  return out;
}

/// The workspace's managed tenant folder name ("ws-<24 hex>") when `host_path` is one.
std::string managed_tenant_name(const std::string& host_path) {
  static const std::regex pattern{"ws-[0-9a-f]{24}"};
  fs::path p{host_path};
  auto name = p.filename().string();
  if (p.parent_path().filename() == "tenants" && std::regex_match(name, pattern))
    return name;
  return {};
}

} // namespace

// -- session ----------------------------------------------------------------------------

class bwrap_managed_process;

class bwrap_session final : public backend_session, public std::enable_shared_from_this<bwrap_session> {
 public:
  bwrap_session(std::string id, box_spec spec, bool own_paths)
    : id_(std::move(id)), spec(std::move(spec)), own_paths(own_paths) {}
  ~bwrap_session() override { teardown(); }

  std::string id() const override { return id_; }
  bool alive() const override { return alive_.load() && !interrupted_.load(); }

  /// Called from an actor thread: one round of SIGKILL, never a wait. The teardown on
  /// the pool makes sure nothing is left.
  void interrupt() override {
    interrupted_ = true;
    alive_ = false;
    // Whoever holds the lock is killing the sandbox already (or installing a new one,
    // which checks interrupted_ when it is done): the actor thread never waits here.
    std::unique_lock lock{kill_mtx_, std::try_to_lock};
    if (!lock.owns_lock())
      return;
    if (group)
      group->signal_all();
    kill_bwrap();
  }

  /// Installs what a launch made: the cgroup, then the started bwrap. Returns false
  /// when the session was interrupted meanwhile (the caller kills what it made).
  bool adopt_group(std::unique_ptr<cgroup_tree::group> g) {
    std::lock_guard lock{kill_mtx_};
    group = std::move(g);
    return !interrupted_;
  }
  bool adopt_bwrap(pid_t p) {
    std::lock_guard lock{kill_mtx_};
    pid = p;
    pidfd.reset(static_cast<int>(::syscall(SYS_pidfd_open, p, 0)));
    if (interrupted_)
      kill_bwrap();
    return !interrupted_;
  }

  /// SIGKILLs every process of the sandbox (its cgroup, and bwrap itself) and waits
  /// until the group is empty (bounded). `over`: the session ends with it (a timeout, a
  /// broken channel); else the next exec starts a fresh sandbox. Blocking: pool only.
  void kill_sandbox(bool over) {
    if (over)
      alive_ = false;
    std::lock_guard lock{kill_mtx_};
    if (group)
      group->kill_all();
    kill_bwrap();
  }

  /// True once the sandbox's outer bwrap has exited (its pidfd is readable): it was
  /// killed, or init died and took it along. Non-blocking.
  bool died() const {
    if (pid <= 0)
      return true;
    // The outer bwrap, or the sandbox's reaper (pid 1 inside), which ends with init.
    for (auto* fd : {&pidfd, &ns_pidfd}) {
      pollfd p{fd->get(), POLLIN, 0};
      if (*fd && ::poll(&p, 1, 0) > 0)
        return true;
    }
    return false;
  }

  /// Ends the sandbox itself and what each launch makes (processes, pipes, cgroup,
  /// network stack, io folder, skills view) and keeps what outlives a sandbox: the
  /// private workspace, the quota leases and the uid. Idempotent.
  void end_sandbox() {
    std::unique_lock state{sandbox_mtx};
    to_init.reset(); // boxrt-init exits on end of input
    kill_sandbox(false);
    if (pid > 0) {
      while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
      std::lock_guard lock{kill_mtx_};
      pid = -1;
      pidfd.reset();
    }
    ns_pid = -1;
    ns_pidfd.reset();
    from_init.reset();
    errors.reset();
    {
      std::lock_guard lock{ctl_mtx};
      ctl_req.reset();
      ctl_rep.reset();
    }
    net.reset();
    sandbox_ended(); // before the io folder goes
    {
      std::lock_guard lock{kill_mtx_};
      if (group)
        group->destroy();
      group.reset();
    }
    for (auto* dir : {&skills_view, &io_dir})
      if (!dir->empty()) {
        for (auto& m : mounts_under(*dir))
          ::umount2(m.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
        dir->clear();
      }
    skills_mounted.clear();
  }

  /// Ends the sandbox and frees everything it held. Idempotent.
  void teardown() {
    std::lock_guard lock{teardown_mtx_};
    if (torn_down_)
      return;
    torn_down_ = true;
    alive_ = false;
    end_sandbox();
    leases.clear();
    if (!private_dir.empty())
      unmount_and_remove(private_dir);
    if (release_uid)
      release_uid();
  }

  std::string id_;
  /// The spec the session started with: every fresh sandbox of it is made from this.
  box_spec spec;
  bool own_paths = false;
  std::atomic<bool> alive_{true};
  std::atomic<bool> interrupted_{false};
  /// The outer bwrap (a child of boxd) and a pidfd of it.
  pid_t pid = -1;
  unique_fd pidfd;
  /// The sandbox's first process as the host sees it (bwrap's --info-fd child-pid): the
  /// way into its namespaces.
  pid_t ns_pid = -1;
  unique_fd ns_pidfd;
  unique_fd to_init;
  unique_fd from_init;
  unique_fd errors;
  std::unique_ptr<cgroup_tree::group> group;
  std::unique_ptr<netstack> net;
  std::vector<std::shared_ptr<loop_quota::lease>> leases;
  /// Quota leases and the uid are taken by the first launch and kept by later ones.
  bool prepared = false;
  std::function<void()> release_uid;
  /// `<state>/sessions/<sid>`: the private workspace, the io folder, the skills view.
  std::string private_dir;
  /// Host side of the sandbox's `<mount_path>/.skills`: a shared tmpfs whose submounts
  /// (one per skill of the current exec) propagate into the sandbox. "" = none.
  std::string skills_view;
  /// Skill name -> (host path, mode) mounted in the view now.
  std::map<std::string, mount_spec> skills_mounted;
  /// Host uid and gid the sandbox runs as.
  uint32_t uid = 0, gid = 0;
  /// How many sandboxes this session has had (a dead one is replaced on the next exec).
  int generation = 0;
  /// One exec at a time (the session actor serializes too; this guards the pipes).
  std::mutex exec_mtx;
  /// What a launch makes and end_sandbox takes down (io folder, skills view, pipes):
  /// exclusive for those two, shared for a managed-process start beside an exec.
  std::shared_mutex sandbox_mtx;

  /// Host side of the io folder bound at /.boxrt/io ("" = none).
  std::string io_dir;
  /// boxrt-init's control FIFOs (host ends), guarded by ctl_mtx; one request at a time.
  std::mutex ctl_mtx;
  unique_fd ctl_req;
  unique_fd ctl_rep;
  int64_t ctl_seq = 0;
  /// Names the managed processes p1, p2, ...
  std::atomic<uint64_t> process_seq{0};

  /// Sends one control request and waits for its reply (stale replies of requests
  /// that timed out are skipped). Blocking, bounded by control_timeout.
  result<proto::control_reply> control(std::string frame, int64_t id);

  void add_process(const std::shared_ptr<bwrap_managed_process>& p) {
    std::lock_guard lock{procs_mtx_};
    std::erase_if(procs_, [](auto& w) { return w.expired(); });
    procs_.push_back(p);
  }

  /// Tells each managed process its sandbox is gone (defined after that class).
  void sandbox_ended();

 private:
  /// SIGKILL to bwrap through its pidfd (never a pid that may have been reused since
  /// it was reaped). Called with kill_mtx_ held.
  void kill_bwrap() {
    if (pidfd)
      ::syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0);
    else if (pid > 0)
      ::kill(pid, SIGKILL);
  }

  std::mutex teardown_mtx_;
  std::mutex procs_mtx_;
  std::vector<std::weak_ptr<bwrap_managed_process>> procs_;
  /// Guards `group`, `pid` and `pidfd` between interrupt (actor thread) and the pool.
  std::mutex kill_mtx_;
  bool torn_down_ = false;
};

result<proto::control_reply> bwrap_session::control(std::string frame, int64_t id) {
  std::lock_guard lock{ctl_mtx};
  if (!ctl_req || !alive())
    return make_box_error(ec::box_error, "bwrap sandbox " + id_ + " is not running");
  auto deadline = clock_type::now() + control_timeout;
  if (write_frame(ctl_req.get(), frame, deadline, &interrupted_) != read_status::ok)
    return make_box_error(ec::box_error, "bwrap sandbox " + id_ + " does not take requests");
  for (;;) {
    std::string payload;
    // init dying closes the only writer of ctl.rep, so a dead sandbox ends the wait.
    auto st = read_frame(ctl_rep.get(), payload, deadline, &interrupted_, 64 * 1024);
    if (st == read_status::timeout)
      return make_box_error(ec::box_error, "bwrap sandbox " + id_ + " did not answer in time");
    if (st == read_status::closed)
      return make_box_error(ec::box_error, "bwrap sandbox " + id_ + " has ended");
    auto reply = proto::decode_control_reply(payload);
    if (!reply)
      return make_box_error(ec::box_error, "bwrap sandbox " + id_ + " sent a malformed reply");
    if (reply->id == id)
      return *reply;
  }
}

/// A managed process inside a bwrap sandbox: boxrt-init's child, reached through FIFOs
/// of the session's io folder. Its exit code comes from the `<name>.exit` file init
/// writes; when the sandbox itself ends first, the code is 137 (killed with it).
class bwrap_managed_process final : public fd_managed_process {
 public:
  bwrap_managed_process(std::weak_ptr<bwrap_session> session, std::string name, std::string io_dir,
                        int in_fd, int out_fd, int err_fd)
    : fd_managed_process{in_fd, out_fd, err_fd}, session_{std::move(session)}, name_{std::move(name)},
      exit_path_{io_dir + "/" + name_ + ".exit"} {}

  ~bwrap_managed_process() override {
    if (!exit_code())
      send_signal(SIGKILL);
    ::unlink(exit_path_.c_str());
  }

  /// The sandbox is going: the exit code is what init recorded, else 137.
  void sandbox_ended() {
    ended_ = true;
    exit_code();
  }

 protected:
  std::optional<int64_t> poll_exit() override {
    if (auto code = read_exit_file())
      return code;
    auto s = session_.lock();
    if (ended_ || !s || !s->alive())
      return read_exit_file().value_or(137);
    return std::nullopt;
  }

  void wait_exit(clock_type::time_point deadline) override {
    // The exit file appears when init reaps the process; it is looked for every 10 ms.
    while (!exit_code()) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now()).count();
      if (left <= 0)
        return;
      ::poll(nullptr, 0, static_cast<int>(std::min<int64_t>(left, 10)));
    }
  }

  void send_signal(int sig) override {
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
      spdlog::debug("bwrap: cannot signal managed process {} in {}: {}", name_, s->id(), r.error().message);
  }

 private:
  /// The code init wrote; the file belongs to the sandbox uid, so it is read with care
  /// (no symlink, no FIFO, a number only).
  std::optional<int64_t> read_exit_file() const {
    int fd = ::open(exit_path_.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
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

  std::weak_ptr<bwrap_session> session_;
  std::string name_;
  std::string exit_path_;
  std::atomic<bool> ended_{false};
};

void bwrap_session::sandbox_ended() {
  std::vector<std::shared_ptr<bwrap_managed_process>> alive;
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

// -- backend ----------------------------------------------------------------------------

/// The one thread that forks sandboxes. bwrap's --die-with-parent (a parent-death
/// signal) fires when the *thread* that forked it ends, and worker-pool threads end
/// when idle: forking from this thread, which lives as long as the backend, keeps warm
/// sandboxes alive.
class launcher_thread {
 public:
  launcher_thread() : thread_([this] { loop(); }) {}
  ~launcher_thread() {
    {
      std::lock_guard lock{mtx_};
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  /// Runs `fn` on the launcher thread and waits for it.
  void run(const std::function<void()>& fn) {
    std::promise<void> done;
    auto finished = done.get_future();
    {
      std::lock_guard lock{mtx_};
      jobs_.push_back([&] {
        fn();
        done.set_value();
      });
    }
    cv_.notify_one();
    finished.wait();
  }

 private:
  void loop() {
    std::unique_lock lock{mtx_};
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty())
        return;
      auto job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      lock.lock();
    }
  }

  std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::thread thread_;
};

struct bwrap_backend::impl {
  launcher_thread launcher;
  std::unique_ptr<cgroup_tree> cgroups;
  std::string cgroup_reason;
  std::unique_ptr<loop_quota> quota;
  /// Shared with the sessions: one may outlive the backend (its release still counts).
  std::shared_ptr<uid_allocator> uids;
  std::string seccomp;
  /// boxrt-init, read once: each sandbox gets a copy on its own root (bwrap --file), so
  /// the build folder's path never shows inside.
  unique_fd init_image;
  int lock_fd = -1;
  std::atomic<uint64_t> next_id{1};
  std::mutex probe_mtx;
  std::optional<bool> storage_ok;
  std::string storage_reason;
};

bwrap_backend::bwrap_backend(bwrap_options options) : impl_(std::make_unique<impl>()), opts_(std::move(options)) {
  ::signal(SIGPIPE, SIG_IGN); // a sandbox that dies mid-request must not take boxd along
  if (opts_.bwrap_path.empty())
    opts_.bwrap_path = find_on_path("bwrap");
  if (opts_.init_path.empty()) {
    // Beside the executable (boxd in the build folder or an install), else the build
    // folder this library was built in (tests).
    opts_.init_path = self_dir() + "/boxrt-init";
#ifdef BOXRT_BUILD_INIT_PATH
    if (::access(opts_.init_path.c_str(), X_OK) != 0)
      opts_.init_path = BOXRT_BUILD_INIT_PATH;
#endif
  }
  std::error_code err;
  opts_.state_dir = fs::absolute(opts_.state_dir, err).lexically_normal().string();
  if (opts_.bwrap_path.empty()) {
    unavailable_ = "bubblewrap (bwrap) is not installed";
    return;
  }
  if (::access(opts_.init_path.c_str(), X_OK) != 0) {
    unavailable_ = "boxrt-init not found at " + opts_.init_path;
    return;
  }
  if (::geteuid() != 0) {
    unavailable_ = "the bwrap backend needs root (limits, quotas and the sandbox uid)";
    return;
  }
  if (opts_.uid_first == 0 || opts_.uid_last < opts_.uid_first) {
    unavailable_ = "the sandbox uid range must be non-empty and must not include 0";
    return;
  }
  fs::create_directories(opts_.state_dir, err);
  if (err) {
    unavailable_ = "cannot create the state directory " + opts_.state_dir + ": " + err.message();
    return;
  }
  ::chmod(opts_.state_dir.c_str(), 0700);
  // One boxd per state directory: its orphans are ours to clean, nobody else's.
  impl_->lock_fd = ::open((opts_.state_dir + "/lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (impl_->lock_fd < 0 || ::flock(impl_->lock_fd, LOCK_EX | LOCK_NB) != 0) {
    unavailable_ = "the state directory " + opts_.state_dir + " is in use by another boxd";
    return;
  }
  auto program = seccomp_program();
  if (!program) {
    unavailable_ = "cannot build the seccomp filter: " + program.error().message;
    return;
  }
  impl_->seccomp = std::move(program.value());
  {
    std::ifstream in{opts_.init_path, std::ios::binary};
    std::string image{std::istreambuf_iterator<char>{in}, {}};
    impl_->init_image.reset(::memfd_create("boxrt-init", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (image.empty() || !impl_->init_image || !proto::write_all(impl_->init_image.get(), image)
        || ::fcntl(impl_->init_image.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
      unavailable_ = "cannot load boxrt-init from " + opts_.init_path;
      return;
    }
  }
  // Group names carry this state directory, so two boxds never share a cgroup.
  auto base = "boxrt-" + sha256_hex(opts_.state_dir).substr(0, 12);
  if (!opts_.cgroup_root.empty()) {
    auto cg = std::make_unique<cgroup_tree>(opts_.cgroup_root, base, cgroup_tree::detect(opts_.cgroup_root));
    if (cg->usable(&impl_->cgroup_reason))
      impl_->cgroups = std::move(cg);
    else
      spdlog::warn("bwrap: cgroup limits are not usable ({}); processes are capped by RLIMIT_NPROC "
                   "per sandbox uid, memory and cpu are not capped",
                   impl_->cgroup_reason);
  } else {
    impl_->cgroup_reason = "cgroups disabled by configuration";
  }
  // The staging mount point must be reachable by the sandbox uid: /run when it exists.
  stage_root_ = fs::is_directory("/run") ? "/run/boxrt-stage" : "/tmp/boxrt-stage";
  fs::create_directories(stage_root_, err);
  ::chmod(stage_root_.c_str(), 0755);
  impl_->quota = std::make_unique<loop_quota>(opts_.state_dir + "/images", opts_.state_dir + "/mounts");
  impl_->uids = std::make_shared<uid_allocator>(opts_.uid_first, opts_.uid_last);
  for (auto& dir : opts_.workspace_roots)
    impl_->uids->scan(dir);
}

bwrap_backend::~bwrap_backend() {
  if (impl_->quota)
    impl_->quota->release_all();
  if (impl_->cgroups)
    impl_->cgroups->remove_base();
  if (impl_->lock_fd >= 0)
    ::close(impl_->lock_fd);
}

namespace {

/// Descriptors of the launcher when it becomes bwrap (0-2 are init's stdio).
constexpr int child_seccomp_fd = 3;
constexpr int child_info_fd = 4;
constexpr int child_args_fd = 5;
constexpr int child_init_fd = 6;
constexpr int child_resolv_fd = 7;

/// A fresh read-only descriptor of a sealed memfd, at offset 0 (bwrap reads to the end).
unique_fd reopen(int memfd) {
  return unique_fd{::open(("/proc/self/fd/" + std::to_string(memfd)).c_str(), O_RDONLY | O_CLOEXEC)};
}

/// A memfd holding `data`, at offset 0.
unique_fd memfd_with(const char* name, std::string_view data) {
  unique_fd fd{::memfd_create(name, MFD_CLOEXEC)};
  if (!fd || !proto::write_all(fd.get(), data) || ::lseek(fd.get(), 0, SEEK_SET) != 0)
    return unique_fd{};
  return fd;
}

} // namespace

std::vector<std::string> bwrap_backend::build_args(const box_spec& spec, int seccomp_fd, bool network,
                                                  bool skills_view) const {
  std::vector<std::string> a{opts_.bwrap_path};
  auto add = [&](std::initializer_list<std::string> xs) { a.insert(a.end(), xs); };
  // Every namespace, the network one too: `network: on` gets a stack of its own
  // attached to it (netstack), never the host's network.
  add({"--unshare-all", "--unshare-user", "--disable-userns"});
  add({"--die-with-parent", "--new-session", "--cap-drop", "ALL", "--hostname", "sandbox"});
  add({"--info-fd", std::to_string(child_info_fd)});
  add({"--ro-bind", "/usr", "/usr"});
  // Merged /usr: /bin and friends are symlinks on the host and stay symlinks here.
  for (const char* dir : {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}) {
    std::error_code err;
    auto st = fs::symlink_status(dir, err);
    if (err || !fs::exists(st))
      continue;
    if (fs::is_symlink(st))
      add({"--symlink", fs::read_symlink(dir, err).string(), dir});
    else
      add({"--ro-bind", dir, dir});
  }
  for (const char* e : {"/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
                        "/etc/ssl/certs", "/etc/localtime"})
    add({"--ro-bind-try", e, e});
  if (network)
    add({"--file", std::to_string(child_resolv_fd), "/etc/resolv.conf"});
  add({"--proc", "/proc", "--dev", "/dev"});
  // Host sources arrive staged at <stage>/<n> (see launch), in this order.
  int n = 0;
  auto staged = [&] { return stage_root_ + "/" + std::to_string(n++); };
  add({spec.host_path_mode == mount_mode::ro && !spec.host_path.empty() ? "--ro-bind" : "--bind", staged(),
       spec.mount_path});
  for (auto& m : spec.extra_mounts) {
    if (m.mode == mount_mode::none || !skill_mount_name(spec, m).empty())
      continue;
    add({m.mode == mount_mode::ro ? "--ro-bind" : "--bind", staged(), m.mount_path});
  }
  if (skills_view)
    add({"--bind", staged(), spec.mount_path + "/.skills"});
  add({"--bind", staged(), io_in_sandbox});
  // init is a copy on the sandbox's own root, not a bind of the build folder.
  add({"--perms", "0555", "--file", std::to_string(child_init_fd), init_in_sandbox});
  // Bounded tmpfs mounts made by the launcher; /dev itself then turns read-only, so
  // the only writable place below it is the bounded /dev/shm.
  for (auto& m : ephemeral_mounts(opts_, spec.memory_mb))
    add({"--bind", staged(), m.target});
  add({"--remount-ro", "/dev"});
  if (spec.read_only_rootfs)
    add({"--remount-ro", "/"});
  add({"--seccomp", std::to_string(seccomp_fd)});
  add({"--clearenv", "--setenv", "PATH", sandbox_path, "--chdir", "/", init_in_sandbox});
  return a;
}

result<std::shared_ptr<backend_session>> bwrap_backend::start_session(const box_spec& spec) {
  return start(spec, false);
}

uint32_t bwrap_backend::sandbox_uid(const backend_session& session) const {
  auto* s = dynamic_cast<const bwrap_session*>(&session);
  return s ? s->uid : 0;
}

std::string bwrap_backend::io_limits(const backend_session& session) const {
  auto* s = dynamic_cast<const bwrap_session*>(&session);
  return s && s->group ? s->group->io_limits() : std::string{};
}

pid_t bwrap_backend::sandbox_pid(const backend_session& session) const {
  auto* s = dynamic_cast<const bwrap_session*>(&session);
  return s ? s->ns_pid : -1;
}

result<std::shared_ptr<backend_session>> bwrap_backend::start(const box_spec& spec, bool own_paths) {
  if (!unavailable_.empty())
    return make_box_error(ec::backend_unavailable, unavailable_);
  auto serial = impl_->next_id++;
  auto sid = "bwrap-" + sha256_hex(spec.session_id).substr(0, 12) + "-" + std::to_string(serial);
  auto s = std::make_shared<bwrap_session>(sid, spec, own_paths);
  // boxd's own state is never a tenant's mount, nor inside one: judged by the spec's
  // text first, before anything is created or mounted for it, and again on what the
  // kernel reports once each source is open.
  std::error_code err;
  auto blocked = [&](const std::string& label, const std::string& path) -> box_error {
    auto p = fs::weakly_canonical(path, err).lexically_normal().string();
    while (p.size() > 1 && p.back() == '/')
      p.pop_back();
    if (within(p, opts_.state_dir) || within(opts_.state_dir, p))
      return make_box_error(ec::validation, label + " " + path + " is blocked for security");
    return {};
  };
  if (!own_paths && !spec.host_path.empty() && spec.host_path_mode != mount_mode::none)
    if (auto e = blocked("host_path", spec.host_path))
      return e;
  for (size_t i = 0; i < spec.extra_mounts.size() && !own_paths; ++i)
    if (spec.extra_mounts[i].mode != mount_mode::none)
      if (auto e = blocked("extra_mounts[" + std::to_string(i) + "].host_path", spec.extra_mounts[i].host_path))
        return e;
  if (auto e = prepare(*s)) {
    s->teardown();
    return e;
  }
  if (auto e = launch(*s)) {
    s->teardown();
    return e;
  }
  spdlog::debug("bwrap: session {} started as {} (pid {})", spec.session_id, sid, s->pid);
  return std::shared_ptr<backend_session>{std::move(s)};
}

box_error bwrap_backend::prepare(bwrap_session& s) {
  const auto& spec = s.spec;
  const bool has_host = !spec.host_path.empty() && spec.host_path_mode != mount_mode::none;
  s.private_dir = opts_.state_dir + "/sessions/" + s.id_;
  // The uid: the workspace's own (the owner of its folder, found by the scan or handed
  // out now), else one for this session alone. boxd's own probes take a session uid.
  if (has_host && !s.own_paths) {
    auto folder = spec.host_path_mode == mount_mode::rw ? beneath::make_dirs_trusted(spec.host_path, 0755)
                                                        : beneath::open_trusted(spec.host_path, O_PATH | O_DIRECTORY);
    if (!folder)
      return make_box_error(ec::box_error, "host path " + spec.host_path
                                             + (errno == ENOENT ? " does not exist" : ": " + std::string{std::strerror(errno)}));
    struct stat st{};
    ::fstat(folder.get(), &st);
    auto uid = impl_->uids->for_workspace(beneath::path_of(folder.get()), st.st_uid);
    if (!uid)
      return uid.error();
    s.uid = s.gid = *uid;
    // Record the uid on the folder itself (and hand over what is in it) before a quota
    // image may be mounted over it: the scan at the next start reads it there.
    if (spec.host_path_mode == mount_mode::rw)
      hand_over(folder.get(), s.uid, s.gid, spec.host_path, opts_.host_gid);
  } else {
    auto uid = impl_->uids->for_session(s.id_);
    if (!uid)
      return uid.error();
    s.uid = s.gid = *uid;
    s.release_uid = [uids = impl_->uids, key = s.id_] { uids->release(key); };
  }
  // Hard quotas: the workspace's image mounted at its own path, or a private image for
  // a session without a host path; the workspace's skill storage has one of its own.
  if (has_host && spec.workspace_quota_mb > 0) {
    auto name = managed_tenant_name(spec.host_path);
    if (name.empty())
      name = "path-" + sha256_hex(spec.host_path).substr(0, 24);
    auto lease = impl_->quota->acquire(name, spec.host_path, spec.workspace_quota_mb, s.uid, s.gid);
    if (!lease)
      return lease.error();
    s.leases.push_back(std::move(lease.value()));
  } else if (!has_host && spec.workspace_quota_mb > 0) {
    auto lease = impl_->quota->acquire(std::string{loop_quota::ephemeral_prefix} + s.id_, s.private_dir + "/workspace",
                                       spec.workspace_quota_mb, s.uid, s.gid, true);
    if (!lease)
      return lease.error();
    s.leases.push_back(std::move(lease.value()));
  }
  if (!opts_.skills_tenants_dir.empty() && has_host) {
    if (auto name = managed_tenant_name(spec.host_path); !name.empty()) {
      auto lease = impl_->quota->acquire("skills-" + name, opts_.skills_tenants_dir + "/" + name,
                                         opts_.skills_quota_mb, s.uid, s.gid);
      if (!lease)
        return lease.error();
      s.leases.push_back(std::move(lease.value()));
    }
  }
  s.prepared = true;
  return {};
}

box_error bwrap_backend::launch(bwrap_session& s) {
  std::unique_lock state{s.sandbox_mtx};
  const auto& spec = s.spec;
  const uint32_t uid = s.uid, gid = s.gid;
  ++s.generation;
  rlim_t nproc = 0;
  if (!impl_->cgroups) // without cgroups the process cap is RLIMIT_NPROC of the sandbox uid
    nproc = static_cast<rlim_t>(spec.pids_limit + opts_.pids_overhead);
  /// What the launcher stages at <stage>/<n>: a source (an open folder or file, with a
  /// detached copy of its mount for a tenant's source) or a bounded tmpfs.
  struct staged_item {
    unique_fd fd;
    unique_fd tree;
    std::string path;
    bool dir = true;
    std::string tmpfs;
  };
  std::vector<staged_item> items;
  /// Opens one source: host paths by a walk that follows no link a sandbox could have
  /// planted (open_trusted), a missing writable one created on the way; judged again
  /// by the path the kernel reports for the open folder; handed over to the sandbox
  /// uid through that same descriptor when `hand`. `label` names a tenant's source
  /// ("" for boxd's own folders).
  auto open_source = [&](const std::string& path, mount_mode mode, bool detach = true, const std::string& label = {},
                         bool hand = false) -> box_error {
    auto fd = mode == mount_mode::rw ? beneath::make_dirs_trusted(path, 0755) : beneath::open_trusted(path, O_PATH);
    if (!fd) {
      if (errno == ENOENT)
        return make_box_error(ec::box_error, "host path " + path + " does not exist");
      if (errno == ELOOP)
        return make_box_error(ec::box_error, "host path " + path + " leads through a link that a sandbox can change");
      return make_box_error(ec::box_error, "cannot open " + path + ": " + std::strerror(errno));
    }
    staged_item item;
    item.path = beneath::path_of(fd.get());
    if (!label.empty() && (within(item.path, opts_.state_dir) || within(opts_.state_dir, item.path)))
      return make_box_error(ec::validation, label + " " + path + " is blocked for security");
    if (hand)
      hand_over(fd.get(), uid, gid, path, label.empty() ? -1 : opts_.host_gid);
    struct stat st{};
    item.dir = ::fstat(fd.get(), &st) == 0 && S_ISDIR(st.st_mode);
    if (detach) {
      item.tree.reset(high_fd(static_cast<int>(
        ::open_tree(fd.get(), "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE))));
      if (!item.tree)
        return make_box_error(ec::box_error, "cannot bind " + path + ": " + std::strerror(errno));
    }
    item.fd.reset(high_fd(fd.release()));
    items.push_back(std::move(item));
    return {};
  };

  // Workspace: the spec's host path (under its quota image when it has one), else the
  // session's private folder (or its private quota image).
  const bool has_host = !spec.host_path.empty() && spec.host_path_mode != mount_mode::none;
  if (has_host) {
    if (auto e = open_source(spec.host_path, spec.host_path_mode, true, s.own_paths ? "" : "host_path",
                             spec.host_path_mode == mount_mode::rw))
      return e;
  } else if (auto e = open_source(s.private_dir + "/workspace", mount_mode::rw, true, "", true)) {
    return e;
  }
  for (auto& m : spec.extra_mounts) {
    if (m.mode == mount_mode::none || !skill_mount_name(spec, m).empty())
      continue;
    auto label = "extra_mounts[" + std::to_string(&m - spec.extra_mounts.data()) + "].host_path";
    if (auto e = open_source(m.host_path, m.mode, true, s.own_paths ? "" : label, m.mode == mount_mode::rw))
      return e;
  }
  std::error_code err;
  // The skills view: a small tmpfs of this session, made shared, so skills mounted into
  // it later (per exec) appear in the sandbox. A read-only workspace cannot take the
  // mount point, so it gets no view.
  if (spec.host_path.empty() || spec.host_path_mode != mount_mode::ro) {
    auto view = s.private_dir + "/skills";
    fs::create_directories(view, err);
    if (err || ::mount("boxrt-skills", view.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,nr_inodes=1024,mode=0755") != 0)
      return make_box_error(ec::box_error, "cannot prepare the skills view: " + std::string{std::strerror(errno)});
    s.skills_view = view;
    if (::mount(nullptr, view.c_str(), nullptr, MS_SHARED, nullptr) != 0)
      return make_box_error(ec::box_error, "cannot share the skills view: " + std::string{std::strerror(errno)});
    if (auto e = open_source(view, mount_mode::ro, false))
      return e;
  }
  // The io folder: managed-process FIFOs and exit files, and init's control FIFOs.
  // The sandbox uid owns it (0700); boxd reaches it as root. It is a tiny tmpfs, so
  // the sandbox cannot fill the state directory's disk through it.
  {
    auto io = s.private_dir + "/io";
    fs::create_directories(io, err);
    auto options = "size=1m,nr_inodes=4096,mode=0700,uid=" + std::to_string(uid) + ",gid=" + std::to_string(gid);
    if (err || ::mount("boxrt-io", io.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, options.c_str()) != 0)
      return make_box_error(ec::box_error, "cannot prepare the io folder " + io);
    s.io_dir = io; // from here on end_sandbox unmounts it
    if (!make_fifo(io + "/ctl.req", uid, gid) || !make_fifo(io + "/ctl.rep", uid, gid))
      return make_box_error(ec::box_error, "cannot prepare the io folder " + io);
    if (auto e = open_source(io, mount_mode::rw, false))
      return e;
  }
  // The bounded tmpfs mounts follow the sources (see build_args).
  for (auto& m : ephemeral_mounts(opts_, spec.memory_mb)) {
    staged_item item;
    auto owner = m.shared ? std::string{"mode=1777"}
                          : "mode=0755,uid=" + std::to_string(uid) + ",gid=" + std::to_string(gid);
    item.tmpfs = "size=" + std::to_string(m.bytes) + ",nr_inodes=" + std::to_string(m.inodes) + "," + owner;
    items.push_back(std::move(item));
  }
  // Descriptors bwrap reads: the seccomp filter, init's image, the resolver file.
  auto seccomp_fd = memfd_with("boxrt-seccomp", impl_->seccomp);
  auto init_fd = reopen(impl_->init_image.get());
  const bool network = spec.network == network_mode::on;
  unique_fd resolv_fd;
  if (network)
    resolv_fd = memfd_with("boxrt-resolv", sandbox_resolv_conf);
  if (!seccomp_fd || !init_fd || (network && !resolv_fd))
    return make_box_error(ec::box_error, std::string{"cannot pass the sandbox its files: "} + std::strerror(errno));

  // Limits: the cgroup the launcher joins before it becomes bwrap. I/O caps apply to
  // the device of a workspace's quota image (boxd's probes: of its own folder).
  if (impl_->cgroups) {
    cgroup_limits limits;
    limits.memory_bytes = spec.memory_mb * 1048576;
    limits.pids = spec.pids_limit + opts_.pids_overhead;
    limits.cpus = spec.cpus;
    limits.io = opts_.io.any() && (spec.workspace_quota_mb > 0 || s.own_paths);
    auto g = impl_->cgroups->create(s.id_ + "-" + std::to_string(s.generation), limits);
    if (!g)
      return g.error();
    if (!s.adopt_group(std::move(g.value())))
      return make_box_error(ec::box_error, "bwrap sandbox " + s.id_ + " was interrupted while it started");
    struct stat ws{};
    if (limits.io && !items.empty() && ::fstat(items.front().fd.get(), &ws) == 0)
      if (auto e = s.group->limit_io(major(ws.st_dev), minor(ws.st_dev), opts_.io))
        return e;
  }

  // bwrap takes its arguments from a descriptor (--args), so /proc/<pid>/cmdline inside
  // shows none of boxd's paths.
  auto args = build_args(spec, child_seccomp_fd, network, !s.skills_view.empty());
  // Options travel NUL-separated: a NUL inside one (a mount path, say) would add options.
  for (auto& a : args)
    if (a.find('\0') != std::string::npos)
      return make_box_error(ec::validation, "paths of the spec must not contain NUL characters");
  // Options go through the descriptor; bwrap takes the command from its command line.
  std::string packed;
  for (size_t i = 1; i + 1 < args.size(); ++i) {
    packed += args[i];
    packed.push_back('\0');
  }
  auto args_fd = memfd_with("boxrt-args", packed);
  if (!args_fd)
    return make_box_error(ec::box_error, std::string{"cannot pass bwrap its arguments: "} + std::strerror(errno));
  // Above every target number, so the launcher's dup2 onto 0..7 never clobbers one.
  for (auto* fd : {&seccomp_fd, &init_fd, &resolv_fd, &args_fd})
    if (*fd)
      fd->reset(high_fd(fd->release()));
  std::string bwrap = opts_.bwrap_path;
  std::string fd_arg = std::to_string(child_args_fd);
  std::string command = args.back();
  char* argv[] = {bwrap.data(), const_cast<char*>("--args"), fd_arg.data(), command.data(), nullptr};
  char* envp[] = {nullptr};

  // Staging: the unprivileged bwrap cannot reach a source whose parent folders it may
  // not traverse (a 0700 data folder, say). So the launcher, still root, makes itself a
  // mount namespace of its own (a slave: mounts from the host, such as skills, still
  // arrive; nothing goes back), mounts a tmpfs on the staging folder there and attaches
  // each source to <stage>/<n> (tenant sources as detached mount copies taken above,
  // boxd's own folders by path) and mounts the bounded tmpfs ones; bwrap binds from
  // those. Nothing of this is visible on the host, and it all goes when the sandbox ends.
  std::vector<std::string> stage_to;
  std::vector<const char*> stage_from, stage_tmpfs;
  std::vector<int> stage_tree;
  std::vector<char> stage_is_dir;
  for (size_t i = 0; i < items.size(); ++i) {
    stage_to.push_back(stage_root_ + "/" + std::to_string(i));
    stage_from.push_back(items[i].path.c_str());
    stage_tmpfs.push_back(items[i].tmpfs.empty() ? nullptr : items[i].tmpfs.c_str());
    stage_tree.push_back(items[i].tree.get());
    stage_is_dir.push_back(items[i].dir ? 1 : 0);
  }
  auto stage_root = stage_root_;

  int in_pipe[2], out_pipe[2], err_pipe[2], info_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0 || ::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0
      || ::pipe2(info_pipe, O_CLOEXEC) != 0)
    return make_box_error(ec::box_error, std::string{"cannot create pipes: "} + std::strerror(errno));
  for (int* p : {in_pipe, out_pipe, err_pipe, info_pipe}) {
    p[0] = high_fd(p[0]);
    p[1] = high_fd(p[1]);
  }
  unique_fd info_read{info_pipe[0]};
  std::vector<int> join = s.group ? s.group->join_fds() : std::vector<int>{};
  const int handed[][2] = {{seccomp_fd.get(), child_seccomp_fd}, {info_pipe[1], child_info_fd},
                           {args_fd.get(), child_args_fd},       {init_fd.get(), child_init_fd},
                           {resolv_fd.get(), child_resolv_fd},   {in_pipe[0], proto::channel_in},
                           {out_pipe[1], proto::channel_out}};

  pid_t pid = -1;
  impl_->launcher.run([&] {
  pid = ::fork();
  if (pid == 0) {
    // The launcher: plain system calls only, then exec bwrap.
    auto die = [&](const char* what) {
      (void)!::write(err_pipe[1], what, std::strlen(what));
      ::_exit(120);
    };
    for (int fd : join)
      if (::write(fd, "0", 1) != 1)
        die("bwrap launcher: cannot join the session's cgroup");
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    if (int fd = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC); fd >= 0) {
      // bwrap and boxrt-init are not what the out-of-memory killer should pick; the
      // command resets itself to 0. -999 (not -1000) keeps every process killable.
      (void)!::write(fd, "-999", 4);
      ::close(fd);
    }
    rlimit core{0, 0};
    ::setrlimit(RLIMIT_CORE, &core);
    rlimit fsize{512ull << 20, 512ull << 20};
    ::setrlimit(RLIMIT_FSIZE, &fsize);
    if (nproc > 0) {
      rlimit procs{nproc, nproc};
      ::setrlimit(RLIMIT_NPROC, &procs);
    }
    ::setsid();
    if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0
        || ::mount("boxrt-stage", stage_root.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755") != 0)
      die("bwrap launcher: cannot prepare the staging mounts");
    for (size_t i = 0; i < stage_to.size(); ++i) {
      if (stage_is_dir[i]) {
        if (::mkdir(stage_to[i].c_str(), 0755) != 0)
          die("bwrap launcher: cannot create a staging folder");
      } else {
        int f = ::open(stage_to[i].c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
        if (f < 0)
          die("bwrap launcher: cannot create a staging file");
        ::close(f);
      }
      // A tenant's source arrives as the detached copy taken in boxd (no path lookup
      // here, so nothing can be swapped in between); boxd's own folders by path; the
      // bounded tmpfs mounts are made here.
      bool staged = stage_tmpfs[i] != nullptr
                      ? ::mount("boxrt-tmp", stage_to[i].c_str(), "tmpfs", MS_NOSUID | MS_NODEV, stage_tmpfs[i]) == 0
                    : stage_tree[i] >= 0
                      ? ::move_mount(stage_tree[i], "", AT_FDCWD, stage_to[i].c_str(), MOVE_MOUNT_F_EMPTY_PATH) == 0
                      : ::mount(stage_from[i], stage_to[i].c_str(), nullptr, MS_BIND | MS_REC, nullptr) == 0;
      if (!staged)
        die("bwrap launcher: cannot stage a mount source");
    }
    // What the child keeps is exactly its stdio (nothing: the sandbox's reaper keeps it
    // for life), bwrap's errors and the handed descriptors, init's channel among them;
    // everything else is closed before the descriptor limit is lowered.
    int null = ::open("/dev/null", O_RDWR);
    if (null < 0 || ::dup2(null, 0) < 0 || ::dup2(null, 1) < 0 || ::dup2(err_pipe[1], 2) < 0)
      ::_exit(121);
    for (auto& [from, to] : handed)
      if ((from >= 0 ? ::dup2(from, to) : ::dup2(null, to)) < 0)
        ::_exit(121);
    ::close_range(proto::channel_out + 1, ~0u, 0);
    rlimit nofile{1024, 1024};
    ::setrlimit(RLIMIT_NOFILE, &nofile);
    if (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0)
      ::_exit(123);
    ::execve(bwrap.c_str(), argv, envp);
    ::_exit(127);
  }
  });
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ::close(info_pipe[1]);
  items.clear();
  if (s.group)
    s.group->close_join_fds();
  s.to_init.reset(in_pipe[1]);
  s.from_init.reset(out_pipe[0]);
  s.errors.reset(err_pipe[0]);
  if (pid < 0)
    return make_box_error(ec::box_error, std::string{"cannot start bwrap: "} + std::strerror(errno));
  if (!s.adopt_bwrap(pid))
    return make_box_error(ec::box_error, "bwrap sandbox " + s.id_ + " was interrupted while it started");

  std::string payload;
  auto deadline = clock_type::now() + std::chrono::milliseconds{opts_.start_timeout_ms};
  auto st = read_frame(s.from_init.get(), payload, deadline, nullptr, 4096);
  if (st != read_status::ok || proto::reader{payload}.field() != std::optional<std::string_view>{"ready"}) {
    auto why = read_available(s.errors.get());
    if (why.empty())
      why = st == read_status::timeout ? "no answer within " + std::to_string(opts_.start_timeout_ms) + " ms"
                                       : "it exited at start";
    return make_box_error(ec::box_error, "bwrap could not start the sandbox: " + why);
  }
  // bwrap wrote the sandbox's first pid to the info descriptor before init ran.
  s.ns_pid = child_pid_of(read_available(info_read.get()));
  if (s.ns_pid > 0)
    s.ns_pidfd.reset(static_cast<int>(::syscall(SYS_pidfd_open, s.ns_pid, 0)));
  // bwrap's errors matter only while it starts; a command could write to that pipe later
  // (through the reaper's /proc/1/fd/2).
  s.errors.reset();
  // init opened both control FIFOs before it said ready, so neither open blocks; once
  // boxd holds its ends the names go, so no command can open the channel itself.
  s.ctl_req.reset(high_fd(::open((s.io_dir + "/ctl.req").c_str(), O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)));
  s.ctl_rep.reset(high_fd(::open((s.io_dir + "/ctl.rep").c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)));
  if (!s.ctl_req || !s.ctl_rep)
    return make_box_error(ec::box_error, "bwrap sandbox " + s.id_ + " has no control channel");
  ::unlink((s.io_dir + "/ctl.req").c_str());
  ::unlink((s.io_dir + "/ctl.rep").c_str());
  // Every write to the sandbox is bounded by a deadline (write_frame), never blocking.
  ::fcntl(s.to_init.get(), F_SETFL, ::fcntl(s.to_init.get(), F_GETFL) | O_NONBLOCK);
  if (network) {
    // The namespace by descriptor, taken while the reaper's pidfd shows it alive: a pid
    // that died and was reused meanwhile cannot redirect the rules to another namespace.
    unique_fd netns;
    if (s.ns_pid > 0)
      netns.reset(::open(("/proc/" + std::to_string(s.ns_pid) + "/ns/net").c_str(), O_RDONLY | O_CLOEXEC));
    if (!netns || s.died())
      return make_box_error(ec::box_error, "bwrap sandbox " + s.id_ + " did not report its namespaces");
    auto stack = netstack::attach(netns.get(), destinations_to_refuse(opts_.listen_host), s.private_dir);
    if (!stack)
      return stack.error();
    s.net = std::move(stack.value());
  }
  return {};
}

box_error bwrap_backend::revive(bwrap_session& s) {
  if (!s.died())
    return {};
  spdlog::info("bwrap: the sandbox of session {} ({}) has died; starting a fresh one", s.spec.session_id, s.id());
  s.end_sandbox();
  if (auto e = launch(s)) {
    s.end_sandbox();
    return e;
  }
  return {};
}

result<exec_result> bwrap_backend::exec(backend_session& session, const box_spec& spec,
                                        const exec_limits& limits) {
  auto* s = dynamic_cast<bwrap_session*>(&session);
  if (s == nullptr)
    return make_box_error(ec::box_error, "bwrap backend got a session of another backend");
  std::lock_guard lock{s->exec_mtx};
  exec_result out;
  out.session_id = spec.session_id;
  out.backend_name = "bwrap";
  if (s->interrupted_) {
    out.exit_code = 137;
    out.stderr_text = "interrupted";
    return out;
  }
  if (!s->alive())
    return make_box_error(ec::box_error, "bwrap sandbox " + s->id() + " is not running");
  // A sandbox that died since the last exec (killed from outside, or its init gone) is
  // replaced before this exec reaches it, with the same workspace: nothing of this
  // exec has run yet, so it runs exactly once, in the fresh sandbox.
  if (auto e = revive(*s))
    return e;
  proto::exec_request req;
  req.workdir = spec.workdir;
  req.cmd = spec.cmd;
  req.max_output_bytes = limits.max_output_bytes;
  req.env = sandbox_env(spec.env);
  if (auto err = sync_skills(*s, spec))
    return err;
  auto oom_before = s->group ? s->group->oom_kills() : 0;
  auto t0 = clock_type::now();
  auto deadline = deadline_after(t0, spec.timeout_sec);
  std::string payload;
  auto st = write_frame(s->to_init.get(), proto::encode(req), deadline, &s->interrupted_);
  if (st == read_status::ok)
    st = read_frame(s->from_init.get(), payload, deadline, &s->interrupted_,
                    init_channel::max_reply_bytes(limits.max_output_bytes));
  auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0).count();
  auto oom = s->group && s->group->oom_kills() > oom_before;
  if (st == read_status::timeout) {
    // The whole process tree goes (the pid namespace with it); the session is over.
    s->kill_sandbox(true);
    out.status = exec_status::timed_out;
    out.exit_code = -1;
    out.stderr_text = "Command timed out after " + std::to_string(spec.timeout_sec) + " seconds.";
    out.duration_ms = elapsed;
    return out;
  }
  if (st == read_status::closed) {
    // The sandbox died under this exec: it reports that, and the next exec gets a
    // fresh sandbox of the same session.
    auto why = read_available(s->errors.get());
    s->kill_sandbox(false);
    if (s->interrupted_) {
      out.exit_code = 137;
      out.stderr_text = "interrupted";
      return out;
    }
    if (oom) {
      // The out-of-memory killer took the sandbox's own process: report it as such.
      out.exit_code = 137;
      out.stderr_text = "out of memory";
      out.duration_ms = elapsed;
      return out;
    }
    return make_box_error(ec::box_error, "bwrap sandbox " + s->id() + " exited during the command"
                                           + (why.empty() ? std::string{} : ": " + why));
  }
  auto reply = init_channel::accept_reply(payload, limits.max_output_bytes);
  if (!reply) {
    s->kill_sandbox(true);
    return make_box_error(ec::box_error, "bwrap sandbox " + s->id() + " sent a malformed reply");
  }
  out.exit_code = reply->exit_code;
  out.stdout_text = clip_captured(reply->stdout_kept, reply->stdout_total, limits.max_output_bytes);
  out.stderr_text = reply->error.empty()
                      ? clip_captured(reply->stderr_kept, reply->stderr_total, limits.max_output_bytes)
                      : reply->error;
  out.duration_ms = reply->duration_ms;
  if (oom) {
    if (out.exit_code != 0)
      out.exit_code = 137;
    out.stderr_text += out.stderr_text.empty() ? "out of memory" : "\nout of memory";
  }
  return out;
}

box_error bwrap_backend::sync_skills(bwrap_session& s, const box_spec& spec) {
  std::map<std::string, mount_spec> want;
  for (auto& m : spec.extra_mounts)
    if (auto name = skill_mount_name(spec, m); !name.empty())
      want[name] = m;
  if (want == s.skills_mounted)
    return {};
  if (s.skills_view.empty())
    return make_box_error(ec::box_error, "skill mounts need a writable workspace in this session");
  // Only the skills this exec asks for stay visible.
  for (auto it = s.skills_mounted.begin(); it != s.skills_mounted.end();) {
    auto w = want.find(it->first);
    if (w != want.end() && w->second == it->second) {
      ++it;
      continue;
    }
    auto point = s.skills_view + "/" + it->first;
    ::umount2(point.c_str(), MNT_DETACH);
    ::rmdir(point.c_str());
    it = s.skills_mounted.erase(it);
  }
  for (auto& [name, m] : want) {
    if (s.skills_mounted.contains(name))
      continue;
    auto source = beneath::open_trusted(m.host_path, O_PATH | O_DIRECTORY);
    if (!source)
      return make_box_error(ec::box_error, "skill package " + m.host_path + " does not exist");
    auto real = beneath::path_of(source.get());
    if (within(real, opts_.state_dir) || within(opts_.state_dir, real))
      return make_box_error(ec::validation, "skill mount " + m.host_path + " is blocked for security");
    auto point = s.skills_view + "/" + name;
    std::error_code err;
    fs::create_directories(point, err);
    if (m.mode == mount_mode::rw)
      hand_over(source.get(), s.uid, s.gid, m.host_path); // writable for the sandbox uid, as the spec says
    if (auto e = attach_bind(source.get(), m.host_path, point, m.mode == mount_mode::ro)) {
      ::rmdir(point.c_str());
      return e;
    }
    s.skills_mounted[name] = m;
  }
  return {};
}

result<std::shared_ptr<managed_process>> bwrap_backend::start_managed_process(backend_session& session,
                                                                             const process_spec& spec) {
  auto* s = dynamic_cast<bwrap_session*>(&session);
  if (s == nullptr)
    return make_box_error(ec::box_error, "bwrap backend got a session of another backend");
  if (!s->alive())
    return make_box_error(ec::box_error, "bwrap sandbox " + s->id() + " is not running");
  {
    // A running exec owns the sandbox (and notices its death itself): only when none
    // runs is a dead sandbox replaced here.
    std::unique_lock lock{s->exec_mtx, std::try_to_lock};
    if (lock.owns_lock())
      if (auto e = revive(*s))
        return e;
  }
  std::shared_lock state{s->sandbox_mtx};
  if (s->io_dir.empty() || !s->alive())
    return make_box_error(ec::box_error, "bwrap sandbox " + s->id() + " is not running");
  auto name = "p" + std::to_string(++s->process_seq);
  auto path = [&](const char* suffix) { return s->io_dir + "/" + name + suffix; };
  int in_rw = -1, out = -1, err = -1;
  auto cleanup = [&] {
    close_fd(in_rw);
    close_fd(out);
    close_fd(err);
    for (const char* suffix : {".in", ".out", ".err"})
      ::unlink(path(suffix).c_str());
  };
  // Our ends first, so the child's opens inside never block: the read ends of stdout
  // and stderr, and stdin read-write (a FIFO open for writing alone would wait for the
  // child).
  bool made = make_fifo(path(".in"), s->uid, s->gid) && make_fifo(path(".out"), s->uid, s->gid)
              && make_fifo(path(".err"), s->uid, s->gid);
  if (made) {
    in_rw = ::open(path(".in").c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    out = ::open(path(".out").c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    err = ::open(path(".err").c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  }
  if (!made || in_rw < 0 || out < 0 || err < 0) {
    auto why = std::string{std::strerror(errno)};
    cleanup();
    return make_box_error(ec::box_error, "cannot create the stdio of a managed process: " + why);
  }
  proto::spawn_request req;
  {
    std::lock_guard lock{s->ctl_mtx};
    req.id = ++s->ctl_seq;
  }
  req.name = name;
  req.command = spec.command;
  req.args = spec.args;
  req.cwd = spec.cwd;
  req.env = sandbox_env(spec.env);
  auto reply = s->control(proto::encode(req), req.id);
  if (!reply || !reply->error.empty()) {
    cleanup();
    return make_box_error(ec::box_error, "bwrap: cannot start managed process " + spec.process_id + ": "
                                           + (reply ? reply->error : reply.error().message));
  }
  // The child holds its end of stdin now: ours becomes write-only, so the child's end
  // of input and our EPIPE work as with a pipe (ENXIO: it is gone already).
  int in = ::open(path(".in").c_str(), O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  close_fd(in_rw);
  for (const char* suffix : {".in", ".out", ".err"})
    ::unlink(path(suffix).c_str()); // both ends are open; the names are not needed
  auto p = std::make_shared<bwrap_managed_process>(s->weak_from_this(), name, s->io_dir, in, out, err);
  s->add_process(p);
  spdlog::debug("bwrap: managed process {} started in {} as {} (pid {} inside)", spec.process_id, s->id(), name,
                reply->pid);
  return std::shared_ptr<managed_process>{std::move(p)};
}

void bwrap_backend::stop_session(backend_session& session) {
  if (auto* s = dynamic_cast<bwrap_session*>(&session))
    s->teardown();
}

result<std::shared_ptr<void>> bwrap_backend::acquire_skill_storage(const std::string& dir) {
  if (!unavailable_.empty() || opts_.skills_tenants_dir.empty())
    return std::shared_ptr<void>{};
  fs::path p{dir};
  auto name = p.filename().string();
  if (fs::path{opts_.skills_tenants_dir}.lexically_normal() != p.parent_path().lexically_normal()
      || managed_tenant_name(opts_.skills_tenants_dir + "/" + name).empty())
    return std::shared_ptr<void>{};
  // The store writes as root; a session hands the packages it mounts to its own uid.
  auto lease = impl_->quota->acquire("skills-" + name, dir, opts_.skills_quota_mb, 0, 0);
  if (!lease)
    return lease.error();
  return std::shared_ptr<void>{std::move(lease.value())};
}

void bwrap_backend::cleanup_orphans() {
  if (!unavailable_.empty())
    return;
  // Everything an earlier run of this boxd left: its sandboxes (all inside its own
  // cgroups), its quota mounts, its private session folders.
  if (impl_->cgroups)
    impl_->cgroups->remove_all();
  impl_->quota->cleanup_recorded();
  unmount_and_remove(opts_.state_dir + "/sessions");
  unmount_and_remove(opts_.state_dir + "/probe");
}

std::string bwrap_backend::self_test() {
  if (!unavailable_.empty())
    return unavailable_;
  box_spec spec;
  spec.session_id = "self-test";
  spec.cmd = "true";
  spec.timeout_sec = 10;
  auto s = start(spec, true);
  if (!s)
    return s.error().message;
  auto r = exec(**s, spec, exec_limits{});
  stop_session(**s);
  if (!r)
    return r.error().message;
  if (r->exit_code != 0)
    return "a probe sandbox could not run `true`: " + r->stderr_text;
  return {};
}

readiness_report bwrap_backend::probe_readiness(const std::string& workspace_path, bool strict) {
  (void)workspace_path;
  (void)strict;
  readiness_report r;
  r.backend_name = "bwrap";
  r.isolating = true;
  for (auto key : backend_readiness_keys)
    r.details[std::string{key}] = false;
  r.available = unavailable_.empty();
  if (!r.available) {
    r.error = unavailable_;
    return r;
  }
  r.limits_mechanism = impl_->cgroups ? impl_->cgroups->mechanism() : "rlimit";
  std::lock_guard lock{impl_->probe_mtx};
  // Storage: kernel facts, probed once (mkfs and mount are not free).
  // A failed storage probe is tried again next time; a success stands.
  if (!impl_->storage_ok || !*impl_->storage_ok) {
    impl_->storage_ok = impl_->quota->probe(opts_.state_dir + "/probe/storage", &impl_->storage_reason);
    if (!*impl_->storage_ok)
      spdlog::warn("bwrap: hard quotas are not available: {}", impl_->storage_reason);
  }
  // A real throw-away sandbox: marker file through the workspace bind, its own
  // namespaces, no network, sized /tmp.
  auto dir = opts_.state_dir + "/probe/ws-" + std::to_string(impl_->next_id++);
  std::error_code err;
  fs::create_directories(dir, err);
  box_spec spec;
  spec.session_id = "readiness";
  spec.host_path = dir;
  spec.host_path_mode = mount_mode::rw;
  spec.memory_mb = 64;
  spec.pids_limit = 16;
  spec.timeout_sec = 10;
  spec.cmd = "echo readiness > /workspace/.mounted; for n in net mnt pid user uts ipc; do readlink "
             "/proc/self/ns/$n; done; grep -c . /proc/net/dev; "
             "touch /probe-rootfs 2>/dev/null && echo rootfs-writable || echo rootfs-readonly; "
             "touch /dev/probe 2>/dev/null && echo dev-writable || echo dev-readonly; "
             "stat -f -c '%b %S %c' /tmp /home /dev/shm";
  bool limits_held = false;
  bool io_read_back = false;
  auto probe = [&]() -> std::string {
    auto started = start(spec, true); // the probe's workspace is boxd's own folder
    if (!started)
      return started.error().message;
    auto res = exec(**started, spec, exec_limits{});
    // The limits hold only if the sandbox really runs inside its group, limited.
    if (auto* bs = dynamic_cast<bwrap_session*>(started->get()); bs && bs->group) {
      limits_held = bs->group->process_count() >= 2
                    && bs->group->pids_max() == std::to_string(spec.pids_limit + opts_.pids_overhead);
      // I/O caps as the kernel reads them back (configured ones only).
      io_read_back = opts_.io.any() && !bs->group->io_limits().empty();
    }
    stop_session(**started);
    if (!res)
      return res.error().message;
    if (res->exit_code != 0)
      return "probe command failed: " + res->stderr_text;
    std::vector<std::string> lines;
    std::istringstream in{res->stdout_text};
    for (std::string l; std::getline(in, l);)
      lines.push_back(l);
    if (lines.size() < 12)
      return "probe output incomplete";
    const char* names[] = {"net", "mnt", "pid", "user", "uts", "ipc"};
    bool all_differ = true;
    for (int i = 0; i < 6; ++i) {
      auto host = fs::read_symlink(std::string{"/proc/self/ns/"} + names[i], err).string();
      if (host.empty() || lines[i] == host)
        all_differ = false;
      if (i == 0)
        r.details[readiness::network_isolation] = !host.empty() && lines[0] != host
                                         && lines[6] == "3"; // header lines + lo only
    }
    r.details[readiness::namespace_isolation] = all_differ;
    std::ifstream marker{dir + "/.mounted"};
    std::string text;
    std::getline(marker, text);
    r.details[readiness::mount_isolation] = text == "readiness" && lines[7] == "rootfs-readonly";
    // Every writable tmpfs is capped in bytes and inodes, and /dev takes no files.
    bool bounded = lines[8] == "dev-readonly";
    auto wanted = ephemeral_mounts(opts_, spec.memory_mb);
    for (size_t i = 0; i < wanted.size(); ++i) {
      std::istringstream fsline{lines[9 + i]};
      int64_t blocks = 0, bsize = 0, inodes = 0;
      fsline >> blocks >> bsize >> inodes;
      bounded = bounded && blocks > 0 && bsize > 0 && blocks * bsize <= wanted[i].bytes && inodes > 0
                && inodes <= wanted[i].inodes;
    }
    r.details[readiness::bounded_ephemeral_storage] = bounded;
    return {};
  };
  auto error = probe();
  fs::remove_all(dir, err);
  if (!error.empty()) {
    r.error = error;
    spdlog::warn("bwrap: readiness probe failed: {}", error);
  }
  r.details[readiness::resource_limits] = impl_->cgroups != nullptr && error.empty() && limits_held;
  r.details["io_limits"] = io_read_back && error.empty();
  r.details[readiness::cgroup_v2] = r.details[readiness::resource_limits] && impl_->cgroups->kind() == cgroup_tree::version::v2;
  bool storage = *impl_->storage_ok;
  r.details[readiness::hard_workspace_quota] = storage;
  r.details[readiness::inode_quota] = storage;
  r.details[readiness::hard_skill_storage_quota] = storage && !opts_.skills_tenants_dir.empty();
  if (!r.details[readiness::bounded_ephemeral_storage])
    r.details[readiness::bounded_ephemeral_storage] = false;
  return r;
}

} // namespace boxrt
