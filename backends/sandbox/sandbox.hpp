// The sandbox backend: one sandbox per physical session, kept warm by boxrt-init
// (backends/init/boxrt_init.cpp) which runs every exec inside the sandbox's existing
// namespaces, made by one of two drivers: bubblewrap (`bwrap`, the default) or nsjail.
// Both get the same walls from the same code: limits through cgroups, hard workspace
// quotas through loop-mounted ext4 images, bounded tmpfs mounts, the same seccomp filter,
// all capabilities dropped and the command running as the workspace's own unprivileged
// host uid. Only the argument list and the launch differ (backends/bwrap/args.cpp,
// backends/nsjail/args.cpp). See docs/sandbox.md.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <sys/types.h>
#include <vector>

#include "backends/backend.hpp"
#include "backends/linux/cgroup.hpp"

namespace boxrt {

/// The default sandbox uid range: 65,536 uids above every range Debian hands out for
/// /etc/subuid by default, and outside systemd's (0x70000000...).
inline constexpr uint32_t default_sandbox_uid_first = 0x70000000u;
inline constexpr uint32_t default_sandbox_uid_last = 0x7000ffffu;

class loop_quota;
class sandbox_session;
struct mount_view;

/// The program that makes the namespaces of a sandbox.
enum class sandbox_driver : uint8_t { bwrap, nsjail };

/// "bwrap" or "nsjail": the backend's name on the wire.
const char* driver_name(sandbox_driver d);

struct sandbox_options {
  sandbox_driver driver = sandbox_driver::bwrap;
  /// bubblewrap; "" = look up `bwrap` on PATH.
  std::string bwrap_path;
  /// nsjail (driver nsjail): the path locate_nsjail found.
  std::string nsjail_path;
  /// boxrt-init; "" = `boxrt-init` beside the running executable.
  std::string init_path;
  /// This boxd's own state: session records, quota images, mount records, lock.
  std::string state_dir = std::string{default_host_root} + "/state";
  /// Host uids the sandboxed commands run as (server.sandbox_uid_range): each workspace
  /// gets one of its own, recorded in `<state_dir>/uids.sqlite` and as the owner of its
  /// folder; a session without a host path gets one for itself. Never 0.
  uint32_t uid_first = default_sandbox_uid_first;
  uint32_t uid_last = default_sandbox_uid_last;
  /// Folders whose subfolders are workspaces (the default workspace's `tenants`):
  /// scanned at start for uids of trees made by versions that kept no uid record.
  std::vector<std::string> workspace_roots;
  /// The trusted host's group (server.host_gid): read and write on every tenant tree
  /// through an ACL, while the trees are closed to everyone else. -1: no such group.
  int64_t host_gid = -1;
  /// Lets the launcher take boxd's descriptors by number where the kernel permits it
  /// (launcher_can_take_fds); false makes it start from a copy of boxd's table, as it
  /// must where pidfd_getfd is refused (tests cover both).
  bool launcher_takes_fds = true;
  /// Where boxd listens: refused from network-on sandboxes when it is not loopback.
  std::string listen_host;
  /// Egress policy of network-on sandboxes (box.network_*; backends/linux/egress.hpp):
  /// handed to the process's egress service when the backend is made.
  network_settings network;
  /// Disk I/O caps per session on its quota image's loop device (box.limits.io_*; off
  /// by default). Sessions without a quota image are not capped.
  io_caps io;
  /// Largest sizes of the private tmpfs mounts (/tmp, /home, /dev/shm). Each also has
  /// an inode cap, and together they are scaled down to half of the session's
  /// memory_mb: tmpfs pages are charged to the sandbox's memory limit, so a full tmpfs
  /// must fail with ENOSPC, never end in an out-of-memory kill.
  int64_t tmp_size_mb = 64;
  int64_t home_size_mb = 16;
  int64_t shm_size_mb = 64;
  /// The skills root's tenants folder, where a skill store asks for its storage; "" =
  /// no skill-storage images. The images are mounted at `<state_dir>/skills/tenants/
  /// ws-<24 hex>` (skill_storage_dir), never here: LangBot 4.11 keeps its own skill
  /// store in this folder.
  std::string skills_tenants_dir;
  int64_t skills_quota_mb = 64;
  /// cgroup root (v2 when it delegates memory, pids and cpu, else v1 hierarchies under
  /// it); "" = no cgroups (then RLIMIT_NPROC with a uid per session).
  std::string cgroup_root = "/sys/fs/cgroup";
  /// Processes of the sandbox itself (bwrap or nsjail outside, init's reaper and init
  /// inside) added to pids_limit.
  int64_t pids_overhead = 3;
  /// How long a sandbox may take to report ready.
  int start_timeout_ms = 15000;
  /// Sandboxes started ahead without a workspace (box.limits.warm_pool; 0 = none): a
  /// first use in a new workspace that fits (see pool_fits) adopts one instead of
  /// starting a sandbox. The pool fills once cleanup_orphans has run.
  int warm_pool = 0;
  /// A cluster node (docs/cluster.md "Storage"): names its cgroups with `cgroup_tag` (the
  /// node id; nodes may share one state path, each in its own mount namespace), keeps
  /// quota images in `images_dir` (shared storage) with ext4 multi-mount protection, and
  /// reserves uids cluster-wide through `reserve_uid` / `release_uid`.
  std::string cgroup_tag;
  std::string images_dir;  // "" = <state_dir>/images
  bool multi_mount_protection = false;
  std::function<int(uint32_t, const std::string&, bool)> reserve_uid;
  std::function<void(uint32_t, const std::string&)> release_uid;
};

/// What the warm pool holds and has done (tests, logs).
struct warm_pool_status {
  size_t ready = 0;
  size_t starting = 0;
  uint64_t adopted = 0;
  uint64_t empty = 0;
  /// The first process of each ready sandbox (sandbox_pid).
  std::vector<pid_t> pids;
};

/// Hands box.network_* to the process's egress service (its default policy, resolvers
/// and limits; workspaces' own policies stay).
void configure_egress(const network_settings& n);

class sandbox_backend : public backend {
 public:
  explicit sandbox_backend(sandbox_options options);
  ~sandbox_backend() override;

