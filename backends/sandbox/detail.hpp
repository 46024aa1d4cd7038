// Internal to backends/sandbox/: the session and managed-process classes, the launcher
// thread, the host state the backends of one state directory share, and the helpers that
// backend.cpp (exec, skills view, readiness), launch.cpp (sources, staging, fork and the
// init handshake), session.cpp (session teardown, control channel, managed processes)
// and the drivers' argument builders (backends/bwrap/args.cpp, backends/nsjail/args.cpp)
// share.
#pragma once

#include "backends/sandbox/driver_args.hpp"
#include "backends/sandbox/namespaces.hpp"
#include "backends/sandbox/sandbox.hpp"

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
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
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

#include "backends/linux/cgroup.hpp"
#include "backends/linux/child.hpp"
#include "backends/linux/deadline.hpp"
#include "backends/init/init_channel.hpp"
#include "backends/init/init_protocol.hpp"
#include "backends/linux/beneath.hpp"
#include "backends/linux/netstack.hpp"
#include "backends/linux/uids.hpp"
#include "messages/base/unique_fd.hpp"
#include "backends/linux/managed.hpp"
#include "backends/linux/output.hpp"
#include "backends/linux/quota.hpp"
#include "backends/readiness_keys.hpp"
#include "backends/linux/seccomp.hpp"
#include "messages/base/pytext.hpp"
#include "messages/tenancy.hpp"

