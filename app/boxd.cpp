// boxd: the sandbox session runtime server. Thin: build the config, select the
// backend, start the actor system and the WebSocket server, wait for SIGINT/SIGTERM.
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <malloc.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "actors/caf_support.hpp"
#include "actors/directory.hpp"
#include "app/boxd_config.hpp"
#include "app/entitlements_file.hpp"
#include "backends/state/admission_store.hpp"
#include "backends/mount_policy.hpp"
#include "backends/sandbox/sandbox.hpp"
#include "backends/registry.hpp"
#include "backends/linux/watchdog.hpp"
#include "backends/nsjail/nsjail.hpp"
#include "net/cluster/node.hpp"
#include "net/cluster/router.hpp"
#include "messages/base/log.hpp"
#include "messages/base/pytext.hpp"
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
void load_entitlements(caf::actor_system& sys, const directory_actor& directory) {
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

/// Whether the data directories already hold tenant workspaces or skills.
bool holds_tenant_state(const local_config& local) {
  for (const auto& root : {local.default_workspace, local.skills_root}) {
    if (root.empty())
      continue;
    std::error_code err;
    std::filesystem::directory_iterator it{std::filesystem::path{root} / "tenants", err};
    if (!err && it != std::filesystem::directory_iterator{})
      return true;
  }
  return false;
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
  logs::use_json(cfg.server.log_json);

  // Service managers give a soft descriptor limit of 1024 and a higher hard one: every
  // connection, sandbox, pipe and quota image needs descriptors, so take the hard limit.
  if (rlimit lim{}; ::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    const auto soft = lim.rlim_cur;
    lim.rlim_cur = lim.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &lim) == 0)
      spdlog::info("boxd: open file limit raised from {} to {}", soft, lim.rlim_max);
    else
      spdlog::warn("boxd: cannot raise the open file limit from {}: {}", soft,
                   std::strerror(errno));
  }

  for (auto& w : cfg.warnings)
    spdlog::warn("{}", w);
  cfg.box.local = resolve_local(cfg.box.local);
  if (auto err = ensure_default_workspace(cfg.box.local))
    spdlog::warn("{}", err.message);

  host_options host;
  host.uid_first = cfg.server.sandbox_uid_first;
  host.uid_last = cfg.server.sandbox_uid_last;
  // A cluster node (docs/cluster.md): its membership, ownership and admission state live
  // in etcd; its uids come from cluster.uid_range, reserved cluster-wide.
  std::shared_ptr<net::cluster::node> cluster_node;
  if (cfg.cluster.enabled) {
    net::cluster::node_options no;
    no.node_id = cfg.cluster.node_id;
    no.address = cfg.cluster.advertise_host + ":" + std::to_string(cfg.cluster.advertise_port);
    no.etcd.endpoints = cfg.cluster.etcd_endpoints;
    if (cfg.cluster.etcd_tls)
      no.etcd.tls = net::etcd::tls_files{cfg.cluster.etcd_tls->certificate, cfg.cluster.etcd_tls->key,
                                         cfg.cluster.etcd_tls->ca_file};
    no.prefix = cfg.cluster.etcd_prefix;
    no.lease = std::chrono::milliseconds{cfg.cluster.lease_ms};
    no.takeover_wait = std::chrono::milliseconds{cfg.cluster.takeover_wait_ms};
    cluster_node = std::make_shared<net::cluster::node>(std::move(no));
    host.uid_first = cfg.cluster.uid_first;
    host.uid_last = cfg.cluster.uid_last;
    host.cluster_node = cfg.cluster.node_id;
    host.reserve_uid = [cluster_node](uint32_t uid, const std::string& key, bool session) {
      return cluster_node->reserve_uid(uid, key, session);
    };
    host.release_uid = [cluster_node](uint32_t uid, const std::string& key) { cluster_node->release_uid(uid, key); };
  }
  // The lease deadline reaches the watchdog once it runs; membership starts first, so the
  // backend's self-test below can reserve a uid under the node's lease.
  struct deadline_relay {
    std::atomic<int64_t> last{-1};
    std::atomic<watchdog*> dog{nullptr};
  };
  auto relay = std::make_shared<deadline_relay>();
  if (cluster_node) {
    cluster_node->start([relay](int64_t deadline) {
      relay->last = deadline;
      if (auto* w = relay->dog.load())
        deadline == 0 ? w->fence_now() : w->set_deadline(deadline);
    });
    if (!cluster_node->wait_serving(std::chrono::milliseconds{cfg.cluster.lease_ms}))
      spdlog::warn("boxd: cluster node {} is not serving yet: {}", cluster_node->id(), cluster_node->reason());
  }
  // Past this point a cluster node's membership thread runs: an early end skips the
  // destructors it could still reach.
  auto leave = [&](int code) {
    if (cluster_node) {
      spdlog::shutdown();
      std::_Exit(code);
    }
    return code;
  };
  host.host_gid = cfg.server.host_gid >= 0 ? cfg.server.host_gid : static_cast<int64_t>(::getegid());
  host.listen_host = cfg.server.host;
  auto choice = select_backend(cfg.box, host);
  if (!choice.backend) {
    spdlog::warn("==================================================================");
    spdlog::warn("No sandbox backend is available: {}", choice.reason);
    spdlog::warn("boxd serves, reports available=false and refuses execs with "
                 "BoxBackendUnavailableError. The fix: a backend that runs here (bubblewrap "
                 "as root: apt-get install bubblewrap), named in box.backend.");
    spdlog::warn("==================================================================");
  } else if (!choice.backend->isolating()) {
    spdlog::warn("==================================================================");
    spdlog::warn("backend \"{}\" ISOLATES NOTHING: commands run unsandboxed. Use it for "
                 "development and tests only.",
                 choice.backend->name());
    spdlog::warn("==================================================================");
  }
  if (cfg.server.testing)
    spdlog::warn("server.testing is set: the scripted test backend may make admission mode ready. "
                 "Never set it in production.");

  // Signals go to the waiting thread below, never to the I/O or actor threads.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);  // reloads admission.entitlements_file, never stops boxd
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  caf::actor_system_config sys_cfg;
  configure_actor_system(sys_cfg, 2);
  if (cluster_node) {
    // Links between nodes: CAF's middleman (BASP) over TLS with certificates on both
    // sides, checked against the cluster's CA.
    sys_cfg.load<caf::io::middleman>();
    // Messages from peers are deserialized by the middleman's broker itself, not handed
    // to a pool of BASP workers first: one thread wake-up less per forwarded request.
    sys_cfg.set("middleman.workers", size_t{0});
    sys_cfg.load<caf::openssl::manager>();
    sys_cfg.openssl_certificate = cfg.cluster.tls.certificate;
    sys_cfg.openssl_key = cfg.cluster.tls.key;
    sys_cfg.openssl_cafile = cfg.cluster.tls.ca_file;
  }
  caf::actor_system sys{sys_cfg};
  auto pool = std::make_shared<worker_pool>();
  auto processes = std::make_shared<process_registry>();
  if (choice.backend)
    choice.backend->cleanup_orphans();

  // Admission state is loaded before anything serves (contract §4.11); a cluster node's
  // is in etcd, each write fenced by the node's ownership of the workspace.
  std::shared_ptr<admission_store> store;
  if (!cluster_node) {
    admission_state_options state_opts;
    state_opts.host_root = cfg.box.local.host_root;
    state_opts.admission_mode = cfg.box.admission_mode();
    state_opts.init_state = cfg.init_state;
    state_opts.tenant_state_exists = holds_tenant_state(cfg.box.local);
    auto state = open_admission_state(state_opts);
    if (!state.refusal.empty()) {
      spdlog::critical("boxd: {}", state.refusal);
      return 2;
    }
    if (!state.note.empty())
      spdlog::warn("boxd: {}", state.note);
    if (cfg.server.testing)
      if (auto n = getenv_or_empty("BOXD_TEST_CRASH_AFTER_COMMITS"); !n.empty())
        state.store->crash_after_commits(std::stoull(n));
    store = state.store;
  }

  // The node's watchdog fences its sandboxes when boxd stops renewing its lease.
  std::unique_ptr<watchdog> dog;
  if (cluster_node) {
    std::vector<std::string> groups;
    std::string records;
    if (auto* b = dynamic_cast<sandbox_backend*>(choice.backend.get())) {
      groups = b->cgroup_dirs();
      records = b->mount_records_dir();
    }
    auto started = watchdog::start(own_exe_dir() + "/boxrt-watchdog", groups, records);
    if (!started) {
      spdlog::critical("boxd: cannot start boxrt-watchdog: {}", started.error().message);
      return leave(1);
    }
    dog = std::move(started.value());
    relay->dog = dog.get();
    if (auto last = relay->last.load(); last == 0)
      dog->fence_now();
    else if (last > 0)
      dog->set_deadline(last);
  }

  directory_args dargs;
  dargs.store = store;
  dargs.config = cfg.box;
  auto trusted = std::make_shared<trusted_instance>();
  if (cluster_node)
    trusted->use_shared(
      [cluster_node](std::string_view id) {
        auto pinned = cluster_node->pin_instance(id);
        if (!pinned)
          spdlog::error("boxd: the trusted instance cannot be pinned: {}", pinned.error().message);
        return pinned ? *pinned : std::string{};
      },
      [cluster_node] { return cluster_node->pinned_instance(); });
  if (!cfg.server.trusted_instance.empty() && !trusted->pin(cfg.server.trusted_instance)) {
    spdlog::critical("boxd: server.trusted_instance is not the instance the cluster has pinned ({})",
                     trusted->get());
    return leave(2);
  }
  dargs.trusted = trusted;
  dargs.backend = choice.backend;
  dargs.backend_name = choice.name;
  // A box_init may name another backend while no session exists (protocol.md §4.10.1).
  dargs.select = [host](const box_config& box, const backend_ptr& current) {
    // bwrap again on the same state folder: the current one, not a second backend.
    auto wanted = py::strip(box.backend);
    bool bwrap_wanted = wanted.empty() || wanted == "auto" || wanted == "local" || wanted == "bwrap";
    if (auto* b = dynamic_cast<sandbox_backend*>(current.get());
        b && bwrap_wanted && b->options().driver == sandbox_driver::bwrap
        && b->options().state_dir == sandbox_options_for(box, host).state_dir)
      return backend_pick{current, "bwrap", ""};
    auto next = select_backend(box, host);
    if (next.backend) {
      next.backend->cleanup_orphans();
      if (!next.backend->isolating())
        spdlog::warn("box_init selected backend \"{}\", which ISOLATES NOTHING", next.backend->name());
    }
    return backend_pick{next.backend, next.name, next.reason};
  };
  dargs.backend_reason = choice.reason;
  if (!cluster_node)
    choice.backend.reset();  // the directory's backend slot is its owner from here
  dargs.pool = pool;
  dargs.processes = processes;
  dargs.unsafe_soft_storage = cfg.unsafe_soft_storage;
  auto snapshot = std::make_shared<settings_snapshot>();
  dargs.snapshot = snapshot;
  dargs.testing = cfg.server.testing;
  // A cluster node's network side talks to its router, which reaches each workspace's
  // owner; the router starts a fresh directory whenever the node's lease changes.
  std::unique_ptr<net::cluster::runtime> cluster;
  directory_actor directory;
  if (cluster_node) {
    net::cluster::router_args ra;
    ra.self_node = cluster_node;
    ra.pool = pool;
    ra.listen_host = cfg.cluster.listen_host;
    ra.listen_port = cfg.cluster.listen_port;
    ra.upload_dir = (std::filesystem::path{cfg.box.local.host_root} / "state" / "cluster-uploads").string();
    std::filesystem::create_directories(ra.upload_dir);
    ::chmod(ra.upload_dir.c_str(), 0700);
    // Each directory's admission writes are fenced by the lease it was started under: a
    // directory still stopping after the lease changed writes nothing, even for a
    // workspace the node owns again under the new lease.
    ra.spawn_local = [&sys, dargs, cluster_node] {
      auto args = dargs;
      auto lease = cluster_node->lease();
      args.store = std::make_shared<net::cluster::etcd_admission_store>(
        cluster_node->options().etcd, cluster_node->options().prefix,
        [cluster_node, lease](const std::string& key) -> std::optional<net::cluster::fence> {
          if (lease == 0 || cluster_node->lease() != lease)
            return std::nullopt;
          return cluster_node->fence_of(key);
        });
      return spawn_directory(sys, std::move(args));
    };
    auto started = net::cluster::runtime::start(sys, std::move(ra));
    if (!started) {
      spdlog::critical("boxd: {}: {}", wire_class(started.error().code), started.error().message);
      return leave(2);
    }
    cluster = std::move(started.value());
    directory = cluster->router();
  } else {
    directory = spawn_directory(sys, std::move(dargs));
  }

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
    std::cout << "boxd listening on ws://" << host << ":" << port << std::endl;
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
  if (cluster) {
    // Leaves the cluster (the lease is revoked: its workspaces are free at once). Link
    // attempts to a paused peer may still be blocked inside the middleman: the process
    // ends here rather than wait for them.
    caf::anon_send_exit(directory, caf::exit_reason::user_shutdown);
    cluster.reset();
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