  /// Why this backend cannot run here ("" when it can): the driver or boxrt-init
  /// missing, not root, the state directory owned by another live boxd.
  const std::string& unavailable_reason() const { return unavailable_; }

  const sandbox_options& options() const noexcept { return opts_; }

  /// Starts a throw-away sandbox and runs `true` in it; "" when that works, else why.
  /// Blocking (about 15 ms).
  std::string self_test();

  /// The host uid a session's commands run as (0 for another backend's session).
  uint32_t sandbox_uid(const backend_session& session) const;

  /// A session's I/O caps as its cgroup reads them back ("" when it has none).
  std::string io_limits(const backend_session& session) const;

  /// The host pid of the sandbox's first process (boxrt-init's reaper, pid 1 inside, on
  /// both drivers; the serving init is its child), or -1. It changes when a dead
  /// sandbox is replaced.
  pid_t sandbox_pid(const backend_session& session) const;

  std::string name() const override { return driver_name(opts_.driver); }
  bool isolating() const override { return true; }
  readiness_report probe_readiness(const std::string& workspace_path, bool strict) override;
  result<std::shared_ptr<backend_session>> start_session(const box_spec& spec) override;
  result<exec_result> exec(backend_session& session, const box_spec& spec,
                           const exec_limits& limits) override;
  /// Live: init sends the output as it comes, and reads no more of the command's pipes
  /// while a frame waits for the sink's room (init_protocol.hpp "stream").
  result<stream_end> exec_stream(backend_session& session, const box_spec& spec,
                                 const exec_limits& limits, const stream_params& params,
                                 exec_sink& sink) override;
  /// On the workspace's host folder (the quota image's root when it has one), as the
  /// sandbox uid; a read-only host path takes no change.
  result<file_result> file_action(backend_session& session, const file_op& op, const files::limits& lim) override;
  /// Runs the process inside the session's sandbox (its namespaces, cgroup, uid and
  /// seccomp filter) as a child of boxrt-init, through FIFOs of the session's io folder.
  /// `memory_mb` is not applied: the session's memory limit covers it.
  result<std::shared_ptr<managed_process>> start_managed_process(backend_session& session,
                                                                 const process_spec& spec) override;
  void stop_session(backend_session& session) override;
  usage session_usage(backend_session& session) override;
  /// Cleans what an earlier run left (once per state directory), then starts filling
  /// the warm pool.
  void cleanup_orphans() override;
  void shutdown() override { stop_pool(); }

