// Starting a sandbox: the driver's argument list, the session's private paths and
// leases (prepare), and the launch itself: staging mounts, seccomp, the fork on the
// launcher thread and boxrt-init's handshake. bwrap and nsjail differ only where this
// file says so: bwrap's launcher drops to the sandbox uid and bwrap applies seccomp;
// nsjail runs as root, maps the uid itself, takes a /dev the launcher builds, and
// boxrt-init applies seccomp. On both, boxrt-init is the sandbox's pid 1 and its reaper.
#include "backends/sandbox/detail.hpp"

namespace boxrt {

namespace {

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

/// The launcher's stack: it runs in a clone sharing boxd's memory (see launch).
constexpr size_t launcher_stack_size = 256 * 1024;

} // namespace

bool sandbox_detail::launcher_can_take_fds() {
  // A clone as the launcher makes it: its own table, one descriptor of boxd's taken by
  // number and written to. pidfd_getfd needs ptrace access to boxd (CAP_SYS_PTRACE
  // where Yama restricts ptrace to descendants; a container may drop it).
  int probe[2];
  if (::pipe2(probe, O_CLOEXEC | O_NONBLOCK) != 0)
    return false;
  struct call {
    pid_t parent;
    int fd;
  } c{::getpid(), probe[1]};
  auto body = [](void* arg) -> int {
    auto* c = static_cast<call*>(arg);
    if (::close_range(3, ~0u, CLOSE_RANGE_UNSHARE) != 0)
      ::_exit(1);
    int boxd = static_cast<int>(::syscall(SYS_pidfd_open, c->parent, 0));
    int got = boxd < 0 ? -1 : static_cast<int>(::syscall(SYS_pidfd_getfd, boxd, c->fd, 0));
    ::_exit(got >= 0 && ::write(got, "x", 1) == 1 ? 0 : 2);
  };
  char x = 0;
  const bool ok = run_clone(body, &c, CLONE_VM | CLONE_VFORK | CLONE_FILES) == 0 && ::read(probe[0], &x, 1) == 1
                  && x == 'x';
  ::close(probe[0]);
  ::close(probe[1]);
  return ok;
}

namespace {

/// What the launcher stages at <stage>/<n>: a source (an open folder or file, with a
/// detached copy of its mount) or a bounded tmpfs.
struct staged_item {
  unique_fd fd;
  unique_fd tree;
  std::string path;
  bool dir = true;
  std::string tmpfs;
};

/// Source staging: opens the sources a sandbox of `s` binds at start, the workspace (the
/// spec's host path, under its quota image when it has one, else the session's private
/// folder) and the extra mounts, each as a detached copy of its mount. Host paths are
/// opened by a walk that follows no link a sandbox could have planted (open_trusted), a
/// missing writable one created on the way; judged again by the path the kernel reports
/// for the open folder; a writable one handed over to the sandbox uid through that same
/// descriptor.
box_error open_sources(const sandbox_options& opts, const sandbox_session& s, std::vector<staged_item>& items) {
  const auto& spec = s.spec;
  // `label` names a tenant's source ("" for boxd's own folders).
  auto open_source = [&](const std::string& path, mount_mode mode, const std::string& label, bool hand) -> box_error {
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
    if (!label.empty() && (within(item.path, opts.state_dir) || within(opts.state_dir, item.path)))
      return blocked_for_security(label, path);
    if (hand)
      hand_over(fd.get(), s.uid, s.gid, path, label.empty() ? -1 : opts.host_gid);
    struct stat st{};
    item.dir = ::fstat(fd.get(), &st) == 0 && S_ISDIR(st.st_mode);
    auto copy = detached_copy(fd.get(), path, false);
    if (!copy)
      return copy.error();
    item.tree.reset(high_fd(copy->release()));
    item.fd.reset(high_fd(fd.release()));
    items.push_back(std::move(item));
    return {};
  };
  if (mounts_host_path(spec)) {
    if (auto e = open_source(spec.host_path, spec.host_path_mode, s.own_paths ? "" : "host_path",
                             spec.host_path_mode == mount_mode::rw))
      return e;
  } else if (auto e = open_source(s.private_dir + "/workspace", mount_mode::rw, "", true)) {
    return e;
  }
  for (auto& m : spec.extra_mounts) {
    if (m.mode == mount_mode::none || is_exec_scoped_mount(spec, m))
      continue;
    auto label = "extra_mounts[" + std::to_string(&m - spec.extra_mounts.data()) + "].host_path";
    if (auto e = open_source(m.host_path, m.mode, s.own_paths ? "" : label, m.mode == mount_mode::rw))
      return e;
  }
  return {};
}

/// nsjail's /dev as the launcher builds it in the staging tmpfs (bwrap builds its own).
struct dev_layout {
  explicit dev_layout(const std::string& stage_sources)
    : dir{stage_sources + "/" + staged_dev}, shm{dir + "/shm"}, pts{dir + "/pts"}, ptmx{dir + "/ptmx"},
      fd{dir + "/fd"}, in{dir + "/stdin"}, out{dir + "/stdout"}, err{dir + "/stderr"} {
    for (const char* d : sandbox_devices) {
      nodes.push_back(dir + "/" + d);
      sources.push_back(std::string{"/dev/"} + d);
    }
  }
  std::string dir, shm, pts, ptmx, fd, in, out, err;
  std::vector<std::string> nodes, sources;
};

/// Everything the launcher does, decided before it runs (launch builds it): plain values,
/// paths, and boxd's descriptors by number, which the launcher takes from boxd. Only
/// read by launcher_child.
struct launcher_plan {
  explicit launcher_plan(const std::string& stage_sources) : dev{stage_sources} {}
  bool nsjail = false;
  /// Takes boxd's descriptors by number (pidfd_getfd), else works on a copy of its table.
  bool share_fds = false;
  pid_t boxd_pid = -1;
  uint32_t uid = 0, gid = 0;
  /// RLIMIT_NPROC when there are no cgroups (0: none).
  rlim_t nproc = 0;
  /// The driver's error pipe (write end): the launcher's own failures go there too.
  int err_fd = -1;
  /// The session's cgroups' procs files: the launcher joins them before it execs.
  std::vector<int> join;
  int template_ns = -1;
  int session_fs = -1;
  std::string stage_root, stage_sources;
  /// What goes to <stage>/stage/<n>: a detached tree (stage_tree) or a tmpfs (options).
  std::vector<std::string> stage_to;
  std::vector<const char*> stage_tmpfs;
  std::vector<int> stage_tree;
  std::vector<char> stage_is_dir;
  /// The scratch space's folders, their modes, and whether the sandbox uid owns them.
  std::vector<std::string> scratch_dirs;
  std::vector<mode_t> scratch_modes;
  std::vector<char> scratch_owned;
  dev_layout dev;
  bool network = false;
  std::string resolv_path;
  std::string_view resolv_text;
  /// {boxd's descriptor or -1 (/dev/null), the driver's number for it}.
  std::array<std::array<int, 2>, 8> handed{};
  std::string program;
  std::vector<char*> argv;
  char** envp = nullptr;
};

/// The launcher: plain system calls only, then exec the driver. It is a clone that shares
/// boxd's memory until it execs (the launcher thread waits meanwhile), so it writes
/// nothing of boxd's, allocates nothing and calls no libc function that keeps state
/// (set*id are raw system calls: glibc's would signal boxd's threads). A fork copied
/// boxd's page tables, which grow with every live sandbox.
[[noreturn]] void launcher_child(const launcher_plan& p) noexcept {
  // A descriptor table of its own first, holding boxd's 0-2 only: it starts sharing
  // boxd's (CLONE_FILES), since copying that table and closing every entry again cost
  // O(live sandboxes) per start. Each descriptor it needs is then taken from boxd by
  // number (pidfd_getfd), above every target number of the dup2s below. Where that is
  // not permitted (launcher_can_take_fds), the clone gets a copy of the table instead.
  if (p.share_fds && ::close_range(3, ~0u, CLOSE_RANGE_UNSHARE) != 0)
    ::_exit(119);
  const int boxd =
    p.share_fds ? ::fcntl(static_cast<int>(::syscall(SYS_pidfd_open, p.boxd_pid, 0)), F_DUPFD_CLOEXEC, 16) : -1;
  auto take = [&](int fd) {
    if (!p.share_fds)
      return fd;
    if (fd < 0 || boxd < 0)
      return -1;
    int got = static_cast<int>(::syscall(SYS_pidfd_getfd, boxd, fd, 0));
    int high = got < 0 ? -1 : ::fcntl(got, F_DUPFD_CLOEXEC, 16);
    if (got >= 0)
      ::close(got);
    return high;
  };
  const int err = take(p.err_fd);
  if (err < 0)
    ::_exit(119);
  auto die = [&](const char* what) {
    (void)!::write(err, what, std::strlen(what));
    ::_exit(120);
  };
  for (int fd : p.join) {
    int joined = take(fd);
    if (joined < 0 || ::write(joined, "0", 1) != 1)
      die("sandbox launcher: cannot join the session's cgroup");
    ::close(joined);
  }
  child::reset_signals();
  // bwrap's error pipe is closed once the sandbox is up; nsjail may still log to it
  // (quietly, a line at its end), which must not kill it (init resets this disposition
  // for every command).
  if (p.nsjail)
    ::signal(SIGPIPE, SIG_IGN);
  // The driver and boxrt-init are not what the out-of-memory killer should pick; the
  // command resets itself to 0. -999 (not -1000) keeps every process killable.
  child::set_oom_score_adj("-999");
  rlimit core{0, 0};
  ::setrlimit(RLIMIT_CORE, &core);
  rlimit fsize{512ull << 20, 512ull << 20};
  ::setrlimit(RLIMIT_FSIZE, &fsize);
  if (p.nproc > 0) {
    rlimit procs{p.nproc, p.nproc};
    ::setrlimit(RLIMIT_NPROC, &procs);
  }
  ::setsid();
  if (::setns(take(p.template_ns), CLONE_NEWNS) != 0 || ::unshare(CLONE_NEWNS) != 0
      || ::move_mount(take(p.session_fs), "", AT_FDCWD, p.stage_root.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0
      || ::mkdir(p.stage_sources.c_str(), 0755) != 0)
    die("sandbox launcher: cannot prepare the staging mounts");
  for (size_t i = 0; i < p.stage_to.size(); ++i) {
    if (p.stage_is_dir[i]) {
      if (::mkdir(p.stage_to[i].c_str(), 0755) != 0)
        die("sandbox launcher: cannot create a staging folder");
    } else {
      int f = ::open(p.stage_to[i].c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
      if (f < 0)
        die("sandbox launcher: cannot create a staging file");
      ::close(f);
    }
    // A tenant's source arrives as the detached copy taken in boxd (no path lookup
    // here, so nothing can be swapped in between); the scratch tmpfs is made here.
    bool staged = p.stage_tmpfs[i] != nullptr
                    ? ::mount("boxrt-tmp", p.stage_to[i].c_str(), "tmpfs", MS_NOSUID | MS_NODEV, p.stage_tmpfs[i]) == 0
                    : ::move_mount(take(p.stage_tree[i]), "", AT_FDCWD, p.stage_to[i].c_str(), MOVE_MOUNT_F_EMPTY_PATH) == 0;
    if (!staged)
      die("sandbox launcher: cannot stage a mount source");
  }
  // The scratch space's folders (the umask would take 1777's bits away: chmod after).
  for (size_t i = 0; i < p.scratch_dirs.size(); ++i)
    if (::mkdir(p.scratch_dirs[i].c_str(), 0700) != 0 || ::chmod(p.scratch_dirs[i].c_str(), p.scratch_modes[i]) != 0
        || (p.scratch_owned[i] && ::chown(p.scratch_dirs[i].c_str(), p.uid, p.gid) != 0))
      die("sandbox launcher: cannot prepare the scratch space");
  if (p.nsjail) {
    // /dev: the device nodes bound from the host on a small tmpfs, with a mount point
    // for the bounded /dev/shm, then read-only (bwrap's --dev and --remount-ro).
    if (::mkdir(p.dev.dir.c_str(), 0755) != 0
        || ::mount("boxrt-dev", p.dev.dir.c_str(), "tmpfs", MS_NOSUID | MS_NOEXEC, "size=16k,nr_inodes=64,mode=0755") != 0
        || ::mkdir(p.dev.shm.c_str(), 0755) != 0)
      die("sandbox launcher: cannot build /dev");
    for (size_t i = 0; i < p.dev.nodes.size(); ++i) {
      int f = ::open(p.dev.nodes[i].c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
      if (f < 0 || ::close(f) != 0 || ::mount(p.dev.sources[i].c_str(), p.dev.nodes[i].c_str(), nullptr, MS_BIND, nullptr) != 0)
        die("sandbox launcher: cannot bind a device node");
    }
    // What bwrap's --dev adds: the standard links and a devpts instance of its own.
    if (::symlink("/proc/self/fd", p.dev.fd.c_str()) != 0 || ::symlink("/proc/self/fd/0", p.dev.in.c_str()) != 0
        || ::symlink("/proc/self/fd/1", p.dev.out.c_str()) != 0
        || ::symlink("/proc/self/fd/2", p.dev.err.c_str()) != 0 || ::symlink("pts/ptmx", p.dev.ptmx.c_str()) != 0
        || ::mkdir(p.dev.pts.c_str(), 0755) != 0
        || ::mount("devpts", p.dev.pts.c_str(), "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620") != 0)
      die("sandbox launcher: cannot build /dev");
    if (::mount(nullptr, p.dev.dir.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC, nullptr) != 0)
      die("sandbox launcher: cannot make /dev read-only");
    if (p.network) {
      int f = ::open(p.resolv_path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
      if (f < 0 || !proto::write_all(f, p.resolv_text) || ::close(f) != 0)
        die("sandbox launcher: cannot write the resolver file");
    }
    // No --die-with-parent: the launcher thread's end kills nsjail, whose end
    // kills the jail.
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
      die("sandbox launcher: cannot tie nsjail to boxd");
  }
  // What the child keeps is exactly its stdio (nothing: init's reaper closes it),
  // bwrap's errors and the handed descriptors, init's channel among them;
  // everything else is closed before the descriptor limit is lowered.
  // /dev/null above every target number, so no dup2 below replaces it.
  int null = ::fcntl(::open("/dev/null", O_RDWR | O_CLOEXEC), F_DUPFD_CLOEXEC, 16);
  if (null < 0 || ::dup2(null, 0) < 0 || ::dup2(null, 1) < 0 || ::dup2(err, 2) < 0)
    ::_exit(121);
  for (auto& [from, to] : p.handed)
    if ((from >= 0 ? ::dup2(take(from), to) : ::dup2(null, to)) < 0)
      ::_exit(121);
  ::close_range(proto::seccomp_fd + 1, ~0u, 0);
  rlimit nofile{1024, 1024};
  ::setrlimit(RLIMIT_NOFILE, &nofile);
  // bwrap runs as the sandbox uid; nsjail needs root to map that uid and to mount,
  // and drops every capability before init runs.
  // No supplementary group of boxd's (host_gid among them) reaches either.
  if (::syscall(SYS_setgroups, 0, nullptr) != 0
      || (!p.nsjail && (::syscall(SYS_setgid, p.gid) != 0 || ::syscall(SYS_setuid, p.uid) != 0)))
    ::_exit(123);
  ::execve(p.program.c_str(), p.argv.data(), p.envp);
  ::_exit(127);
}

int run_launcher(void* plan) {
  launcher_child(*static_cast<const launcher_plan*>(plan));
}

} // namespace

std::vector<std::string> sandbox_backend::build_args(const box_spec& spec, int seccomp_fd, bool network,
                                                    bool skills_view, uint32_t uid) const {
  const auto numbered = stage_root_ + "/" + staged_sources;
  args_input in{spec, opts_, numbered, stage_root_, seccomp_fd, network, skills_view, true, uid, impl_->init_file};
  return opts_.driver == sandbox_driver::nsjail ? nsjail_args(in) : bwrap_args(in);
}

box_error sandbox_backend::prepare(sandbox_session& s) {
  const auto& spec = s.spec;
  const bool has_host = mounts_host_path(spec);
  s.private_dir = opts_.state_dir + "/sessions/" + s.id_;
  // Its own folder (root's, 0700): the private workspace, the network rules.
  std::error_code made;
  fs::create_directories(opts_.state_dir + "/sessions", made);
  if (::mkdir(s.private_dir.c_str(), 0700) != 0 && errno != EEXIST)
    return make_box_error(ec::box_error, "cannot create " + s.private_dir + ": " + std::strerror(errno));
  // The uid: the workspace's own (in the uid record, or handed out and recorded now),
  // else one for this session alone. boxd's own probes take a session uid.
  if (has_host && !s.own_paths) {
    auto folder = spec.host_path_mode == mount_mode::rw ? beneath::make_dirs_trusted(spec.host_path, 0755)
                                                        : beneath::open_trusted(spec.host_path, O_PATH | O_DIRECTORY);
    if (!folder)
      return make_box_error(ec::box_error, "host path " + spec.host_path
                                             + (errno == ENOENT ? " does not exist" : ": " + std::string{std::strerror(errno)}));
    struct stat st{};
    ::fstat(folder.get(), &st);
    auto uid = impl_->host->uids->for_workspace(beneath::path_of(folder.get()), st.st_uid);
    if (!uid)
      return uid.error();
    s.uid = s.gid = *uid;
    // Hand the folder (and what is in it) over before a quota image may be mounted over
    // it: its owner is what a record rebuilt by the scan reads.
    if (spec.host_path_mode == mount_mode::rw)
      hand_over(folder.get(), s.uid, s.gid, spec.host_path, opts_.host_gid);
  } else {
    auto uid = impl_->host->uids->for_session(s.id_);
    if (!uid)
      return uid.error();
    s.uid = s.gid = *uid;
    s.release_uid = [uids = impl_->host->uids, key = s.id_](bool tree_removed) { uids->release(key, tree_removed); };
    // A writable extra mount hands a host tree to this uid, and boxd never removes such
    // a tree: the uid is kept for good, recorded before the tree is handed over.
    for (auto& m : spec.extra_mounts)
      if (m.mode == mount_mode::rw && !is_exec_scoped_mount(spec, m)) {
        if (auto e = impl_->host->uids->pin(s.uid))
          return e;
        break;
      }
  }
  // Hard quotas: the workspace's image mounted at its own path, or a private image for
  // a session without a host path; the workspace's skill storage has one of its own.
  if (has_host && spec.workspace_quota_mb > 0) {
    auto name = managed_tenant_name(spec.host_path);
    if (name.empty())
      name = "path-" + sha256_hex(spec.host_path).substr(0, 24);
    auto lease = impl_->host->quota->acquire(name, spec.host_path, spec.workspace_quota_mb, s.uid, s.gid);
    if (!lease)
      return lease.error();
    s.leases.push_back(std::move(lease.value()));
    s.workspace_fd = beneath::open_trusted(s.leases.back()->mount_point());
  } else if (!has_host && spec.workspace_quota_mb > 0) {
    auto lease = impl_->host->quota->acquire(std::string{loop_quota::ephemeral_prefix} + s.id_, s.private_dir + "/workspace",
                                       spec.workspace_quota_mb, s.uid, s.gid, true);
    if (!lease)
      return lease.error();
    s.leases.push_back(std::move(lease.value()));
    s.workspace_fd = beneath::open_trusted(s.leases.back()->mount_point());
  }
  // The workspace's skill storage image is mounted when an exec first mounts one of its
  // skills (sync_view): formatting and mounting it is not for the start path.
  s.prepared = true;
  return {};
}

box_error sandbox_backend::launch(sandbox_session& s) {
  std::unique_lock state{s.sandbox_mtx};
  // Where the sources are staged, on the session's file system (see build_args).
  const auto stage_sources = stage_root_ + "/" + staged_sources;
  const auto& spec = s.spec;
  const uint32_t uid = s.uid, gid = s.gid;
  ++s.generation;
  rlim_t nproc = 0;
  if (!impl_->host->cgroups) // without cgroups the process cap is RLIMIT_NPROC of the sandbox uid
    nproc = static_cast<rlim_t>(spec.pids_limit + opts_.pids_overhead);
  std::vector<staged_item> items;
  if (auto e = open_sources(opts_, s, items))
    return e;
  // The session's own file system, held by descriptor and mounted nowhere in boxd's
  // namespace: the launch attaches it inside the sandbox, where its folders show as the
  // views, skills at <mount_path>/.skills (a read-only workspace cannot take that mount
  // point, so it gets none) and artifacts at /opt/langbot-artifacts, and as the io
  // folder (managed-process FIFOs and exit files; the sandbox uid's, 0700; boxd reaches
  // it as root through the root). What an exec mounts into a view later is attached
  // inside the sandbox's own namespace (mount_in_view). boxd holds it only while it
  // launches: later uses find it again on the staging folder (open_session_fs).
  unique_fd session_fs_fd;
  {
    auto made = make_session_fs();
    if (!made)
      return make_box_error(ec::box_error, "cannot prepare the session's folders: " + made.error().message);
    session_fs_fd.reset(high_fd(made->release()));
    const int root = session_fs_fd.get();
    struct stat st{};
    if (::mkdirat(root, "skills", 0755) != 0 || ::mkdirat(root, "artifacts", 0755) != 0
        || ::mkdirat(root, "io", 0700) != 0 || ::fchownat(root, "io", uid, gid, AT_SYMLINK_NOFOLLOW) != 0
        || ::fstat(root, &st) != 0)
      return make_box_error(ec::box_error, std::string{"cannot prepare the session's folders: "} + std::strerror(errno));
    s.fs_at = stage_root_.substr(1); // beneath the driver's root
    s.fs_dev = st.st_dev;
    s.fs_ino = st.st_ino;
    if (spec.host_path.empty() || spec.host_path_mode != mount_mode::ro) {
      s.skills.sub = "skills";
      s.skills.target = spec.mount_path + "/.skills";
    }
    s.artifacts.sub = "artifacts";
    s.artifacts.target = std::string{artifact_mount_root};
  }
  // The bounded scratch space follows the sources (see build_args): one tmpfs holding
  // the folders bound at /tmp, /home and /dev/shm, sized and capped in inodes by their
  // sum (one file system instance, not three: see make_session_fs).
  std::vector<std::string> scratch_dirs;
  std::vector<mode_t> scratch_modes;
  std::vector<char> scratch_owned;
  {
    for (auto& m : ephemeral_mounts(opts_, spec.memory_mb)) {
      scratch_dirs.push_back(stage_sources + "/" + std::to_string(items.size()) + "/" + m.folder);
      scratch_modes.push_back(m.shared ? 01777 : 0755);
      scratch_owned.push_back(m.shared ? 0 : 1);
    }
    staged_item item;
    const auto bounds = scratch_space(opts_, spec.memory_mb);
    item.tmpfs = "size=" + std::to_string(bounds.bytes) + ",nr_inodes=" + std::to_string(bounds.inodes) + ",mode=0755";
    items.push_back(std::move(item));
  }
  // Descriptors the driver reads: the seccomp filter, init's image, the resolver file.
  auto seccomp_fd = memfd_with("boxrt-seccomp", impl_->host->seccomp);
  auto init_fd = reopen(impl_->host->init_image.get());
  const bool network = spec.network == network_mode::on;
  unique_fd resolv_fd;
  if (network)
    resolv_fd = memfd_with("boxrt-resolv", sandbox_resolv_conf);
  if (!seccomp_fd || !init_fd || (network && !resolv_fd))
    return make_box_error(ec::box_error, std::string{"cannot pass the sandbox its files: "} + std::strerror(errno));

  // Limits: the cgroup the launcher joins before it becomes the driver. I/O caps apply to
  // the device of a workspace's quota image (boxd's probes: of its own folder).
  if (impl_->host->cgroups) {
    cgroup_limits limits;
    limits.memory_bytes = spec.memory_mb * 1048576;
    limits.pids = spec.pids_limit + opts_.pids_overhead;
    limits.cpus = spec.cpus;
    limits.io = opts_.io.any() && (spec.workspace_quota_mb > 0 || s.own_paths);
    auto g = impl_->host->cgroups->create(s.id_ + "-" + std::to_string(s.generation), limits);
    if (!g)
      return g.error();
    if (!s.adopt_group(std::move(g.value())))
      return make_box_error(ec::box_error, s.what() + " was interrupted while it started");
    struct stat ws{};
    if (limits.io && !items.empty() && ::fstat(items.front().fd.get(), &ws) == 0)
      if (auto e = s.group->limit_io(major(ws.st_dev), minor(ws.st_dev), opts_.io))
        return e;
  }

  const bool nsjail = opts_.driver == sandbox_driver::nsjail;
  auto args = build_args(spec, child_seccomp_fd, network, !s.skills.sub.empty(), uid);
  // Options travel NUL-separated: a NUL inside one (a mount path, say) would add options.
  // nsjail's take ':' as their separator, so a path holding one is refused there.
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i].find('\0') != std::string::npos)
      return make_box_error(ec::validation, "paths of the spec must not contain NUL characters");
  }
  if (nsjail) {
    auto colon = [](const std::string& p) { return p.find(':') != std::string::npos; };
    bool bad = colon(spec.mount_path);
    for (auto& m : spec.extra_mounts)
      bad = bad || colon(m.mount_path);
    if (bad)
      return make_box_error(ec::validation, "mount paths must not contain ':' on the nsjail backend");
  }
  // bwrap takes its options from a descriptor (--args) and the command from its command
  // line, so no /proc/<pid>/cmdline (bwrap stays outside the sandbox's pid namespace
  // with --as-pid-1, and its ps shows on the host) carries boxd's paths.
  // nsjail stays outside the sandbox's pid namespace: its command line is the host's.
  std::string packed;
  for (size_t i = 1; i + 1 < args.size() && !nsjail; ++i) {
    packed += args[i];
    packed.push_back('\0');
  }
  unique_fd args_fd;
  if (!nsjail) {
    args_fd = memfd_with("boxrt-args", packed);
    if (!args_fd)
      return make_box_error(ec::box_error, std::string{"cannot pass bwrap its arguments: "} + std::strerror(errno));
  }
  // Above every target number, so the launcher's dup2 onto 0..10 never clobbers one.
  for (auto* fd : {&seccomp_fd, &init_fd, &resolv_fd, &args_fd})
    if (*fd)
      fd->reset(high_fd(fd->release()));
  std::string program = nsjail ? opts_.nsjail_path : opts_.bwrap_path;
  std::string fd_arg = std::to_string(child_args_fd);
  std::string command = args.back();
  std::vector<char*> argv;
  if (nsjail) {
    for (auto& a : args)
      argv.push_back(a.data());
  } else {
    argv = {program.data(), const_cast<char*>("--args"), fd_arg.data(), command.data()};
  }
  argv.push_back(nullptr);
  // init's two channels are a stream socket each: one descriptor on boxd's side, not a
  // pipe per direction (a live sandbox's descriptors bound how many a host can hold).
  int chan[2], ctl_chan[2], err_pipe[2], info_pipe[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, chan) != 0
      || ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl_chan) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0
      || ::pipe2(info_pipe, O_CLOEXEC) != 0)
    return make_box_error(ec::box_error, std::string{"cannot create init's channels: "} + std::strerror(errno));
  for (int* p : {chan, ctl_chan, err_pipe, info_pipe}) {
    p[0] = high_fd(p[0]);
    p[1] = high_fd(p[1]);
  }
  unique_fd info_read{info_pipe[0]};

