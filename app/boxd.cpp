// boxd: the sandbox session runtime server. Thin: build the config, select the
// backend, start the actor system and the WebSocket server, wait for SIGINT/SIGTERM.
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <filesystem>
#include <iostream>
#include <malloc.h>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "actors/caf_support.hpp"
#include "actors/directory.hpp"
#include <systemd/sd-daemon.h>

#include "app/boxd_config.hpp"
#include "messages/base/version.hpp"
#include "app/runtime_parts.hpp"
#include "app/entitlements_file.hpp"
#include "backends/nsjail/nsjail.hpp"
#include "messages/base/log.hpp"
#include "net/ws/server.hpp"

using namespace boxrt;

namespace {

std::string getenv_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string{v} : std::string{};
}

} // namespace

/// Applies admission.entitlements_file (the current config's, box_init may change it):
/// every snapshot through the directory, as a pushed one, each answered (a revoking one
/// after its sessions stopped) before this returns. A bad file changes nothing.
void load_entitlements(caf::actor_system& sys, const runtime_actor& directory) {
  caf::scoped_actor self{sys};
  std::string path;
  self->request(directory, std::chrono::seconds{30}, health_atom_v)
    .receive([&](health_info& h) { path = h.settings.config.admission.entitlements_file; },
             [&](caf::error& err) {
               spdlog::error("boxd: entitlements file not loaded: {}", caf::to_string(err));
             });
  if (path.empty())
    return;
  auto snapshots = read_entitlements_file(path);
  if (!snapshots) {
    spdlog::error("boxd: {}; nothing was changed", snapshots.error().message);
    return;
  }
  size_t accepted = 0, refused = 0;
  int64_t revoked = 0;
  for (auto& snap : snapshots.value()) {
    // A stop request waits for nothing: the rest of the file is left for the next start.
    sigset_t pending;
    if (sigpending(&pending) == 0
        && (sigismember(&pending, SIGTERM) == 1 || sigismember(&pending, SIGINT) == 1)) {
      spdlog::warn("boxd: entitlements file {}: stopping; {} snapshot(s) not applied", path,
                   snapshots.value().size() - accepted - refused);
      return;
    }
    auto label = fmt::format("{}/{} revision {}", snap.instance_uuid, snap.workspace_uuid,
                             snap.entitlement_revision);
    self->request(directory, std::chrono::seconds{60}, entitle_atom_v, snap)
      .receive(
        [&](entitlement_receipt& r) {
          ++accepted;
          revoked += r.revoked_sessions;
        },
        [&](caf::error& err) {
          ++refused;
          spdlog::warn("boxd: entitlements file {}: {} refused: {}", path, label,
                       from_caf_error(err).to_wire());
        });
  }
  spdlog::info("boxd: entitlements file {} loaded: {} snapshot(s) accepted, {} refused, {} "
               "session(s) revoked",
               path, accepted, refused, revoked);
}

