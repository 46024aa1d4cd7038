// A CAF application that embeds boxrt (docs/embedding.md): it starts the runtime in its
// own actor system, pushes a workspace entitlement, runs a command in the workspace's
// sandbox through typed messages and shuts the runtime down as boxd's SIGTERM does.
// Usage: embed_example DATA_DIR [BACKEND]. Exit 0 when every step did what it should.
// With BOXRT_EMBED_NODE_ID set it is one node of a boxd cluster (BOXRT_EMBED_LISTEN,
// _ETCD, _PREFIX, _CERT, _KEY, _CA, _UID_FIRST, _UID_LAST, _LEASE_MS: the `cluster`
// block) and waits for a line on stdin between its exec and its shutdown, so that a test
// can look at the workspace through the other nodes.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include <caf/all.hpp>

#include <boxrt/app/runtime.hpp>
#include <boxrt/version.hpp>

using namespace std::chrono_literals;

namespace {

int failed(const std::string& what) {
  std::cerr << "embed_example: " << what << std::endl;
  return 1;
}

std::string text_of(const caf::error& err) {
  // boxrt's errors carry their message as the only element of the context.
  const auto& ctx = err.context();
  if (ctx.size() == 1 && ctx.match_element<std::string>(0))
    return ctx.get_as<std::string>(0);
  return caf::to_string(err);
}

/// Live (not zombie) processes running as a uid in [first, last].
int live_processes_of(uint32_t first, uint32_t last) {
  int n = 0;
  for (auto& entry : std::filesystem::directory_iterator{"/proc"}) {
    std::ifstream status{entry.path() / "status"};
    std::string line, state;
    uint32_t uid = 0;
    bool seen = false;
    while (std::getline(status, line)) {
      if (line.rfind("State:", 0) == 0)
        state = line;
      else if (line.rfind("Uid:", 0) == 0) {
        uid = static_cast<uint32_t>(std::stoul(line.substr(4)));
        seen = true;
      }
    }
    if (seen && uid >= first && uid <= last && state.find("zombie") == std::string::npos) {
      std::ifstream cmd{entry.path() / "cmdline"};
      std::string args{std::istreambuf_iterator<char>{cmd}, {}};
      std::cerr << "embed_example: still running: pid " << entry.path().filename().string() << " uid " << uid
                << " (" << state << ") " << args.substr(0, args.find('\0')) << "\n";
      ++n;
    }
  }
  return n;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

/// The `cluster` block from the environment; disabled without BOXRT_EMBED_NODE_ID.
boxrt::cluster_config cluster_from_env() {
  boxrt::cluster_config c;
  c.node_id = env("BOXRT_EMBED_NODE_ID");
  if (c.node_id.empty())
    return c;
  c.enabled = true;
  auto listen = env("BOXRT_EMBED_LISTEN");
  c.listen_host = c.advertise_host = listen.substr(0, listen.rfind(':'));
  c.listen_port = c.advertise_port = static_cast<uint16_t>(std::stoi(listen.substr(listen.rfind(':') + 1)));
  c.etcd_endpoints = {env("BOXRT_EMBED_ETCD")};
  c.etcd_prefix = env("BOXRT_EMBED_PREFIX");
  c.tls = {env("BOXRT_EMBED_CERT"), env("BOXRT_EMBED_KEY"), env("BOXRT_EMBED_CA")};
  c.lease_ms = std::stoll(env("BOXRT_EMBED_LEASE_MS"));
  c.takeover_wait_ms = 8000;
  c.uid_first = static_cast<uint32_t>(std::stoul(env("BOXRT_EMBED_UID_FIRST")));
  c.uid_last = static_cast<uint32_t>(std::stoul(env("BOXRT_EMBED_UID_LAST")));
  return c;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 2)
    return failed("usage: embed_example DATA_DIR [BACKEND]");
  std::cout << "embedding boxrt " << BOXRT_VERSION << " (" << BOXRT_GIT_DESCRIBE << ")\n";
  boxrt::runtime_config rc;
  rc.cluster = cluster_from_env();
  caf::actor_system_config cfg;
  boxrt::configure(cfg, rc); // before the system is built (a cluster node: CAF's middleman too)
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};