namespace boxrt {

namespace fs = std::filesystem;
namespace proto = init_protocol;
using init_channel::read_frame;
using init_channel::read_status;
using init_channel::write_frame;
using clock_type = std::chrono::steady_clock;

namespace sandbox_detail {


/// How long a control request (spawn, kill) may wait for boxrt-init's reply.
inline constexpr auto control_timeout = std::chrono::seconds{10};

/// The environment every command sees, then the spec's own variables.
std::vector<std::string> sandbox_env(const std::map<std::string, std::string>& env);

/// A FIFO `name` in the folder `dir` that the sandbox uid may open, made fresh: whatever
/// the sandbox left under that name (it owns the folder) is removed first, never followed.
bool make_fifo(int dir, const std::string& name, uint32_t uid, uint32_t gid);

std::string find_on_path(const std::string& name);

std::string self_dir();

/// Moves `fd` to a number >= 16 (close-on-exec), so the launcher's dup2 onto 0..10
/// never clobbers another descriptor it still needs.
int high_fd(int fd);

void close_fd(int& fd);

std::string read_available(int fd);

/// Gives the folder `fd` and everything below it to the sandbox uid, so the
/// unprivileged command can write what the spec says it may write (descriptor walk:
/// a sandbox that swaps a folder for a link meanwhile redirects nothing).
void hand_over(int fd, uint32_t uid, uint32_t gid, const std::string& shown, int64_t host_gid = -1);

/// The "child-pid" of bwrap's --info-fd JSON, or -1.
pid_t child_pid_of(const std::string& info);

/// The one child of process `pid` (nsjail's jail: the sandbox's pid 1), from
/// /proc/<pid>/task/<pid>/children, or -1.
pid_t only_child_of(pid_t pid);

/// Why the spec's mount targets cannot be made safely ("" when they can): a target
/// inside another (execution-scoped mounts aside, which go through a view) or inside /,
/// /proc, /dev or /.boxrt. A BoxValidationError, before anything starts.
box_error mount_targets_error(const box_spec& spec);



/// Runs `fn` in a helper process that joined the mount namespace of the process `pidfd`
/// refers to (setns needs a caller with a file system context of its own); its result is
/// fn's (an errno value, 0 for success), or the errno of the join (ESRCH once that
/// process is gone). The helper shares boxd's memory and descriptor table: `fn` makes
/// system calls only, allocates nothing, and closes every descriptor it opens. Blocking:
/// pool only.
int in_mount_namespace(int pidfd, const std::function<int()>& fn);

/// Runs `body(arg)` in a clone made with `flags` (CLONE_VFORK among them, so the caller
/// waits) on a stack of its own, and reaps it: its exit status, -1 with errno when it
/// could not be made, -2 when a signal ended it.
int run_clone(int (*body)(void*), void* arg, int flags);

/// True when the spec's host path is mounted as the workspace (one is set and its mode
/// is not none); else the session's own folder is the workspace.
inline bool mounts_host_path(const box_spec& spec) {
  return !spec.host_path.empty() && spec.host_path_mode != mount_mode::none;
}

/// A folder opened O_PATH at `path` (from `at`) without following any link, symlink or
/// magic, plus `resolve` (RESOLVE_BENEATH, RESOLVE_NO_XDEV). -1 with errno on failure.
/// For a forked helper inside a sandbox's mount namespace.
int open_dir_no_links(int at, const std::string& path, uint64_t resolve = 0);

/// True when `p` is `base` or lies below it.
bool within(const std::string& p, const std::string& base);

/// The skill name when `m` is a skill mount: `<mount_path>/.skills/<name>`, one level
/// deep. Skill mounts come and go per exec without a new sandbox (see docs/sandbox.md).
std::string skill_mount_name(const box_spec& spec, const mount_spec& m);

/// True when a clone of boxd may unshare its descriptor table and take boxd's
/// descriptors by number (pidfd_getfd): the launcher then starts sharing boxd's table
/// rather than copying it, a cost that grows with every live sandbox.
bool launcher_can_take_fds();

/// A session's own file system: one small tmpfs, mounted nowhere in boxd's namespace,
/// holding the views' folders (`skills`, `artifacts`, root's) and the io folder (`io`, the
/// sandbox uid's, 0700), each bound where the sandbox shows it. One per sandbox, not
/// three: every file system instance costs the kernel memory per memory cgroup.
inline result<unique_fd> make_session_fs() {
  return detached_tmpfs("size=1216k,nr_inodes=6144,mode=0755", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
}

/// A detached copy of the mount tree at `source`, read-only from the start when `ro`,
/// private (a copy of a shared host mount would join its peer group, so every mount
/// event of the host under it would visit every copy): what a launch stages and what a
/// view attaches inside a sandbox (mount_in_view).
result<unique_fd> detached_copy(int source, const std::string& shown, bool ro);

/// Detaches every mount at or below `dir`, then removes `dir` (a folder of boxd's state)
/// by descriptor: the removal never enters a mount, so it cannot reach into a skill
/// package or a workspace, and a failure is logged, not ignored. True when `dir` is
/// gone (or never was): what a session's uid may be freed by.
bool unmount_and_remove(const std::string& dir);


/// What every backend object on one state directory shares inside boxd: the folder's
/// lock, the quota images and their mounts, the uid allocation, the cgroup tree, the
/// seccomp program and boxrt-init's image. box_init may select nsjail while the bwrap
/// backend still exists (a skill store may hold it); both then work on the same images
/// and uids, and orphans are cleaned once, by the first.
struct host_state {
  /// The shared state of `o.state_dir`, made by the first caller with its options;
  /// null with `why` when the folder cannot be used.
  static std::shared_ptr<host_state> open(const sandbox_options& o, std::string& why);
  ~host_state();

  std::string state_dir;
  int lock_fd = -1;
  std::unique_ptr<cgroup_tree> cgroups;
  std::string cgroup_reason;
  std::unique_ptr<loop_quota> quota;
  /// Shared with the sessions: one may outlive the backend (its release still counts).
  std::shared_ptr<uid_allocator> uids;
  std::string seccomp;
  /// boxrt-init, read once: each sandbox gets a copy on its own root (bwrap --file) or
  /// is started from it (nsjail --execute_fd), so the build folder's path never shows.
  unique_fd init_image;
  std::atomic<bool> orphans_cleaned{false};
  /// Which backend of this folder runs the warm pool: the last one to start it.
  std::atomic<uint64_t> pool_generation{0};
};

/// The workspace's managed tenant folder name ("ws-<24 hex>") when `host_path` is one.
std::string managed_tenant_name(const std::string& host_path);

} // namespace sandbox_detail

using namespace sandbox_detail;

// -- session ----------------------------------------------------------------------------

/// A view of per-exec mounts: a folder `sub` of the session's file system (make_session_fs),
/// bound at `target` inside the sandbox and mounted nowhere on the host, holding one
/// mount point per name. boxd makes the mount points through the file system's root and
/// attaches each mount inside the sandbox's own namespace (mount_in_view), on both
/// drivers: nothing of it is in boxd's namespace or in any copy of it.
struct mount_view {
  std::string sub;    // "" = the sandbox has none
  std::string target;
  /// Name -> what is mounted there now.
  std::map<std::string, mount_spec> mounted;
};

class sandbox_managed_process;

class sandbox_session final : public backend_session, public std::enable_shared_from_this<sandbox_session> {
 public:
  sandbox_session(std::string id, box_spec spec, bool own_paths)
    : id_(std::move(id)), spec(std::move(spec)), own_paths(own_paths) {}
  ~sandbox_session() override { teardown(); }

  std::string id() const override { return id_; }
  bool alive() const override { return alive_.load() && !interrupted_.load(); }

  /// Called from an actor thread: one round of SIGKILL, never a wait. The teardown on
  /// the pool makes sure nothing is left.
  void interrupt() override;