  /// The warm pool now.
  warm_pool_status pool_status() const;
  /// This backend's cgroup folders (empty without cgroups) and mount-record folder:
  /// what a cluster node's watchdog fences (docs/cluster.md "Failing closed").
  std::vector<std::string> cgroup_dirs() const;
  std::string mount_records_dir() const { return opts_.state_dir + "/mounts"; }
  /// Every uid this state folder's record holds, with its holder (a workspace's path or
  /// "session:<sid>"): what a cluster node keeps reserved (node::reconcile_uids).
  std::map<uint32_t, std::string> held_uids() const;

  /// Waits until `n` warm sandboxes are ready, at most `timeout`; false on the timeout.
  bool wait_pool_ready(size_t n, std::chrono::milliseconds timeout) const;

  /// Waits until `done` holds for the pool's status (checked at each change), at most
  /// `timeout`; false on the timeout.
  bool wait_pool(const std::function<bool(const warm_pool_status&)>& done, std::chrono::milliseconds timeout) const;

  /// True when a first use of `spec` may adopt a warm sandbox: a writable host path or
  /// none, network off, no workspace quota, and the limits, mount path and read-only root
  /// the pool's sandboxes were started with (the defaults); no mount beyond the per-exec
  /// ones. Whether a host path's workspace is new (has no uid yet) is judged when it
  /// adopts.
  bool pool_fits(const box_spec& spec) const;
  result<skill_storage> acquire_skill_storage(const std::string& dir) override;
  box_error check_spec(const box_spec& spec) const override;

  /// Where the skill-storage image of managed workspace `name` (ws-<24 hex>) is mounted.
  std::string skill_storage_dir(const std::string& name) const;

  /// The driver's argument list of a session (for tests and logs). Host sources (the
  /// workspace, extra mounts, the skills view, the artifacts view, the io folder, then the bounded tmpfs
  /// mounts of /tmp, /home and /dev/shm, in that order) appear as the staging paths
  /// `<stage>/0`, `<stage>/1`, ...; the seccomp program is read from `seccomp_fd`
  /// (bwrap applies it; under nsjail boxrt-init does).
  std::vector<std::string> build_args(const box_spec& spec, int seccomp_fd, bool network,
                                      bool skills_view, uint32_t uid = 0) const;

 private:
  /// start_session; `own_paths` lets boxd's own probes use folders of its state
  /// directory, which tenants never may.
  result<std::shared_ptr<backend_session>> start(const box_spec& spec, bool own_paths);

  /// What a session keeps across its sandboxes: its uid, quota mounts, private folder.
  box_error prepare(sandbox_session& s);

  /// Starts a sandbox for `s` (again, after the last one died).
  box_error launch(sandbox_session& s);

  /// The warm pool: one sandbox started ahead (session uid, private placeholder
  /// workspace, no skills view inside yet), the thread that keeps the pool full, and a
  /// first use taking one. `adopt` returns null when none fits or is ready, or the
  /// workspace is not new: the caller starts a sandbox the normal way.
  result<std::shared_ptr<sandbox_session>> start_warm();
  void fill_pool(uint64_t generation);
  void stop_pool();
  std::shared_ptr<sandbox_session> adopt(const box_spec& spec);
  box_error attach_workspace(sandbox_session& s, const box_spec& spec, int folder);

  /// Replaces the sandbox of `s` when it has died. Called with s.exec_mtx held.
  box_error revive(sandbox_session& s);

  /// Mounts into the session's views exactly the execution-scoped mounts of `spec`:
  /// skills at `<mount_path>/.skills/<name>`, artifacts at `/opt/langbot-artifacts/<hex>`.
  box_error sync_views(sandbox_session& s, const box_spec& spec);
  box_error sync_view(sandbox_session& s, mount_view& view, const std::map<std::string, mount_spec>& want,
                      const std::string& what);

  /// Mounts or unmounts one name of a view (nsjail: inside the sandbox's own mount
  /// namespace, which takes no propagation from the host).
  box_error mount_in_view(sandbox_session& s, int root, const mount_view& view, int source, const mount_spec& m,
                          const std::string& name);
  void unmount_from_view(sandbox_session& s, int root, const mount_view& view, const std::string& name);

  struct impl;
  std::unique_ptr<impl> impl_;
  sandbox_options opts_;
  /// Where host sources are bind-mounted, inside the launcher's private mount
  /// namespace, for the unprivileged bwrap to bind from (see start_session).
  std::string stage_root_;
  std::string unavailable_;
};

} // namespace boxrt