  // Staging: the driver cannot reach a source whose parent folders the sandbox uid may
  // not traverse (a 0700 data folder, say; nsjail binds after it entered the sandbox's
  // user namespace), nor take a detached mount by descriptor. So the launcher, still
  // root, makes itself a private copy of the template namespace (the host's system
  // mounts only: never boxd's own table, which grows with every sandbox and tenant),
  // attaches the session's own file system on the staging folder there and attaches each
  // source to <stage>/stage/<n> on it (tenant sources as the detached mount copies taken
  // above), mounts the bounded scratch tmpfs; the driver binds from those. Nothing of
  // this is visible on the host, and it all goes when the sandbox ends.
  launcher_plan plan{stage_sources};
  plan.nsjail = nsjail;
  plan.share_fds = impl_->launcher_takes_fds;
  plan.boxd_pid = ::getpid();
  plan.uid = uid;
  plan.gid = gid;
  plan.nproc = nproc;
  plan.err_fd = err_pipe[1];
  plan.join = s.group ? s.group->join_fds() : std::vector<int>{};
  plan.template_ns = impl_->template_ns.get();
  plan.session_fs = session_fs_fd.get();
  plan.stage_root = stage_root_;
  plan.stage_sources = stage_sources;
  for (size_t i = 0; i < items.size(); ++i) {
    plan.stage_to.push_back(stage_sources + "/" + std::to_string(i));
    plan.stage_tmpfs.push_back(items[i].tmpfs.empty() ? nullptr : items[i].tmpfs.c_str());
    plan.stage_tree.push_back(items[i].tree.get());
    plan.stage_is_dir.push_back(items[i].dir ? 1 : 0);
  }
  plan.scratch_dirs = std::move(scratch_dirs);
  plan.scratch_modes = std::move(scratch_modes);
  plan.scratch_owned = std::move(scratch_owned);
  plan.network = network;
  plan.resolv_path = stage_sources + "/" + staged_resolv;
  plan.resolv_text = sandbox_resolv_conf;
  // nsjail: the seccomp program goes to init (proto::seccomp_fd); no info, args or
  // resolver descriptor (its resolver file is staged).
  plan.handed = {{{nsjail ? -1 : seccomp_fd.get(), child_seccomp_fd},
                  {nsjail ? -1 : info_pipe[1], child_info_fd},
                  {args_fd.get(), child_args_fd},
                  {init_fd.get(), child_init_fd},
                  {nsjail ? -1 : resolv_fd.get(), child_resolv_fd},
                  {chan[1], proto::channel_fd},
                  {ctl_chan[1], proto::control_fd},
                  {nsjail ? seccomp_fd.get() : -1, proto::seccomp_fd}}};
  plan.program = program;
  plan.argv = std::move(argv);
  char* envp[] = {nullptr};
  plan.envp = envp;