  /// Installs what a launch made: the cgroup, then the started driver (bwrap, nsjail). Returns false
  /// when the session was interrupted meanwhile (the caller kills what it made).
  bool adopt_group(std::unique_ptr<cgroup_tree::group> g) {
    std::lock_guard lock{kill_mtx_};
    group = std::move(g);
    return !interrupted_;
  }
  bool adopt_driver(pid_t p) {
    std::lock_guard lock{kill_mtx_};
    pid = p;
    if (interrupted_)
      kill_driver();
    return !interrupted_;
  }

  /// SIGKILLs every process of the sandbox (its cgroup, and the driver) and waits
  /// until the group is empty (bounded). `over`: the session ends with it (a timeout, a
  /// broken channel); else the next exec starts a fresh sandbox. Blocking: pool only.
  void kill_sandbox(bool over);

  /// True once the sandbox's driver process has exited (it was killed, or init died and
  /// took it along) or its reaper has. Non-blocking.
  bool died() const;

  /// Ends the sandbox itself and what each launch makes (processes, pipes, cgroup,
  /// network stack, io folder, skills view) and keeps what outlives a sandbox: the
  /// private workspace, the quota leases and the uid. Idempotent.
  void end_sandbox();

  /// Ends the sandbox and frees everything it held. Idempotent.
  void teardown();
  /// Runs `fn` on the workspace's root folder (an O_PATH descriptor; -1 before the first
  /// launch or after the teardown), holding the teardown off meanwhile: a quota image is
  /// never unmounted under a file action.
  template <class F>
  auto with_workspace(F&& fn) {
    std::lock_guard lock{teardown_mtx_};
    unique_fd root;
    if (!torn_down_ && prepared)
      root = workspace_root_locked();
    return fn(root.get());
  }
  unique_fd workspace_root_locked() const;

  /// What the sandbox uses now (backend::session_usage). Waits for a teardown in
  /// progress, and reads nothing after it.
  boxrt::backend::usage usage();

  /// "bwrap sandbox <id>": how errors name this sandbox.
  std::string what() const { return driver + " sandbox " + id_; }

  std::string id_;
  /// The driver's name ("bwrap", "nsjail").
  std::string driver;
  /// Keeps the quota images' owner and the uid allocation alive as long as the session.
  std::shared_ptr<host_state> host;
  /// The spec the session started with: every fresh sandbox of it is made from this.
  box_spec spec;
  bool own_paths = false;
  std::atomic<bool> alive_{true};
  std::atomic<bool> interrupted_{false};
  /// The driver process (bwrap or nsjail, a child of boxd, reaped by end_sandbox only).
  pid_t pid = -1;
  /// The sandbox's first process as the host sees it (bwrap's --info-fd child-pid,
  /// nsjail's one child): the way into its namespaces.
  pid_t ns_pid = -1;
  unique_fd ns_pidfd;
  /// boxrt-init's exec channel, the host's end of one stream socket (requests out,
  /// replies in), non-blocking. With ns_pidfd and ctl it is all a live sandbox holds
  /// of boxd's descriptors: three each (a quota image's workspace adds one).
  unique_fd channel;
  std::unique_ptr<cgroup_tree::group> group;
  std::unique_ptr<netstack> net;
  std::vector<std::shared_ptr<loop_quota::lease>> leases;
  /// The root of the workspace's quota image, opened (O_PATH) right after it was
  /// mounted; closed before the leases go, since it would keep the mount busy.
  unique_fd workspace_fd;
  /// The workspace's skill storage image, mounted by the first exec that mounts a skill
  /// of boxd's own store (sync_view), never on the start path.
  std::shared_ptr<loop_quota::lease> skill_lease;
  /// Quota leases and the uid are taken by the first launch and kept by later ones.
  bool prepared = false;
  /// Set while the uid is this session's own (not a workspace's): gives it back at the
  /// teardown, told whether the private tree is gone (uid_allocator::release).
  std::function<void(bool tree_removed)> release_uid;
  /// `<state>/sessions/<sid>`: the private workspace, the io folder, the skills view.
  std::string private_dir;
  /// Skills (`<mount_path>/.skills/<name>`) and content-addressed artifacts
  /// (`/opt/langbot-artifacts/<hex>`), mounted per exec through a view each.
  mount_view skills;
  mount_view artifacts;
  /// Host uid and gid the sandbox runs as.
  uint32_t uid = 0, gid = 0;
  /// How many sandboxes this session has had (a dead one is replaced on the next exec).
  int generation = 0;
  /// One exec at a time (the session actor serializes too; this guards the pipes).
  std::mutex exec_mtx;
  /// What a launch makes and end_sandbox takes down (io folder, skills view, pipes):
  /// exclusive for those two, shared for a managed-process start beside an exec.
  std::shared_mutex sandbox_mtx;

