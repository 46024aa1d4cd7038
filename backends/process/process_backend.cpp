// The process backend: a session is a host directory, an exec a host shell in it.
#include "backends/process/process_backend.hpp"
#include "backends/linux/beneath.hpp"
#include "backends/linux/deadline.hpp"
#include "backends/linux/managed.hpp"
#include "backends/readiness_keys.hpp"
#include "backends/linux/session_dir.hpp"
#include "backends/linux/subprocess.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

namespace boxrt {

namespace {

namespace fs = std::filesystem;

constexpr const char* default_path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A session: its directory, its spec (for the workdir mapping of managed processes),
/// its managed processes and the sticky interrupt flag run_process polls.
class process_session final : public backend_session {
 public:
  process_session(std::string dir, box_spec spec) : dir_{std::move(dir)}, spec_{std::move(spec)} {
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
    processes_.kill_all();
  }

  void stop() noexcept {
    interrupted_.store(true, std::memory_order_release);
    stopped_.store(true, std::memory_order_release);
    processes_.kill_all();
  }

  const std::string& dir() const noexcept {
    return dir_;
  }

  const box_spec& spec() const noexcept {
    return spec_;
  }

  host_process_list& processes() noexcept {
    return processes_;
  }

  const std::atomic<bool>& interrupted() const noexcept {
    return interrupted_;
  }