  rc.box.local.host_root = argv[1];
  rc.helper_dir = BOXRT_HELPER_DIR;
  // Sandbox uids of its own, so the test can tell this runtime's sandboxes from others.
  rc.sandbox_uid_first = 0x71000000u;
  rc.sandbox_uid_last = 0x710000ffu;

  // A bad config is refused before anything starts.
  auto bad = rc;
  bad.box.backend = "chroot";
  if (auto refused = boxrt::spawn_runtime(sys, bad); refused)
    return failed("a config naming an unknown backend was accepted");
  else if (text_of(refused.error()).find("box.backend must be one of") == std::string::npos)
    return failed("unexpected refusal: " + text_of(refused.error()));

  // Admission mode: a workspace runs commands only while its entitlement grants it.
  rc.box.backend = argc > 2 ? argv[2] : "bwrap";
  rc.box.admission.required = true;
  rc.box.admission.required_backend = rc.box.backend;
  rc.box.admission.readiness_cache_sec = 0;
  rc.box.admission.workspace_quota_mb = 16; // a hard quota image per workspace
  rc.box.admission.max_timeout_sec = 60;
  rc.box.admission.cpus = 0.5;
  rc.box.admission.memory_mb = 256;
  rc.box.admission.pids_limit = 64;
  auto runtime = boxrt::spawn_runtime(sys, rc);
  if (!runtime)
    return failed("spawn_runtime: " + text_of(runtime.error()));

  boxrt::entitlement_snapshot snap;
  snap.instance_uuid = "embedding-host";
  snap.workspace_uuid = "workspace-1";
  snap.entitlement_revision = 1;
  snap.not_before = 1;
  snap.expires_at = 4000000000;
  snap.features["managed_sandbox"] = true;
  snap.limits["managed_sandbox_sessions"] = 1;
  snap.fingerprint = "workspace-1 revision 1: managed_sandbox, 1 session";
  int code = 0;
  self->request(*runtime, 30s, boxrt::entitle_atom_v, snap)
    .receive([](boxrt::entitlement_receipt& r) { std::cout << "entitled revision " << r.entitlement_revision << "\n"; },
             [&](caf::error& err) { code = failed("entitlement: " + text_of(err)); });
  if (code != 0)
    return code;

  boxrt::exec_request req;
  req.ctx.instance_uuid = snap.instance_uuid;
  req.ctx.workspace_uuid = snap.workspace_uuid;
  req.ctx.placement_generation = 1;
  req.spec.session_id = "global";
  req.spec.cmd = "echo hello from $(cat /proc/1/comm) as uid $(id -u)";
  req.facts.has_session_id = true;
  req.facts.session_id = "global";
  self->request(*runtime, 120s, boxrt::exec_atom_v, req)
    .receive(
      [&](boxrt::exec_result& r) {
        std::cout << "exit " << r.exit_code << ": " << r.stdout_text << "\n";
        if (r.exit_code != 0 || r.stdout_text.rfind("hello from ", 0) != 0)
          code = failed("the command did not run as expected: " + r.stderr_text);
      },
      [&](caf::error& err) { code = failed("exec: " + text_of(err)); });
  if (rc.cluster.enabled) { // the test looks through the other nodes, then says go on
    std::cout << "waiting" << std::endl;
    std::string line;
    std::getline(std::cin, line);
  }

  // Shutdown: every session stopped and its sandbox torn down before the reply.
  self->request(*runtime, 60s, boxrt::shutdown_atom_v)
    .receive([](int64_t n) { std::cout << "stopped " << n << " session(s)\n"; },
             [&](caf::error& err) { code = failed("shutdown: " + text_of(err)); });
  // The runtime's end: its last actor gone, every sandbox with it (warm ones included).
  self->monitor(*runtime);
  caf::anon_send_exit(*runtime, caf::exit_reason::user_shutdown);
  self->receive([](caf::down_msg&) {},
                caf::after(std::chrono::seconds{30}) >> [&] { code = failed("the runtime did not stop within 30 s"); });
  // A cluster's sandbox uids are shared by every node: only a runtime of its own counts.
  if (code == 0 && !rc.cluster.enabled) {
    if (int left = live_processes_of(rc.sandbox_uid_first, rc.sandbox_uid_last); left != 0)
      code = failed(std::to_string(left) + " sandbox process(es) outlived the runtime");
  }
  return code;
}
