// boxrt as a library (app/runtime.hpp): the runtime's start, shared by boxd and by
// applications that embed it.
#include "app/runtime_parts.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include <sys/stat.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/caf_support.hpp"
#include "actors/cluster/tls_errors.hpp"
#include "app/boxd_config.hpp"
#include "backends/mount_policy.hpp"
#include "backends/nsjail/nsjail.hpp"
#include "backends/registry.hpp"
#include "backends/sandbox/sandbox.hpp"
#include "backends/state/admission_store.hpp"
#include "backends/state/etcd_admission_store.hpp"
#include "messages/base/pytext.hpp"
#include "messages/codec.hpp"
#include "net/etcd/client.hpp"

namespace boxrt {

namespace {

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

box_error invalid(std::string text) { return {ec::validation, std::move(text)}; }

} // namespace

box_error validate_runtime_config(const runtime_config& rc) {
  if (!known_backend(py::strip(rc.box.backend)))
    return invalid("box.backend must be one of auto, bwrap, nsjail, process or scripted, got \"" + rc.box.backend + "\"");
  if (rc.sandbox_uid_first < 1 || rc.sandbox_uid_first > rc.sandbox_uid_last || rc.sandbox_uid_last > 4294967294u)
    return invalid("server.sandbox_uid_range must be [FIRST, LAST] with 1 <= FIRST <= LAST <= 4294967294");
  if (!rc.helper_dir.empty() && ::access(rc.helper_dir.c_str(), X_OK) != 0)
    return invalid("helper_dir " + rc.helper_dir + " is not a folder boxd can search");
  if (auto err = check_runtime_limits(rc.box.limits))
    return err;
  if (auto err = check_cluster_config(rc.cluster))
    return err;
  // Sandbox uids never belong to users' own containers (/etc/subuid, /etc/subgid).
  auto first = rc.cluster.enabled ? rc.cluster.uid_first : rc.sandbox_uid_first;
  auto last = rc.cluster.enabled ? rc.cluster.uid_last : rc.sandbox_uid_last;
  if (auto clash = subid_overlap(first, last); !clash.empty())
    return invalid(std::string{rc.cluster.enabled ? "cluster.uid_range " : "server.sandbox_uid_range "}
                   + std::to_string(first) + "-" + std::to_string(last) + " overlaps " + clash);
  return {};
}

std::shared_ptr<runtime_parts> start_runtime(caf::actor_system& sys, const runtime_config& rc_in,
                                             start_failure& failure) {
  std::shared_ptr<cluster::node> cluster_node;
  auto fail = [&](box_error err, int code) -> std::shared_ptr<runtime_parts> {
    failure.error = std::move(err);
    failure.exit_code = code;
    if (cluster_node && failure.stop_membership)
      cluster_node->stop();
    return nullptr;
  };
  if (auto err = validate_runtime_config(rc_in)) {
    spdlog::critical("boxd: {}: {}", wire_class(err.code), err.message);
    return fail(std::move(err), 2);
  }
  auto rc = rc_in;
  rc.box.local = resolve_local(rc.box.local);
  if (auto err = ensure_default_workspace(rc.box.local))
    spdlog::warn("{}", err.message);
  auto parts = std::make_shared<runtime_parts>();

  host_options host;
  host.uid_first = rc.sandbox_uid_first;
  host.uid_last = rc.sandbox_uid_last;
  host.helper_dir = rc.helper_dir;
  // A cluster node (docs/cluster.md): its membership, ownership and admission state live
  // in etcd; its uids come from cluster.uid_range, reserved cluster-wide.
  if (rc.cluster.enabled) {
    cluster::node_options no;
    no.node_id = rc.cluster.node_id;
    no.address = rc.cluster.advertise_host + ":" + std::to_string(rc.cluster.advertise_port);
    net::etcd::options etcd;
    etcd.endpoints = rc.cluster.etcd_endpoints;
    if (rc.cluster.etcd_tls)
      etcd.tls = net::etcd::tls_files{rc.cluster.etcd_tls->certificate, rc.cluster.etcd_tls->key,
                                      rc.cluster.etcd_tls->ca_file};
    no.store = net::etcd::connector(std::move(etcd));
    no.prefix = rc.cluster.etcd_prefix;
    no.lease = std::chrono::milliseconds{rc.cluster.lease_ms};
    no.takeover_wait = std::chrono::milliseconds{rc.cluster.takeover_wait_ms};
    cluster_node = std::make_shared<cluster::node>(std::move(no));
    host.uid_first = rc.cluster.uid_first;
    host.uid_last = rc.cluster.uid_last;
    host.cluster_node = rc.cluster.node_id;
    host.reserve_uid = [cluster_node](uint32_t uid, const std::string& key, bool session) {
      return cluster_node->reserve_uid(uid, key, session);
    };
    host.release_uid = [cluster_node](uint32_t uid, const std::string& key) { cluster_node->release_uid(uid, key); };
  }
  parts->cluster_node = cluster_node;
  // The lease deadline reaches the watchdog once it runs; membership starts first, so the
  // backend's self-test below can reserve a uid under the node's lease.
  auto relay = std::make_shared<runtime_parts::deadline_relay>();
  parts->relay = relay;
  if (cluster_node) {
    cluster_node->start([relay](int64_t deadline) {
      relay->last = deadline;
      if (auto* w = relay->dog.load())
        deadline == 0 ? w->fence_now() : w->set_deadline(deadline);
    });
    failure.membership_started = true;
    if (!cluster_node->wait_serving(std::chrono::milliseconds{rc.cluster.lease_ms}))
      spdlog::warn("boxd: cluster node {} is not serving yet: {}", cluster_node->id(), cluster_node->reason());
  }
  host.host_gid = rc.host_gid >= 0 ? rc.host_gid : static_cast<int64_t>(::getegid());
  host.listen_host = rc.listen_host;
  auto choice = select_backend(rc.box, host);
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
  if (rc.testing)
    spdlog::warn("server.testing is set: the scripted test backend may make admission mode ready. "
                 "Never set it in production.");

  parts->pool = std::make_shared<worker_pool>();
  parts->processes = std::make_shared<process_registry>();
  if (choice.backend)
    choice.backend->cleanup_orphans();
  // A cluster node's uid reservations follow its uid record, now that the clean-up has
  // freed the uids of sessions whose trees are gone.
  if (cluster_node)
    if (auto* b = dynamic_cast<sandbox_backend*>(choice.backend.get()))
      cluster_node->reconcile_uids(b->held_uids());

  // Admission state is loaded before anything serves (contract §4.11); a cluster node's
  // is in etcd, each write fenced by the node's ownership of the workspace.
  std::shared_ptr<admission_store> store;
  if (!cluster_node) {
    admission_state_options state_opts;
    state_opts.host_root = rc.box.local.host_root;
    state_opts.admission_mode = rc.box.admission_mode();
    state_opts.init_state = rc.init_state;
    state_opts.tenant_state_exists = holds_tenant_state(rc.box.local);
    auto state = open_admission_state(state_opts);
    if (!state.refusal.empty()) {
      spdlog::critical("boxd: {}", state.refusal);
      return fail({ec::runtime_unavailable, state.refusal}, 2);
    }
    if (!state.note.empty())
      spdlog::warn("boxd: {}", state.note);
    if (rc.testing)
      if (const char* n = std::getenv("BOXD_TEST_CRASH_AFTER_COMMITS"); n && *n)
        state.store->crash_after_commits(std::stoull(n));
    store = state.store;
  }

  // The node's watchdog fences its sandboxes when boxd stops renewing its lease.
  if (cluster_node) {
    std::vector<std::string> groups;
    std::string records;
    if (auto* b = dynamic_cast<sandbox_backend*>(choice.backend.get())) {
      groups = b->cgroup_dirs();
      records = b->mount_records_dir();
    }
    auto dir = rc.helper_dir.empty() ? own_exe_dir() : rc.helper_dir;
    auto started = watchdog::start(dir + "/boxrt-watchdog", groups, records);
    if (!started) {
      spdlog::critical("boxd: cannot start boxrt-watchdog: {}", started.error().message);
      return fail({ec::runtime_unavailable, "cannot start boxrt-watchdog: " + started.error().message}, 1);
    }
    parts->dog = std::move(started.value());
    relay->dog = parts->dog.get();
    if (auto last = relay->last.load(); last == 0)
      parts->dog->fence_now();
    else if (last > 0)
      parts->dog->set_deadline(last);
  }

  directory_args dargs;
  dargs.store = store;
  dargs.config = rc.box;
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
  if (!rc.trusted_instance.empty() && !trusted->pin(rc.trusted_instance)) {
    auto text = "server.trusted_instance is not the instance the cluster has pinned (" + trusted->get() + ")";
    spdlog::critical("boxd: {}", text);
    return fail(invalid(text), 2);
  }
  parts->trusted = trusted;
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
  if (cluster_node)
    parts->backend = choice.backend;
  choice.backend.reset(); // the directory's backend slot is its owner from here
  dargs.pool = parts->pool;
  dargs.processes = parts->processes;
  dargs.unsafe_soft_storage = rc.unsafe_soft_storage;
  if (!rc.transfer_dir.empty())
    dargs.transfer_dir = std::filesystem::absolute(rc.transfer_dir).lexically_normal().string();
  parts->snapshot = std::make_shared<settings_snapshot>();
  dargs.snapshot = parts->snapshot;
  dargs.testing = rc.testing;
  if (!cluster_node) {
    parts->directory = spawn_directory(sys, std::move(dargs));
    return parts;
  }
  // A cluster node's network side talks to its router, which reaches each workspace's
  // owner; the router starts a fresh directory whenever the node's lease changes.
  cluster::router_args ra;
  ra.self_node = cluster_node;
  ra.pool = parts->pool;
  ra.listen_host = rc.cluster.listen_host;
  ra.listen_port = rc.cluster.listen_port;
  ra.upload_dir = (std::filesystem::path{rc.box.local.host_root} / "state" / "cluster-uploads").string();
  ra.certificate = rc.cluster.tls.certificate;
  ra.key = rc.cluster.tls.key;
  ra.ca_file = rc.cluster.tls.ca_file;
  std::error_code made;
  std::filesystem::create_directories(ra.upload_dir, made);
  if (made || ::chmod(ra.upload_dir.c_str(), 0700) != 0) {
    auto text = "cannot prepare " + ra.upload_dir + ": " + (made ? made.message() : std::strerror(errno));
    spdlog::critical("boxd: {}", text);
    return fail({ec::runtime_unavailable, text}, 1);
  }
  // Each directory's admission writes are fenced by the lease it was started under: a
  // directory still stopping after the lease changed writes nothing, even for a
  // workspace the node owns again under the new lease.
  ra.spawn_local = [&sys, dargs, cluster_node] {
    auto args = dargs;
    auto lease = cluster_node->lease();
    args.store = std::make_shared<cluster::etcd_admission_store>(
      cluster_node->options().store, cluster_node->options().prefix,
      [cluster_node, lease](const std::string& key) -> std::optional<cluster::fence> {
        if (lease == 0 || cluster_node->lease() != lease)
          return std::nullopt;
        return cluster_node->fence_of(key);
      });
    args.probe_gate = [cluster_node] { return cluster_node->serving(); };
    return spawn_directory(sys, std::move(args));
  };
  auto started = cluster::runtime::start(sys, std::move(ra));
  if (!started) {
    spdlog::critical("boxd: {}: {}", wire_class(started.error().code), started.error().message);
    return fail(started.error(), 2);
  }
  parts->cluster = std::move(started.value());
  parts->directory = parts->cluster->router();
  return parts;
}

void configure(caf::actor_system_config& cfg) {
  add_boxrt_types(cfg);
  // Rendered as a client of boxd reads it: "BoxValidationError: ...".
  cfg.add_error_category(caf::atom("boxrt"), [](uint8_t code, caf::atom_value, const caf::message& ctx) {
    std::string text;
    if (ctx.size() == 1 && ctx.match_element<std::string>(0))
      text = ctx.get_as<std::string>(0);
    return std::string{wire_class(static_cast<ec>(code))} + ": " + text;
  });
}

void configure(caf::actor_system_config& cfg, const runtime_config& rc) {
  configure(cfg);
  if (!rc.cluster.enabled)
    return;
  // Links between nodes: CAF's middleman (BASP) over TLS with certificates on both
  // sides, checked against the cluster's CA.
  cfg.load<caf::io::middleman>();
  // Messages from peers are deserialized by the middleman's broker itself, not handed
  // to a pool of BASP workers first: one thread wake-up less per forwarded request.
  cfg.set("middleman.workers", size_t{0});
  cfg.load<caf::openssl::manager>();
  // A stranger's failed handshake must not close healthy links (net/cluster/tls_errors).
  if (!cluster::tls_error_queue_guarded())
    spdlog::warn("cluster: OpenSSL's calls are not guarded here (boxrt is not linked into the "
                 "executable): a peer that fails its TLS handshake may close healthy links");
  cfg.openssl_certificate = rc.cluster.tls.certificate;
  cfg.openssl_key = rc.cluster.tls.key;
  cfg.openssl_cafile = rc.cluster.tls.ca_file;
}

caf::expected<runtime_actor> spawn_runtime(caf::actor_system& sys, const runtime_config& rc) {
  if (rc.box.local.host_root.empty())
    return to_caf_error(invalid("box.local.host_root must be set"));
  start_failure failure;
  failure.stop_membership = true;
  auto parts = start_runtime(sys, rc, failure);
  if (!parts)
    return to_caf_error(failure.error);
  auto handle = parts->directory;
  // The parts live as long as the runtime's handle actor: the router's or directory's
  // end releases them (a cluster node's runtime stops linking and renewing, and gives
  // its lease up). They hold no handle of the actor itself, so that the actor's end
  // is what ends them.
  parts->directory = nullptr;
  auto keep = caf::actor_cast<caf::actor>(handle);
  keep->attach_functor([parts]() mutable { parts.reset(); });
  return handle;
}

} // namespace boxrt
