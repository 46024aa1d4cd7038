// A real actor system with the scripted backend behind the directory. Tests talk to
// it through explicit replies (scoped_actor request/receive); nothing sleeps.
#pragma once

#include <filesystem>
#include <optional>

#include <boost/test/unit_test.hpp>
#include <caf/all.hpp>

#include "actors/actors.hpp"
#include "actors/caf_support.hpp"
#include "actors/directory.hpp"
#include "backends/readiness_keys.hpp"
#include "backends/testing/scripted.hpp"
#include "messages/codec.hpp"
#include "messages/tenancy.hpp"
#include "messages/time.hpp"

namespace boxrt::test {

inline caf::actor_system_config& make_config(caf::actor_system_config& cfg) {
  configure_actor_system(cfg, 2);
  return cfg;
}

/// The admission policy of the reference's Cloud stack (admission.md §5).
inline admission_policy cloud_policy() {
  admission_policy p;
  p.required = true;
  p.required_backend = "scripted";
  p.max_sessions = 1;
  p.max_managed_processes = 0;
  p.max_grant_ttl_sec = 300;
  p.max_timeout_sec = 60;
  p.cpus = 0.5;
  p.memory_mb = 256;
  p.pids_limit = 64;
  p.read_only_rootfs = true;
  p.workspace_quota_mb = 32;
  p.readiness_cache_sec = 0;
  return p;
}

inline std::vector<std::string> all_ready_keys() {
  return {backend_readiness_keys.begin(), backend_readiness_keys.end()};
}

inline entitlement_snapshot snapshot(const std::string& ws, int64_t rev, bool eligible,
                                     entitlement_status status = entitlement_status::active) {
  entitlement_snapshot s;
  s.instance_uuid = "instance-a";
  s.workspace_uuid = ws;
  s.entitlement_revision = rev;
  s.status = status;
  s.not_before = 1;
  s.expires_at = 4000000000;
  s.features["managed_sandbox"] = eligible;
  s.limits["managed_sandbox_sessions"] = eligible ? 1 : 0;
  s.fingerprint = canonical_json(s);
  return s;
}

inline action_context ctx(const std::string& ws, int64_t gen = 1) {
  action_context c;
  c.instance_uuid = "instance-a";
  c.workspace_uuid = ws;
  c.placement_generation = gen;
  return c;
}

inline exec_request exec_req(const std::string& ws, const std::string& session,
                             const std::string& cmd, int64_t gen = 1) {
  exec_request r;
  r.ctx = ctx(ws, gen);
  r.spec.session_id = session;
  r.spec.cmd = cmd;
  r.facts.has_session_id = true;
  r.facts.session_id = session;
  return r;
}

struct core_fixture {
  struct options {
    bool admission = false;
    bool backend = true;
    runtime_limits limits;
    std::optional<std::vector<std::string>> ready_keys;
    /// Selects the backend a box_init names (null: never selected again).
    backend_selector select;
    /// Durable admission state (null: in memory only).
    std::shared_ptr<admission_store> store;
  };

  caf::actor_system_config cfg;
  caf::actor_system sys;
  std::shared_ptr<scripted_backend> backend;
  std::shared_ptr<worker_pool> pool = std::make_shared<worker_pool>();
  std::shared_ptr<process_registry> processes = std::make_shared<process_registry>();
  std::shared_ptr<settings_snapshot> snapshot = std::make_shared<settings_snapshot>();
  std::filesystem::path root;
  box_config config;
  std::optional<directory_actor> dir_handle;

  core_fixture() : core_fixture(options{}) {}