  pid_t pid = -1;
  int clone_error = 0;
  auto stack = std::make_unique<char[]>(launcher_stack_size);
  impl_->launcher.run([&] {
    pid = ::clone(run_launcher, stack.get() + launcher_stack_size,
                  CLONE_VM | CLONE_VFORK | (plan.share_fds ? CLONE_FILES : 0) | SIGCHLD, &plan);
    clone_error = errno;
  });
  ::close(chan[1]);
  ::close(ctl_chan[1]);
  ::close(err_pipe[1]);
  ::close(info_pipe[1]);
  items.clear();
  if (s.group)
    s.group->close_join_fds();
  s.channel.reset(chan[0]);
  {
    std::lock_guard lock{s.ctl_mtx};
    s.ctl.reset(ctl_chan[0]);
  }
  unique_fd errors{err_pipe[0]};
  if (pid < 0)
    return make_box_error(ec::box_error, "cannot start " + s.driver + ": " + std::strerror(clone_error));
  if (!s.adopt_driver(pid))
    return make_box_error(ec::box_error, s.what() + " was interrupted while it started");

  std::string payload;
  auto deadline = clock_type::now() + std::chrono::milliseconds{opts_.start_timeout_ms};
  auto st = read_frame(s.channel.get(), payload, deadline, nullptr, 4096);
  if (st != read_status::ok || proto::reader{payload}.field() != std::optional<std::string_view>{"ready"}) {
    auto why = read_available(errors.get());
    if (why.empty())
      why = st == read_status::timeout ? "no answer within " + std::to_string(opts_.start_timeout_ms) + " ms"
                                       : "it exited at start";
    return make_box_error(ec::box_error, s.driver + " could not start the sandbox: " + why);
  }
  // bwrap wrote the sandbox's pid 1 (init, --as-pid-1) to the info descriptor before
  // init ran; nsjail's one child is the jail's pid 1. Either is taken by pidfd and checked alive after.
  s.ns_pid = nsjail ? only_child_of(pid) : child_pid_of(read_available(info_read.get()));
  if (s.ns_pid > 0)
    s.ns_pidfd.reset(static_cast<int>(::syscall(SYS_pidfd_open, s.ns_pid, 0)));
  // The views take their per-exec mounts in its mount namespace (joined through this
  // pidfd), a warm sandbox its workspace later.
  if (!s.ns_pidfd || s.died())
    return make_box_error(ec::box_error, s.what() + " did not report its namespaces");
  // The drivers' errors matter only while they start (the pipe closes here; nsjail
  // ignores the SIGPIPE of a later line). Nothing inside could reach that pipe: the
  // sandbox's pid 1 holds no descriptor and init is not dumpable.
  errors.reset();
  // Every write to the sandbox is bounded by a deadline (write_frame), never blocking.
  for (int fd : {s.channel.get(), s.ctl.get()})
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  if (network) {
    // The namespace by descriptor, taken while the reaper's pidfd shows it alive: a pid
    // that died and was reused meanwhile cannot redirect the rules to another namespace.
    unique_fd netns;
    if (s.ns_pid > 0)
      netns.reset(::open(("/proc/" + std::to_string(s.ns_pid) + "/ns/net").c_str(), O_RDONLY | O_CLOEXEC));
    if (!netns || s.died())
      return make_box_error(ec::box_error, s.what() + " did not report its namespaces");
    auto stack = netstack::attach(netns.get(), destinations_to_refuse(opts_.listen_host), s.private_dir,
                                  s.spec.network_scope);
    if (!stack)
      return stack.error();
    s.net = std::move(stack.value());
  }
  return {};
}

box_error sandbox_backend::revive(sandbox_session& s) {
  if (!s.died())
    return {};
  spdlog::info("{}: the sandbox of session {} ({}) has died; starting a fresh one", s.driver, s.spec.session_id, s.id());
  s.end_sandbox();
  if (auto e = launch(s)) {
    s.end_sandbox();
    return e;
  }
  return {};
}

} // namespace boxrt