int main(int argc, char** argv) {
  // glibc raises its mmap threshold to the size of every large block freed, up to 32 MiB,
  // so once a few large replies have gone, later ones come from the malloc arenas of
  // whichever thread built them and stay resident after they are freed. A fixed
  // threshold keeps large buffers (replies, captured output) in their own mappings, given
  // back on free; it also fixes the trim threshold, which the sliding one doubles.
  ::mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  ::mallopt(M_TRIM_THRESHOLD, 1024 * 1024);
  auto logger = spdlog::stderr_color_mt("boxd");
  spdlog::set_default_logger(logger);
  logs::use_json(false);  // text until the config says otherwise

  std::vector<std::string> args{argv + 1, argv + argc};
  auto loaded = load_boxd_config(args, +[](const char* n) { return getenv_or_empty(n); });
  if (!loaded) {
    // Validation errors carry their class, as a client would read them.
    const auto& e = loaded.error();
    if (e.code == ec::validation)
      spdlog::critical("boxd: {}: {}", wire_class(e.code), e.message);
    else
      spdlog::critical("boxd: {}", e.message);
    return 2;
  }
  auto cfg = std::move(loaded.value());
  switch (cfg.command) {
    case boxd_command::help: std::cout << boxd_usage(); return 0;
    case boxd_command::version: std::cout << version_line() << std::endl; return 0;
    case boxd_command::check_config: std::cout << effective_config(cfg); return 0;
    case boxd_command::run: break;
  }
  logs::use_json(cfg.server.log_json);
  spdlog::info("boxd: {}", version_line());

  // Service managers give a soft descriptor limit of 1024 and a higher hard one: every
  // connection, sandbox (six each), pipe and quota image needs descriptors, so take
  // the hard limit; as root, raise the hard limit itself to the kernel's ceiling
  // (fs.nr_open, at most 1,048,576) first, since a hard limit of 20,000 would cap a host
  // near 2,000 sandboxes.
  if (rlimit lim{}; ::getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    rlim_t ceiling = 1048576;
    if (std::ifstream in{"/proc/sys/fs/nr_open"}; in >> ceiling)
      ceiling = std::min<rlim_t>(ceiling, 1048576);
    if (::geteuid() == 0 && lim.rlim_max < ceiling) {
      const rlimit up{ceiling, ceiling};
      if (::setrlimit(RLIMIT_NOFILE, &up) == 0) {
        spdlog::info("boxd: open file limit raised from {} to {} (the hard limit from {})", lim.rlim_cur, ceiling,
                     lim.rlim_max);
        lim = up;
      } else {
        spdlog::warn("boxd: cannot raise the hard open file limit from {} to {}: {} (without CAP_SYS_RESOURCE, "
                     "each live sandbox's descriptors count against it)",
                     lim.rlim_max, ceiling, std::strerror(errno));
      }
    }
    if (lim.rlim_cur < lim.rlim_max) {
      const auto soft = lim.rlim_cur;
      lim.rlim_cur = lim.rlim_max;
      if (::setrlimit(RLIMIT_NOFILE, &lim) == 0)
        spdlog::info("boxd: open file limit raised from {} to {}", soft, lim.rlim_max);
      else
        spdlog::warn("boxd: cannot raise the open file limit from {}: {}", soft, std::strerror(errno));
    }
  }

  for (auto& w : cfg.warnings)
    spdlog::warn("{}", w);

  runtime_config rc;
  rc.box = cfg.box;
  rc.sandbox_uid_first = cfg.server.sandbox_uid_first;
  rc.sandbox_uid_last = cfg.server.sandbox_uid_last;
  rc.host_gid = cfg.server.host_gid;
  rc.listen_host = cfg.server.host;
  rc.trusted_instance = cfg.server.trusted_instance;
  rc.testing = cfg.server.testing;
  rc.init_state = cfg.init_state;
  rc.unsafe_soft_storage = cfg.unsafe_soft_storage;
  rc.transfer_dir = cfg.server.transfer_dir;
  rc.cluster = cfg.cluster;
  // The helpers sit beside boxd in a build folder, in ../libexec/boxrt once installed.
  if (auto dir = own_exe_dir(); ::access((dir + "/boxrt-init").c_str(), X_OK) != 0) {
    std::error_code err;
    auto installed = std::filesystem::weakly_canonical(dir + "/../libexec/boxrt", err);
    if (!err && ::access((installed / "boxrt-init").c_str(), X_OK) == 0)
      rc.helper_dir = installed.string();
  }

  // Signals go to the waiting thread below, never to the I/O or actor threads.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);  // reloads admission.entitlements_file, never stops boxd
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  caf::actor_system_config sys_cfg;
  configure(sys_cfg, rc);
  tune_scheduler(sys_cfg, 2);
  caf::actor_system sys{sys_cfg};
  start_failure failure;
  auto parts = start_runtime(sys, rc, failure);
  if (!parts) {
    // Logged where it failed. Past the start of a cluster node's membership its thread
    // runs: the process ends here, skipping the destructors that thread could still reach.
    spdlog::shutdown();
    std::_Exit(failure.exit_code);
  }
  auto cluster_node = parts->cluster_node;
  auto directory = parts->directory;
  auto pool = parts->pool;
  auto processes = parts->processes;
  auto snapshot = parts->snapshot;
  auto trusted = parts->trusted;
  auto leave = [&](int code) {
    if (cluster_node) {
      spdlog::shutdown();
      std::_Exit(code);
    }
    return code;
  };

  // The entitlements file counts before anything serves.
  load_entitlements(sys, directory);

  int exit_code = 0;
  {
    net::server server{sys, directory, pool, cfg.server, processes, snapshot, trusted};
    if (cluster_node) {
      auto endpoints = std::make_shared<net::cluster_endpoints>();
      endpoints->node_id = cluster_node->id();
      endpoints->status = [cluster_node] { return cluster_node->status_json(); };
      endpoints->owner = [cluster_node](const std::string& i, const std::string& w) {
        return cluster_node->owner_json(i, w);
      };
      server.set_cluster(std::move(endpoints));
    }
    uint16_t port = 0;
    try {
      port = server.start();
    } catch (const std::exception& e) {
      spdlog::critical("boxd: {}", e.what());
      caf::anon_send_exit(directory, caf::exit_reason::user_shutdown);
      return leave(1);
    }
    auto host = cfg.server.host.find(':') != std::string::npos ? "[" + cfg.server.host + "]"
                                                               : cfg.server.host;
    {
      std::error_code err;
      auto data = std::filesystem::absolute(host_root_of(cfg.box.local), err);
      auto uploads = std::filesystem::absolute(cfg.server.transfer_dir, err);
      spdlog::info("boxd: data folder {} (workspaces, state, quota images); uploads {}", data.string(),
                   uploads.string());
    }
    std::cout << "boxd listening on ws://" << host << ":" << port << std::endl;
    // Under systemd (Type=notify): ready now. NOTIFY_SOCKET is unset on the way, so no
    // process boxd starts later (a sandbox) inherits it.
    if (::getenv("NOTIFY_SOCKET") != nullptr) {
      auto status = "READY=1\nSTATUS=listening on ws://" + host + ":" + std::to_string(port);
      if (int rc = sd_notify(1, status.c_str()); rc < 0)
        spdlog::warn("boxd: sd_notify failed: {}", std::strerror(-rc));
    }
    int sig = 0;
    while (sigwait(&signals, &sig) == 0 && sig == SIGHUP) {
      spdlog::info("boxd: SIGHUP received, reloading the entitlements file");
      load_entitlements(sys, directory);
    }
    spdlog::info("boxd: signal {} received, shutting down", sig);
    // Sessions first: their in-flight requests are answered ("Box runtime is shutting
    // down") while the sockets are still open; then the sockets close with 1001.
    {
      caf::scoped_actor self{sys};
      self->request(directory, std::chrono::seconds{60}, shutdown_atom_v)
        .receive([](int64_t n) { spdlog::info("boxd: stopped {} session(s)", n); },
                 [&](caf::error& err) {
                   spdlog::error("boxd: shutdown incomplete: {}", caf::to_string(err));
                   exit_code = 1;
                 });
    }
    server.stop();
  }
  if (parts->cluster) {
    // Leaves the cluster (the lease is revoked: its workspaces are free at once). Link
    // attempts to a paused peer may still be blocked inside the middleman: the process
    // ends here rather than wait for them.
    caf::anon_send_exit(directory, caf::exit_reason::user_shutdown);
    parts->cluster.reset();
    spdlog::shutdown();
    std::_Exit(exit_code);
  }
  if (exit_code != 0) {
    // A session did not stop in time: the actor system would wait for it forever.
    spdlog::shutdown();
    std::_Exit(exit_code);
  }
  caf::anon_send_exit(directory, caf::exit_reason::user_shutdown);
  return exit_code;
}