  /// The session's file system (make_session_fs: the views' folders and the io folder
  /// `io`, bound at /.boxrt/io), mounted only inside the sandbox and on the staging
  /// folder `fs_at` of the driver's own namespace, where open_session_fs finds it again
  /// by its device and inode (fs_dev 0: no sandbox). Not held between uses.
  std::string fs_at;
  dev_t fs_dev = 0;
  ino_t fs_ino = 0;
  /// The root of the session's file system, opened anew through the driver's namespace
  /// (null when the sandbox or its driver is gone). A managed process keeps its own.
  std::shared_ptr<unique_fd> open_session_fs() const;
  /// boxrt-init's control channel (the host's end of a second socket), guarded by
  /// ctl_mtx; one request at a time.
  std::mutex ctl_mtx;
  unique_fd ctl;
  int64_t ctl_seq = 0;
  /// Names the managed processes p1, p2, ...
  std::atomic<uint64_t> process_seq{0};

  /// Sends one control request and waits for its reply (stale replies of requests
  /// that timed out are skipped). Blocking, bounded by control_timeout.
  result<proto::control_reply> control(std::string frame, int64_t id);

  void add_process(const std::shared_ptr<sandbox_managed_process>& p) {
    std::lock_guard lock{procs_mtx_};
    std::erase_if(procs_, [](auto& w) { return w.expired(); });
    procs_.push_back(p);
  }

  /// Tells each managed process its sandbox is gone (defined after that class).
  void sandbox_ended();

 private:
  /// SIGKILL to the driver: boxd's child, reaped only under kill_mtx_, which is held
  /// here, so the pid is still the driver's (a zombie at worst).
  void kill_driver() {
    if (pid > 0)
      ::kill(pid, SIGKILL);
  }

  std::mutex teardown_mtx_;
  std::mutex procs_mtx_;
  std::vector<std::weak_ptr<sandbox_managed_process>> procs_;
  /// Guards `group`, `pid` and `pidfd` between interrupt (actor thread) and the pool.
  std::mutex kill_mtx_;
  bool torn_down_ = false;
};

/// A managed process inside a sandbox: boxrt-init's child, reached through FIFOs
/// of the session's io folder. Its exit code comes from the `<name>.exit` file init
/// writes; when the sandbox itself ends first, the code is 137 (killed with it).
class sandbox_managed_process final : public fd_managed_process {
 public:
  sandbox_managed_process(std::weak_ptr<sandbox_session> session, std::string name, std::shared_ptr<unique_fd> io,
                        int in_fd, int out_fd, int err_fd)
    : fd_managed_process{in_fd, out_fd, err_fd}, session_{std::move(session)}, name_{std::move(name)},
      io_{std::move(io)}, exit_name_{"io/" + name_ + ".exit"} {}

  ~sandbox_managed_process() override {
    if (!exit_code())
      send_signal(SIGKILL);
    ::unlinkat(io_->get(), exit_name_.c_str(), 0);
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

  void send_signal(int sig) override;

 private:
  /// The code init wrote; the file belongs to the sandbox uid, so it is read with care
  /// (no symlink, no FIFO, a number only).
  std::optional<int64_t> read_exit_file() const;

  std::weak_ptr<sandbox_session> session_;
  std::string name_;
  /// The session file system the process's sandbox had (held: its exit file outlives a
  /// revive).
  std::shared_ptr<unique_fd> io_;
  std::string exit_name_;
  std::atomic<bool> ended_{false};
};

// -- backend ----------------------------------------------------------------------------

/// The one thread that forks sandboxes. A parent-death signal (bwrap's
/// --die-with-parent, the nsjail launcher's own) fires when the *thread* that forked it ends, and worker-pool threads end
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

struct sandbox_backend::impl {
  launcher_thread launcher;
  /// The warm pool (sandbox_backend::fill_pool keeps it at opts.warm_pool).
  struct {
    mutable std::mutex mtx;
    mutable std::condition_variable cv;
    std::deque<std::shared_ptr<sandbox_session>> ready;
    size_t starting = 0;
    /// First uses waiting for a sandbox that is starting (never more than `starting`).
    size_t waiting = 0;
    uint64_t adopted = 0;
    uint64_t empty = 0;
    bool stop = false;
    std::thread filler;
  } pool;
  std::shared_ptr<host_state> host;
  /// The mount namespace every launch copies (make_template_namespace), and where
  /// boxrt-init waits in it for bwrap to bind.
  unique_fd template_ns;
  std::string init_file;
  /// Whether the launcher may take boxd's descriptors by number (launcher_can_take_fds)
  /// instead of starting from a copy of boxd's whole table.
  bool launcher_takes_fds = false;
  std::atomic<uint64_t> next_id{1};
  std::mutex probe_mtx;
  std::optional<bool> storage_ok;
  std::string storage_reason;
};

} // namespace boxrt