 private:
  std::string dir_;
  box_spec spec_;
  host_process_list processes_;
  std::atomic<bool> interrupted_{false};
  std::atomic<bool> stopped_{false};
};

/// A normalised absolute sandbox path without a trailing '/' ("/" stays "/").
std::string normal(const std::string& path) {
  auto out = fs::path{path}.lexically_normal().string();
  while (out.size() > 1 && out.back() == '/')
    out.pop_back();
  return out;
}

std::string host_path_env() {
  const char* path = std::getenv("PATH");
  return path != nullptr && *path != '\0' ? path : default_path;
}

} // namespace

std::string process_host_workdir(const box_spec& spec, const std::string& session_dir) {
  std::vector<std::pair<std::string, std::string>> mounts;
  auto main_host = !spec.host_path.empty() && spec.host_path_mode != mount_mode::none
                     ? spec.host_path
                     : session_dir + "/workspace";
  mounts.emplace_back(normal(spec.mount_path), main_host);
  for (const auto& m : spec.extra_mounts)
    if (m.mode != mount_mode::none)
      mounts.emplace_back(normal(m.mount_path), m.host_path);
  auto workdir = normal(spec.workdir);
  const std::pair<std::string, std::string>* best = nullptr;
  for (const auto& mount : mounts) {
    const auto& at = mount.first;
    auto inside = at == "/" || workdir == at
                  || (workdir.size() > at.size() && workdir.starts_with(at)
                      && workdir[at.size()] == '/');
    if (inside && (best == nullptr || at.size() > best->first.size()))
      best = &mount;
  }
  if (best == nullptr)
    return session_dir + "/root" + workdir;
  auto rest = best->first == "/" ? workdir : workdir.substr(best->first.size());
  if (rest == "/")
    rest.clear();
  return best->second + rest;
}

process_backend::process_backend(std::string base_dir, std::string instance_id)
  : base_dir_{normal(fs::absolute(base_dir).string())},
    instance_id_{instance_id.empty() ? random_hex(12) : std::move(instance_id)} {
  spdlog::warn("process backend runs commands on the host without any isolation "
               "(sessions under {})",
               base_dir_);
}

readiness_report process_backend::probe_readiness(const std::string&, bool) {
  std::error_code err;
  fs::create_directories(base_dir_, err);
  auto report = unready_report("process", !err, false);
  if (err)
    report.error = "cannot create " + base_dir_ + ": " + err.message();
  return report;
}

result<std::shared_ptr<backend_session>> process_backend::start_session(const box_spec& spec) {
  if (auto e = prepare_host_path(spec, "process"))
    return e;
  std::error_code err;
  auto dir = session_dir_path(base_dir_, instance_id_, spec.session_id);
  for (const auto* sub : {"workspace", "home", "root"}) {
    fs::create_directories(dir + "/" + sub, err);
    if (err) {
      std::error_code ignored;
      fs::remove_all(dir, ignored);
      return make_box_error(ec::box_error, "process backend error: cannot create session "
                                             "directory " + dir + ": " + err.message());
    }
  }
  spdlog::info("process backend: session {} started in {}", spec.session_id, dir);
  return std::shared_ptr<backend_session>{std::make_shared<process_session>(std::move(dir), spec)};
}

result<exec_result> process_backend::exec(backend_session& session, const box_spec& spec,
                                          const exec_limits& limits) {
  auto started = std::chrono::steady_clock::now();
  auto* self = dynamic_cast<process_session*>(&session);
  if (self == nullptr)
    return make_box_error(ec::box_error, "process backend got a session of another backend");
  if (self->interrupted().load(std::memory_order_acquire))
    return interrupted_exec(spec, "process");

  auto workdir = shell_quote(process_host_workdir(spec, self->dir()));
  std::map<std::string, std::string> env{{"PATH", host_path_env()},
                                         {"HOME", self->dir() + "/home"}};
  for (const auto& [key, value] : spec.env)
    env[key] = value;
  run_options options;
  options.argv = {"/bin/sh", "-c",
                  "mkdir -p " + workdir + " && cd " + workdir + " && " + spec.cmd};
  for (const auto& [key, value] : env)
    options.env.push_back(key + "=" + value);
  options.cwd = self->dir();
  options.timeout = saturating_ms(spec.timeout_sec);
  options.max_output_bytes = limits.max_output_bytes;

  auto run = run_process(options, &self->interrupted());
  if (!run.started)
    return make_box_error(ec::box_error, "process backend error: " + run.error);
  return exec_result_of(std::move(run), spec, "process", started);
}

result<std::shared_ptr<managed_process>>
process_backend::start_managed_process(backend_session& session, const process_spec& spec) {
  auto* self = dynamic_cast<process_session*>(&session);
  if (self == nullptr)
    return make_box_error(ec::box_error, "process backend got a session of another backend");
  if (!self->alive() || self->interrupted().load(std::memory_order_acquire))
    return make_box_error(ec::box_error, "process backend error: session " + self->dir() + " is not running");
  auto mapped = self->spec();
  mapped.workdir = spec.cwd;
  host_process_options options;
  options.argv.push_back(spec.command);
  options.argv.insert(options.argv.end(), spec.args.begin(), spec.args.end());
  std::map<std::string, std::string> env{{"PATH", host_path_env()},
                                         {"HOME", self->dir() + "/home"}};
  for (const auto& [key, value] : spec.env)
    env[key] = value;
  for (const auto& [key, value] : env)
    options.env.push_back(key + "=" + value);
  options.cwd = process_host_workdir(mapped, self->dir());
  auto started = host_managed_process::start(options);
  if (!started)
    return make_box_error(ec::box_error, "process backend error: " + started.error().message);
  self->processes().add(started.value());
  spdlog::info("process backend: managed process {} started in {} (pid {})", spec.process_id,
               self->dir(), started.value()->pid());
  return std::shared_ptr<managed_process>{started.value()};
}

void process_backend::stop_session(backend_session& session) {
  auto* self = dynamic_cast<process_session*>(&session);
  if (self == nullptr)
    return;
  self->stop();
  std::error_code err;
  fs::remove_all(self->dir(), err);
  if (err)
    spdlog::warn("process backend: cannot remove session directory {}: {}", self->dir(),
                 err.message());
}

void process_backend::cleanup_orphans() {
  if (auto n = remove_foreign_session_dirs(base_dir_, instance_id_); n > 0)
    spdlog::info("process backend: removed {} session directories of earlier runs from {}", n,
                 base_dir_);
}

result<file_result> process_backend::file_action(backend_session& session, const file_op& op,
                                                 const files::limits& lim) {
  auto* self = dynamic_cast<process_session*>(&session);
  if (self == nullptr)
    return make_box_error(ec::box_error, "not a process session");
  const auto& spec = self->spec();
  const bool host = !spec.host_path.empty() && spec.host_path_mode != mount_mode::none;
  auto root = beneath::open_trusted(host ? spec.host_path : self->dir() + "/workspace", O_PATH | O_DIRECTORY);
  if (!root)
    return make_box_error(ec::box_error, "the session's workspace cannot be opened: " + std::string{std::strerror(errno)});
  files::workspace ws;
  ws.root = root.get();
  ws.read_only = host && spec.host_path_mode == mount_mode::ro;
  ws.shown = spec.mount_path;
  return files::run(ws, op, lim);
}

} // namespace boxrt