  explicit core_fixture(options opts) : sys(make_config(cfg)) {
    root = std::filesystem::temp_directory_path()
           / ("boxrt-test-" + std::to_string(::getpid()) + "-" + std::to_string(wall_now_us()));
    std::filesystem::create_directories(root / "default");
    config.backend = "scripted";
    config.limits = opts.limits;
    config.local.host_root = root.string();
    config.local.default_workspace = (root / "default").string();
    config.local.allowed_mount_roots = {root.string()};
    config.scripted.available = true;
    config.scripted.ready_keys = opts.ready_keys ? *opts.ready_keys : all_ready_keys();
    if (opts.admission)
      config.admission = cloud_policy();
    directory_args a;
    a.testing = true; // the scripted backend stands in for an isolating one here
    a.config = config;
    a.trusted_instance = "instance-a";
    if (opts.backend) {
      backend = std::make_shared<scripted_backend>(config.scripted);
      a.backend = backend;
    } else {
      a.backend_name = "bwrap";
      a.backend_reason = "no sandbox backend in this test";
    }
    a.backend_name = a.backend ? a.backend->name() : a.backend_name;
    a.pool = pool;
    a.processes = processes;
    a.snapshot = snapshot;
    a.select = opts.select;
    a.store = opts.store;
    dir_handle = spawn_directory(sys, std::move(a));
  }

  ~core_fixture() {
    caf::scoped_actor self{sys};
    self->request(dir(), std::chrono::seconds{30}, shutdown_atom_v).receive([](int64_t) {}, [](caf::error&) {});
    caf::anon_send_exit(dir(), caf::exit_reason::user_shutdown);
    std::error_code err;
    std::filesystem::remove_all(root, err);
  }

  directory_actor dir() const { return *dir_handle; }

  /// One request to the directory, waited for: the reply value or the box_error.
  template <class R, class... Ts>
  result<R> call(Ts&&... xs) {
    caf::scoped_actor self{sys};
    std::optional<result<R>> out;
    self->request(dir(), std::chrono::seconds{30}, std::forward<Ts>(xs)...)
      .receive([&](R& r) { out.emplace(std::move(r)); },
               [&](caf::error& err) { out.emplace(from_caf_error(err)); });
    return std::move(*out);
  }

  result<exec_result> exec(const std::string& ws, const std::string& session,
                           const std::string& cmd, int64_t gen = 1) {
    return call<exec_result>(exec_atom_v, exec_req(ws, session, cmd, gen));
  }
};

/// The reply of type R that `self` (which sent the request) receives within `within`;
/// a box_error "no reply" when none came, so a test fails fast instead of hanging.
template <class R>
result<R> reply_within(caf::scoped_actor& self, std::chrono::milliseconds within = std::chrono::seconds{10}) {
  std::optional<result<R>> out;
  self->receive([&](R& r) { out.emplace(std::move(r)); },
                [&](caf::error& err) { out.emplace(from_caf_error(err)); },
                caf::after(within) >> [&] { out.emplace(box_error{ec::box_error, "no reply"}); });
  return std::move(*out);
}

/// True when `self` holds a reply of type R (or an error) already; never waits.
template <class R>
bool answered(caf::scoped_actor& self) {
  bool got = false;
  self->receive([&](R&) { got = true; }, [&](caf::error&) { got = true; },
                caf::after(std::chrono::milliseconds{0}) >> [] {});
  return got;
}

/// Runs `served` (another workspace's request) and checks it is answered within a
/// second while `behind` is held: a held scheduler thread would delay it by the hold.
template <class F>
void served_beside(std::string_view behind, F&& served) {
  const auto t0 = std::chrono::steady_clock::now();
  served();
  const auto took = std::chrono::steady_clock::now() - t0;
  BOOST_CHECK_MESSAGE(took < std::chrono::seconds{1},
                      "workspace B waited " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                                            << " ms behind " << behind);
}

/// Asserts that `r` failed with exactly this class and text.
template <class T>
void require_error(const result<T>& r, ec code, const std::string& text) {
  BOOST_REQUIRE_MESSAGE(!r.ok(), "expected the error: " + text);
  BOOST_CHECK_EQUAL(std::string{wire_class(r.error().code)}, std::string{wire_class(code)});
  BOOST_CHECK_EQUAL(r.error().message, text);
}

} // namespace boxrt::test
