// The warm pool (box.limits.warm_pool): sandboxes started ahead, each with a session uid
// of its own and the session's empty private folder at the workspace's mount point. A
// first use in a new workspace (no uid yet) that fits the pool's shape adopts one: the
// sandbox's uid becomes the workspace's (recorded as the owner of its folder, as any
// start records it), and the workspace folder and the session's skills view are
// attached inside the sandbox's mount namespace, over the placeholder. Everything else
// takes the normal start. See docs/sandbox.md "Warm pool".
#include "backends/sandbox/detail.hpp"

#include "messages/base/metrics.hpp"

namespace boxrt {

namespace {

/// The spec warm sandboxes start with: the defaults a first use sends, no host path
/// (the session's own empty folder holds the workspace's mount point).
box_spec warm_spec() {
  box_spec spec;
  spec.session_id = "warm-pool";
  return spec;
}

} // namespace

bool sandbox_backend::pool_fits(const box_spec& spec) const {
  static const box_spec base = warm_spec();
  const bool has_host = mounts_host_path(spec);
  return opts_.warm_pool > 0 && unavailable_.empty() && (!has_host || spec.host_path_mode == mount_mode::rw)
         && spec.network == network_mode::off && spec.workspace_quota_mb == 0
         && spec.mount_path == base.mount_path && spec.cpus == base.cpus && spec.memory_mb == base.memory_mb
         && spec.pids_limit == base.pids_limit && spec.read_only_rootfs == base.read_only_rootfs
         && extra_mount_key(spec).empty();
}

namespace {

warm_pool_status status_of(const auto& p) {
  warm_pool_status out{p.ready.size(), p.starting, p.adopted, p.empty, {}};
  for (auto& s : p.ready)
    out.pids.push_back(s->ns_pid);
  return out;
}

} // namespace

warm_pool_status sandbox_backend::pool_status() const {
  auto& p = impl_->pool;
  std::lock_guard lock{p.mtx};
  return status_of(p);
}

bool sandbox_backend::wait_pool(const std::function<bool(const warm_pool_status&)>& done,
                                std::chrono::milliseconds timeout) const {
  auto& p = impl_->pool;
  std::unique_lock lock{p.mtx};
  return p.cv.wait_for(lock, timeout, [&] { return done(status_of(p)); });
}

bool sandbox_backend::wait_pool_ready(size_t n, std::chrono::milliseconds timeout) const {
  return wait_pool([n](const warm_pool_status& st) { return st.ready >= n; }, timeout);
}

result<std::shared_ptr<sandbox_session>> sandbox_backend::start_warm() {
  auto sid = name() + "-warm-" + std::to_string(impl_->next_id++);
  auto s = std::make_shared<sandbox_session>(sid, warm_spec(), false);
  s->driver = name();
  s->host = impl_->host;
  if (auto e = prepare(*s)) {
    s->teardown();
    return e;
  }
  // The skills view's mount point in the session's own workspace (for a first use
  // without a host path), handed over with it by launch as bwrap would have made it.
  std::error_code err;
  fs::create_directories(s->private_dir + "/workspace/.skills", err);
  if (err) {
    s->teardown();
    return make_box_error(ec::box_error, "cannot prepare a warm sandbox: " + err.message());
  }
  if (auto e = launch(*s)) {
    s->teardown();
    return e;
  }
  return s;
}

void sandbox_backend::fill_pool(uint64_t generation) {
  auto& p = impl_->pool;
  const auto want = static_cast<size_t>(opts_.warm_pool);
  std::shared_ptr<sandbox_session> leftover;
  std::vector<std::shared_ptr<sandbox_session>> dead;
  // One pool per state directory: a backend made later for it (box_init naming the
  // other driver) takes over, and this one's sandboxes go.
  auto superseded = [&] { return impl_->host->pool_generation.load() != generation; };
  std::unique_lock lock{p.mtx};
  while (!p.stop && !superseded()) {
    // Sandboxes killed from outside while they waited are replaced now, not found by a
    // first use; their teardown runs here, off any request's path.
    for (auto it = p.ready.begin(); it != p.ready.end();) {
      if ((*it)->died()) {
        dead.push_back(std::move(*it));
        it = p.ready.erase(it);
        metrics::boxd().warm_pool_ready.add(-1);
      } else {
        ++it;
      }
    }
    if (!dead.empty()) {
      lock.unlock();
      for (auto& d : dead)
        d->teardown();
      dead.clear();
      lock.lock();
      p.cv.notify_all();
      continue;
    }
    if (p.ready.size() + p.starting >= want) {
      p.cv.wait_for(lock, std::chrono::seconds{1});
      continue;
    }
    ++p.starting;
    lock.unlock();
    auto s = start_warm();
    lock.lock();
    --p.starting;
    if (s && !p.stop) {
      p.ready.push_back(std::move(s.value()));
      metrics::boxd().warm_pool_ready.add(1);
      p.cv.notify_all();
    } else if (s) {
      leftover = std::move(s.value());
    } else {
      // Whatever stops a start (uids exhausted, a cgroup, the driver) is logged once per
      // try; the pool tries again later, and first uses start sandboxes meanwhile.
      spdlog::warn("{}: cannot start a warm sandbox: {}; trying again in 5 s", name(), s.error().message);
      p.cv.notify_all();
      p.cv.wait_for(lock, std::chrono::seconds{5}, [&] { return p.stop; });
    }
  }
  std::deque<std::shared_ptr<sandbox_session>> left;
  if (superseded()) {
    left.swap(p.ready);
    metrics::boxd().warm_pool_ready.add(-static_cast<int64_t>(left.size()));
  }
  lock.unlock();
  if (leftover)
    leftover->teardown();
  for (auto& s : left)
    s->teardown();
}

void sandbox_backend::stop_pool() {
  auto& p = impl_->pool;
  std::deque<std::shared_ptr<sandbox_session>> left;
  {
    std::lock_guard lock{p.mtx};
    p.stop = true;
    left.swap(p.ready);
  }
  p.cv.notify_all();
  if (p.filler.joinable())
    p.filler.join();
  metrics::boxd().warm_pool_ready.add(-static_cast<int64_t>(left.size()));
  for (auto& s : left)
    s->teardown();
}

std::shared_ptr<sandbox_session> sandbox_backend::adopt(const box_spec& spec) {
  if (!pool_fits(spec))
    return nullptr;
  // Only a new workspace adopts: one with a uid keeps it (and its files' owner), and
  // the normal start reports every problem with the folder in its own words. Without a
  // host path the session's own folder is the workspace, with the session's own uid, as
  // a normal start would give it.
  const bool has_host = mounts_host_path(spec);
  unique_fd folder;
  std::string real;
  struct stat st{};
  auto& uids = *impl_->host->uids;
  if (has_host) {
    folder = beneath::make_dirs_trusted(spec.host_path, 0755);
    if (!folder)
      return nullptr;
    real = beneath::path_of(folder.get());
    if (real.empty() || within(real, opts_.state_dir) || within(opts_.state_dir, real)
        || ::fstat(folder.get(), &st) != 0 || !S_ISDIR(st.st_mode))
      return nullptr;
    if (!uids.is_new_workspace(real, st.st_uid))
      return nullptr;
  }
  auto& p = impl_->pool;
  std::shared_ptr<sandbox_session> s;
  std::vector<std::shared_ptr<sandbox_session>> dead;
  {
    std::unique_lock lock{p.mtx};
    // A sandbox already starting is ready sooner than a fresh start would be: wait for
    // it, but only as many first uses as there are sandboxes starting (a burst beyond
    // that starts its own in parallel).
    // The wait is short (a start takes 7-20 ms here): a start that hangs or fails costs
    // a first use at most this much before it starts its own.
    if (p.ready.empty() && p.starting > p.waiting) {
      ++p.waiting;
      p.cv.wait_for(lock, std::chrono::milliseconds{std::min(opts_.start_timeout_ms, 250)},
                    [&] { return p.stop || !p.ready.empty() || p.starting == 0; });
      --p.waiting;
    }
    while (!s && !p.ready.empty()) {
      s = std::move(p.ready.front());
      p.ready.pop_front();
      metrics::boxd().warm_pool_ready.add(-1);
      if (s->died()) { // killed from outside while it waited
        dead.push_back(std::move(s));
        s.reset();
      }
    }
    if (!s)
      ++p.empty;
  }
  p.cv.notify_all(); // the filler starts the next one
  for (auto& d : dead)
    d->teardown();
  if (!s) {
    metrics::boxd().warm_pool_takes.with({"empty"}).inc();
    return nullptr;
  }
  if (has_host && !uids.give_to_workspace(s->id_, real, st.st_uid)) {
    // Another first use of this workspace took a uid meanwhile: the sandbox goes back.
    {
      std::lock_guard lock{p.mtx};
      if (!p.stop) {
        p.ready.push_front(s);
        metrics::boxd().warm_pool_ready.add(1);
        s.reset();
      }
    }
    p.cv.notify_all();
    if (s)
      s->teardown();
    return nullptr;
  }
  if (has_host)
    s->release_uid = nullptr; // the workspace's now, as a normal start would have recorded it
  if (auto e = attach_workspace(*s, spec, folder.get())) {
    spdlog::warn("{}: a warm sandbox could not take the workspace {}: {}; starting one instead", name(),
                 spec.host_path, e.message);
    s->teardown();
    return nullptr;
  }
  {
    std::lock_guard lock{p.mtx};
    ++p.adopted;
  }
  metrics::boxd().warm_pool_takes.with({"adopted"}).inc();
  return s;
}

box_error sandbox_backend::attach_workspace(sandbox_session& s, const box_spec& spec, int folder) {
  std::unique_lock state{s.sandbox_mtx};
  auto fail = [&](const std::string& what, int err) {
    return make_box_error(ec::box_error, "cannot " + what + " for " + spec.host_path + ": " + std::strerror(err));
  };
  // `folder` < 0: no host path; the placeholder, the session's own folder, stays the
  // workspace and only the skills view goes in.
  unique_fd ws;
  if (folder >= 0) {
    // The skills view's mount point, made before the folder is handed over (so it is
    // the uid's, as bwrap would have made it inside); a name taken by something else
    // than a folder fails the open below, which follows no link.
    if (::mkdirat(folder, ".skills", 0755) != 0 && errno != EEXIST)
      return fail("create the skills mount point", errno);
    hand_over(folder, s.uid, s.gid, spec.host_path, opts_.host_gid);
    auto copy = detached_copy(folder, spec.host_path, false);
    if (!copy)
      return copy.error();
    ws = std::move(copy.value());
    // nosuid and nodev as bwrap's and nsjail's binds (detached_copy made it private, as
    // the normal start's copy is, so nothing mounted on it inside appears on the host).
    mount_attr attr{};
    attr.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    if (::mount_setattr(ws.get(), "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0)
      return fail("restrict the workspace mount", errno);
  }
  // The skills view: bound at the placeholder's .skills by the launch; a copy of that
  // mount, taken inside before the workspace covers it, goes onto the workspace's
  // .skills. No command has run in a warm sandbox yet, so nothing inside has moved.
  if (s.skills.sub.empty())
    return fail("find the warm sandbox's skills view", ENOENT);
  // The placeholder the sandbox shows at the mount path: the session's own folder. The
  // workspace goes exactly there, found without following links.
  struct stat placeholder{};
  if (::stat((s.private_dir + "/workspace").c_str(), &placeholder) != 0)
    return fail("find the warm sandbox's workspace", errno);
  const auto target = spec.mount_path;
  const int ws_fd = ws.get();
  int rc = in_mount_namespace(s.ns_pidfd.get(), [&] {
    unique_fd at{open_dir_no_links(AT_FDCWD, target)};
    struct stat here{};
    if (!at || ::fstat(at.get(), &here) != 0)
      return errno;
    if (here.st_dev != placeholder.st_dev || here.st_ino != placeholder.st_ino)
      return EXDEV;
    if (ws_fd < 0) // the placeholder stays the workspace, its view in place
      return 0;
    unique_fd old_view{open_dir_no_links(at.get(), ".skills", RESOLVE_BENEATH)};
    if (!old_view)
      return errno;
    unique_fd sk{static_cast<int>(::open_tree(old_view.get(), "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH))};
    if (!sk)
      return errno;
    if (::move_mount(ws_fd, "", at.get(), "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
      return errno;
    unique_fd top{open_dir_no_links(AT_FDCWD, target)};
    if (!top)
      return errno;
    unique_fd point{open_dir_no_links(top.get(), ".skills", RESOLVE_BENEATH | RESOLVE_NO_XDEV)};
    if (!point)
      return errno;
    if (::move_mount(sk.get(), "", point.get(), "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
      return errno;
    return 0;
  });
  if (rc != 0)
    return fail("attach the workspace inside a warm sandbox", rc);
  s.spec = spec;
  s.skills.target = spec.mount_path + "/.skills";
  return {};
}

} // namespace boxrt
