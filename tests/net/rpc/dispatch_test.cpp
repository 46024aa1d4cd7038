// The action table end to end without a socket: a small driver actor plays the
// connection (it owns the connection_env and calls dispatch() from its handler), a real
// directory with the scripted backend answers, and replies are parsed as JSON.
#include "tests/actors/fixture.hpp"

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include <simdjson.h>

#include "messages/tenancy.hpp"
#include "net/rpc/dispatch.hpp"

using namespace boxrt;
using namespace boxrt::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

using simdjson::dom::element;

/// Counts done() calls beyond the first of any request (must stay 0).
std::atomic<int> extra_done_calls{0};

struct driver_state {
  net::connection_env env;
};

using driver_ptr = caf::stateful_actor<driver_state>*;

/// Plays the connection actor: parses the request texts, calls dispatch() and answers
/// with (error, data_json) once done() runs.
caf::behavior driver(driver_ptr self, directory_actor dir, std::shared_ptr<worker_pool> pool,
                     std::shared_ptr<net::shared_state> shared, std::string transfer_dir) {
  auto& env = self->state.env;
  env.self = self;
  env.directory = std::move(dir);
  env.pool = std::move(pool);
  env.shared = std::move(shared);
  env.transfer_dir = std::move(transfer_dir);
  return {
    [self](done_atom, uint64_t token) { self->state.env.jobs->finish(token); },
    [self](const std::string& action, const std::string& data,
           const std::string& context) -> caf::result<box_error, std::string> {
      // Both parsers die at the end of this handler: dispatch() must not keep the DOM.
      simdjson::dom::parser data_parser;
      simdjson::dom::parser context_parser;
      element data_root;
      if (data_parser.parse(data).get(data_root) != simdjson::SUCCESS)
        return to_caf_error({ec::runtime, "test: bad data JSON"});
      element context_root;
      std::optional<action_context> decoded;
      if (!context.empty()) {
        if (context_parser.parse(context).get(context_root) != simdjson::SUCCESS)
          return to_caf_error({ec::runtime, "test: bad context JSON"});
        // As the envelope does before the action runs (net/rpc/envelope.hpp).
        auto ctx = decode_action_context(context_root);
        if (!ctx)
          return to_caf_error(ctx.error());
        decoded = std::move(ctx.value());
      }
      const action_context* ctx = decoded ? &*decoded : nullptr;
      auto rp = self->make_response_promise<box_error, std::string>();
      auto calls = std::make_shared<int>(0);
      net::dispatch(self->state.env, action, data_root, ctx,
                    [rp, calls](net::reply r) mutable {
                      if (++*calls > 1) {
                        ++extra_done_calls;
                        return;
                      }
                      rp.deliver(std::move(r.error), std::move(r.data_json));
                    });
      return rp;
    },
    [self](closing_atom) {
      // As the connection does when its socket closes.
      net::close_transfers(self->state.env);
      self->quit();
    },
  };
}

/// One reply, its data parsed.
struct answer {
  box_error error;
  std::string json;
  std::shared_ptr<simdjson::dom::parser> parser = std::make_shared<simdjson::dom::parser>();
  element root;

  bool ok() const { return !error; }
  std::string wire() const { return error ? error.to_wire() : std::string{"ok"}; }
  element operator[](std::string_view key) const { return root[key].value(); }
  std::string str(std::string_view key) const {
    return std::string{root[key].get_string().value()};
  }
  int64_t num(std::string_view key) const { return root[key].get_int64().value(); }
  bool flag(std::string_view key) const { return root[key].get_bool().value(); }
  bool is_null(std::string_view key) const { return root[key].is_null(); }
  bool has(std::string_view key) const { return root[key].error() == simdjson::SUCCESS; }
};

const std::string ctx_a = R"({"instance_uuid":"instance-a","workspace_uuid":"workspace-a","placement_generation":1})";

struct net_fixture : core_fixture {
  std::shared_ptr<net::shared_state> shared = std::make_shared<net::shared_state>();
  fs::path transfers;
  caf::actor drv;

  explicit net_fixture(options opts = {}) : core_fixture(opts) {
    shared->trusted_instance = [] { return std::string{"instance-a"}; };
    shared->transfer_root = (root / "transfers").string();
    transfers = root / "transfers" / "conn-1";
    drv = sys.spawn(driver, dir(), pool, shared, transfers.string());
    wait_probed();
  }

  ~net_fixture() {
    caf::anon_send_exit(drv, caf::exit_reason::user_shutdown);
    BOOST_CHECK_EQUAL(extra_done_calls.load(), 0);
  }

  /// Health answers once the first readiness probe finished, so one call orders the
  /// test behind it.
  void wait_probed() {
    auto h = call<health_info>(health_atom_v);
    BOOST_REQUIRE(h.ok() && h->settings.probed);
  }

  answer rpc(const std::string& action, const std::string& data, const std::string& context) {
    return rpc_on(drv, action, data, context);
  }

  answer rpc_on(const caf::actor& driver_actor, const std::string& action, const std::string& data,
                const std::string& context) {
    caf::scoped_actor self{sys};
    answer out;
    self->request(driver_actor, 30s, action, data, context)
      .receive(
        [&](box_error& err, std::string& json) {
          out.error = std::move(err);
          out.json = std::move(json);
        },
        [&](caf::error& err) { out.error = from_caf_error(err); });
    if (!out.error) {
      auto parsed = out.parser->parse(out.json).get(out.root);
      BOOST_REQUIRE_MESSAGE(parsed == simdjson::SUCCESS, "reply is not JSON: " + out.json);
      BOOST_REQUIRE_MESSAGE(out.root.is_object(), "reply is not an object: " + out.json);
    }
    return out;
  }

  /// A tenant call in workspace-a.
  answer tenant(const std::string& action, const std::string& data = "{}") {
    return rpc(action, data, ctx_a);
  }

  /// A host-control call without context.
  answer host(const std::string& action, const std::string& data = "{}") {
    return rpc(action, data, "");
  }

  box_config current_config() {
    auto h = call<health_info>(health_atom_v);
    BOOST_REQUIRE(h.ok());
    return h->settings.config;
  }
};

core_fixture::options admission_opts(bool ready = true) {
  core_fixture::options o;
  o.admission = true;
  if (!ready)
    o.ready_keys = std::vector<std::string>{};
  return o;
}

void require_wire(const answer& a, const std::string& expected) {
  BOOST_REQUIRE_MESSAGE(!a.ok(), "expected the error " + expected + ", got " + a.json);
  BOOST_CHECK_EQUAL(a.wire(), expected);
}

void require_ok(const answer& a) {
  BOOST_REQUIRE_MESSAGE(a.ok(), "expected success, got " + a.wire());
}

std::string chunk(const std::string& key, const std::string& b64, int index = 0, int amount = 1) {
  return R"({"file_key":")" + key + R"(","file_length":1,"chunk_base64":")" + b64
         + R"(","chunk_index":)" + std::to_string(index) + R"(,"chunk_amount":)"
         + std::to_string(amount) + R"(,"chunk_size":1})";
}

std::string read_file(const fs::path& p) {
  std::ifstream in{p, std::ios::binary};
  return std::string{std::istreambuf_iterator<char>{in}, {}};
}

std::string epoch_plus(int64_t seconds) {
  return std::to_string(wall_now_us() / 1000000 + seconds);
}

std::string grant_json(const std::string& instance, const std::string& ws, int64_t rev,
                       int64_t gen = 1) {
  return R"({"instance_uuid":")" + instance + R"(","workspace_uuid":")" + ws
         + R"(","execution_generation":)" + std::to_string(gen) + R"(,"entitlement_revision":)"
         + std::to_string(rev) + R"(,"expires_at":)" + epoch_plus(120)
         + R"(,"max_sessions":1,"max_managed_processes":0})";
}

std::string snapshot_json(const std::string& instance, const std::string& ws, int64_t rev,
                          bool eligible) {
  return R"({"instance_uuid":")" + instance + R"(","workspace_uuid":")" + ws
         + R"(","entitlement_revision":)" + std::to_string(rev)
         + R"(,"status":"active","not_before":1,"expires_at":4000000000,)"
         + R"("features":{"managed_sandbox":)" + (eligible ? "true" : "false")
         + R"(},"limits":{"managed_sandbox_sessions":)" + (eligible ? "1" : "0") + "}}";
}

const std::string probe_name = ".langbot-box-volume-probe-0123456789abcdef0123456789abcdef";

} // namespace

BOOST_AUTO_TEST_SUITE(dispatch_actions)

// -- the action table -------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(known_actions_are_the_reference_set_plus_entitlements) {
  for (auto name : {"__ping", "__file_chunk", "box_health", "box_get_backend_info", "box_init",
                    "box_upsert_sandbox_admission_grant", "box_revoke_sandbox_admission_grant",
                    "box_verify_shared_workspace", "box_shutdown", "box_put_workspace_entitlement",
                    "box_status", "box_get_storage_analysis", "box_exec", "box_create_session", "box_get_session",
                    "box_get_sessions", "box_delete_session", "box_start_managed_process",
                    "box_get_managed_process", "box_stop_managed_process", "box_list_skills",
                    "box_get_skill", "box_create_skill", "box_update_skill", "box_delete_skill",
                    "box_scan_skill_directory", "box_list_skill_files", "box_read_skill_file",
                    "box_write_skill_file", "box_preview_skill_zip", "box_install_skill_zip"})
    BOOST_CHECK_MESSAGE(net::known_action(name), name);
  BOOST_CHECK(!net::known_action("__heartbeat"));
  BOOST_CHECK(!net::known_action("box_nope"));
}

BOOST_AUTO_TEST_CASE(unknown_action_is_a_value_error) {
  net_fixture f;
  require_wire(f.host("box_nope"), "ValueError: Action box_nope not found");
}

BOOST_AUTO_TEST_CASE(ping_answers_an_empty_object) {
  net_fixture f;
  auto a = f.host("__ping");
  require_ok(a);
  BOOST_CHECK_EQUAL(a.json, "{}");
}

// -- tenant sandbox actions ---------------------------------------------------------------

BOOST_AUTO_TEST_CASE(exec_round_trip_has_the_reference_shape) {
  net_fixture f;
  auto a = f.tenant("box_exec", R"({"session_id":"chat 1/x","cmd":"echo hello"})");
  require_ok(a);
  BOOST_CHECK_EQUAL(a.str("session_id"), "chat 1/x");
  BOOST_CHECK_EQUAL(a.str("backend_name"), "scripted");
  BOOST_CHECK_EQUAL(a.str("status"), "completed");
  BOOST_CHECK_EQUAL(a.num("exit_code"), 0);
  BOOST_CHECK_EQUAL(a.str("stdout"), "hello");
  BOOST_CHECK_EQUAL(a.str("stderr"), "");
  BOOST_CHECK(a.num("duration_ms") >= 0);
}

BOOST_AUTO_TEST_CASE(a_stalled_request_between_actors_is_answered_with_the_timeout_text) {
  // The exec waits in its session (a gate) past its own timeout plus the margin: the
  // connection's request to the directory expires and the action is answered, naming it.
  core_fixture::options o;
  o.limits.action_margin_sec = 1;
  net_fixture f{o};
  auto snap = std::make_shared<settings_snapshot>();
  snap->set(f.call<health_info>(health_atom_v)->settings); // as the directory publishes
  f.shared->settings = snap;
  auto a = f.tenant("box_exec", R"({"session_id":"s","cmd":"gate stall","timeout_sec":1})");
  require_wire(a, "BoxRuntimeUnavailableError: box_exec timed out inside the runtime");
  // Nothing was left half-changed: the session finishes its command and serves the next.
  f.backend->release_gate("stall");
  auto next = f.tenant("box_exec", R"({"session_id":"s","cmd":"echo after"})");
  require_ok(next);
  BOOST_CHECK_EQUAL(next.str("stdout"), "after");
}

BOOST_AUTO_TEST_CASE(exec_failure_exit_code_is_reported) {
  net_fixture f;
  auto a = f.tenant("box_exec", R"({"session_id":"s","cmd":"fail 3"})");
  require_ok(a);
  BOOST_CHECK_EQUAL(a.num("exit_code"), 3);
  BOOST_CHECK_EQUAL(a.str("stderr"), "failed");
}

BOOST_AUTO_TEST_CASE(create_get_list_delete_have_the_reference_shapes) {
  net_fixture f;
  auto created = f.tenant("box_create_session", R"({"session_id":"s2","persistent":true})");
  require_ok(created);
  BOOST_CHECK_EQUAL(created.str("session_id"), "s2");
  BOOST_CHECK_EQUAL(created.str("backend_name"), "scripted");
  BOOST_CHECK(!created.str("backend_session_id").empty());
  BOOST_CHECK_EQUAL(created.str("image"), default_box_image);
  BOOST_CHECK_EQUAL(created.str("network"), "off");
  BOOST_CHECK(created.is_null("host_path"));
  BOOST_CHECK_EQUAL(created.str("host_path_mode"), "rw");
  BOOST_CHECK_EQUAL(created.str("mount_path"), "/workspace");
  BOOST_CHECK(created.flag("persistent"));
  BOOST_CHECK_EQUAL(created.num("memory_mb"), 512);
  BOOST_CHECK_EQUAL(created.num("pids_limit"), 128);
  BOOST_CHECK(created.flag("read_only_rootfs"));
  BOOST_CHECK_EQUAL(created.num("workspace_quota_mb"), 0);
  BOOST_CHECK(created.str("created_at").ends_with("Z"));
  BOOST_CHECK(created.str("last_used_at").ends_with("Z"));

  auto got = f.tenant("box_get_session", R"({"session_id":"s2"})");
  require_ok(got);
  BOOST_CHECK_EQUAL(got.str("session_id"), "s2");
  BOOST_CHECK_EQUAL(got.str("backend_session_id"), created.str("backend_session_id"));

  auto listed = f.tenant("box_get_sessions");
  require_ok(listed);
  auto sessions = listed["sessions"].get_array().value();
  BOOST_REQUIRE_EQUAL(sessions.size(), 1u);
  BOOST_CHECK_EQUAL(std::string{sessions.at(0)["session_id"].get_string().value()}, "s2");

  auto deleted = f.tenant("box_delete_session", R"({"session_id":" s2 "})");
  require_ok(deleted);
  BOOST_CHECK_EQUAL(deleted.str("deleted"), " s2 ");

  require_wire(f.tenant("box_get_session", R"({"session_id":"s2"})"),
               "BoxSessionNotFoundError: session s2 not found");
  require_wire(f.tenant("box_delete_session", R"({"session_id":"s2"})"),
               "BoxSessionNotFoundError: session s2 not found");
  auto empty = f.tenant("box_get_sessions");
  require_ok(empty);
  BOOST_CHECK_EQUAL(empty["sessions"].get_array().value().size(), 0u);
}

BOOST_AUTO_TEST_CASE(get_sessions_lists_only_the_callers_workspace) {
  net_fixture f;
  require_ok(f.tenant("box_create_session", R"({"session_id":"mine"})"));
  auto other = R"({"instance_uuid":"instance-a","workspace_uuid":"workspace-b"})";
  require_ok(f.rpc("box_create_session", R"({"session_id":"theirs"})", other));
  auto listed = f.tenant("box_get_sessions");
  require_ok(listed);
  auto sessions = listed["sessions"].get_array().value();
  BOOST_REQUIRE_EQUAL(sessions.size(), 1u);
  BOOST_CHECK_EQUAL(std::string{sessions.at(0)["session_id"].get_string().value()}, "mine");
}

BOOST_AUTO_TEST_CASE(incompatible_reuse_is_a_session_conflict) {
  net_fixture f;
  require_ok(f.tenant("box_exec", R"({"session_id":"s3","cmd":"echo a","persistent":true})"));
  require_wire(f.tenant("box_exec", R"({"session_id":"s3","cmd":"echo b","persistent":true,"memory_mb":256})"),
               "BoxSessionConflictError: Box session s3 already exists with memory_mb=512");
}

BOOST_AUTO_TEST_CASE(missing_session_id_is_a_key_error) {
  net_fixture f;
  require_wire(f.tenant("box_exec", R"({"cmd":"echo a"})"), "KeyError: 'session_id'");
  require_wire(f.tenant("box_create_session", "{}"), "KeyError: 'session_id'");
  require_wire(f.tenant("box_get_session", "{}"), "KeyError: 'session_id'");
  require_wire(f.tenant("box_delete_session", R"({"id":"x"})"), "KeyError: 'session_id'");
}

BOOST_AUTO_TEST_CASE(non_string_session_id_is_a_validation_error) {
  net_fixture f;
  require_wire(f.tenant("box_get_session", R"({"session_id":5})"),
               "BoxValidationError: session_id must be a string");
  require_wire(f.tenant("box_delete_session", R"({"session_id":null})"),
               "BoxValidationError: session_id must be a string");
}

BOOST_AUTO_TEST_CASE(a_session_id_with_nothing_usable_is_a_validation_error_of_exec_and_create) {
  // langbot-plugin 0.7.13 reports this ValueError of exec and create as a
  // BoxValidationError; get and delete keep the ValueError.
  net_fixture f;
  require_wire(f.tenant("box_exec", R"({"session_id":"%%%","cmd":"echo"})"),
               "BoxValidationError: Box session_id must contain a valid character");
  require_wire(f.tenant("box_create_session", R"({"session_id":"%%%"})"),
               "BoxValidationError: Box session_id must contain a valid character");
  require_wire(f.tenant("box_get_session", R"({"session_id":"%%%"})"),
               "ValueError: Box session_id must contain a valid character");
}

BOOST_AUTO_TEST_CASE(bad_box_spec_is_a_validation_error) {
  net_fixture f;
  require_wire(f.tenant("box_exec", R"({"session_id":"s","cmd":"echo","memory_mb":10})"),
               "BoxValidationError: memory_mb must be at least 32");
  require_wire(f.tenant("box_create_session", R"({"session_id":"s","memory_mb":10})"),
               "BoxValidationError: memory_mb must be at least 32");
  require_wire(f.tenant("box_exec", R"({"session_id":"s","cmd":"  "})"),
               "BoxValidationError: cmd must not be empty");
  require_wire(f.tenant("box_exec", R"({"session_id":"s","cmd":"echo","timeout_sec":true})"),
               "BoxValidationError: timeout_sec must be an integer");
  // box_create_session allows an empty cmd.
  require_ok(f.tenant("box_create_session", R"({"session_id":"s","cmd":""})"));
  // Nothing was started for the refused requests.
  BOOST_CHECK_EQUAL(f.backend->start_count(), 1u);
}

BOOST_AUTO_TEST_CASE(status_has_the_reference_shape_for_this_placement) {
  net_fixture f;
  require_ok(f.tenant("box_exec", R"({"session_id":"s","cmd":"echo a","persistent":true})"));
  auto a = f.tenant("box_status");
  require_ok(a);
  BOOST_CHECK_EQUAL(std::string{a["backend"]["name"].get_string().value()}, "scripted");
  BOOST_CHECK(a["backend"]["available"].get_bool().value());
  BOOST_CHECK_EQUAL(a.num("active_sessions"), 1);
  BOOST_CHECK_EQUAL(a.num("managed_processes"), 0);
  BOOST_CHECK_EQUAL(a.num("session_ttl_sec"), 300);
  auto limits = a["limits"];
  BOOST_CHECK_EQUAL(limits["max_sessions"].get_int64().value(), 64);
  BOOST_CHECK_EQUAL(limits["max_managed_processes"].get_int64().value(), 64);
  BOOST_CHECK_EQUAL(limits["max_completed_processes"].get_int64().value(), 256);
  BOOST_CHECK_EQUAL(limits["max_admission_records"].get_int64().value(), 100000);
  BOOST_CHECK_EQUAL(limits["max_rpc_file_bytes"].get_int64().value(), 20971520);
  BOOST_CHECK_EQUAL(limits.get_object().value().size(), 5u);
  // Another generation of the same workspace has no sessions of its own.
  auto g2 = f.rpc("box_status", "{}",
                  R"({"instance_uuid":"instance-a","workspace_uuid":"workspace-a","placement_generation":2})");
  require_ok(g2);
  BOOST_CHECK_EQUAL(g2.num("active_sessions"), 0);
}

BOOST_AUTO_TEST_CASE(status_has_the_workspaces_session_capacity) {
  // Standard mode: the workspace's cap (box.limits.max_sessions_per_workspace, within
  // max_sessions), its sessions, and what it may still start.
  net_fixture f;
  auto capacity = [&](const char* ws) {
    auto a = f.rpc("box_status", "{}",
                   std::string{R"({"instance_uuid":"instance-a","workspace_uuid":")"} + ws
                     + R"(","placement_generation":1})");
    require_ok(a);
    auto c = a["capacity"];
    return std::tuple{c["limit"].get_int64().value(), c["used"].get_int64().value(),
                      c["remaining"].get_int64().value()};
  };
  BOOST_CHECK((capacity("workspace-a") == std::tuple{64, 0, 64}));
  require_ok(f.tenant("box_exec", R"({"session_id":"s","cmd":"echo a","persistent":true})"));
  BOOST_CHECK((capacity("workspace-a") == std::tuple{64, 1, 63}));
  // Another workspace's own count is 0; the instance's cap is shared.
  BOOST_CHECK((capacity("workspace-z") == std::tuple{64, 0, 63}));
}

BOOST_AUTO_TEST_CASE(storage_analysis_has_the_reference_shape) {
  net_fixture f;
  auto empty = f.tenant("box_get_storage_analysis");
  require_ok(empty);
  BOOST_CHECK_EQUAL(empty.num("active_sessions"), 0);
  BOOST_CHECK_EQUAL(empty.num("managed_processes"), 0);
  BOOST_CHECK_EQUAL(empty.num("size_bytes"), 0);
  require_ok(f.tenant("box_exec", R"({"session_id":"s","cmd":"echo a","persistent":true})"));
  auto a = f.tenant("box_get_storage_analysis");
  require_ok(a);
  BOOST_CHECK_EQUAL(a.num("active_sessions"), 1);
  std::vector<std::string> keys;
  simdjson::dom::array directories = a["directories"].get_array().value();
  for (auto d : directories) {
    keys.emplace_back(d["key"].get_string().value());
    std::string_view scope = d["scope"].get_string().value();
    BOOST_CHECK(scope == "runtime_host" || scope == "sandbox_sessions");
    BOOST_CHECK(d["size_bytes"].get_int64().value() >= 0);
    BOOST_CHECK(d["file_count"].get_int64().value() >= 0);
    BOOST_CHECK(d["error_count"].get_int64().value() >= 0);
    (void)d["exists"].get_bool().value();
    (void)d["path"].get_string().value();
  }
  for (auto key : {"session_workspaces", "session_caches", "session_temp"})
    BOOST_CHECK_MESSAGE(std::find(keys.begin(), keys.end(), key) != keys.end(), key);
}

// -- context rules (protocol.md §2.1) -----------------------------------------------------

BOOST_AUTO_TEST_CASE(tenant_action_without_context_is_refused) {
  net_fixture f;
  for (auto action : {"box_status", "box_exec", "box_create_session", "box_get_session",
                      "box_get_sessions", "box_delete_session", "box_list_skills",
                      "box_start_managed_process"})
    require_wire(f.host(action, R"({"session_id":"s","cmd":"echo"})"),
                 "PermissionError: Box tenant action requires a trusted Workspace context");
  BOOST_CHECK_EQUAL(f.backend->start_count(), 0u);
}

BOOST_AUTO_TEST_CASE(undecodable_context_is_a_validation_error) {
  net_fixture f;
  const std::string data = R"({"session_id":"s","cmd":"echo"})";
  require_wire(f.rpc("box_exec", data, R"({"instance_uuid":"instance-a","workspace_uuid":"w","bogus":1})"),
               "ValidationError: Extra inputs are not permitted: bogus");
  require_wire(f.rpc("box_exec", data, R"({"instance_uuid":"instance-a","workspace_uuid":"  "})"),
               "ValidationError: workspace_uuid must not be empty");
  require_wire(f.rpc("box_exec", data, R"({"instance_uuid":"instance-a","workspace_uuid":"w","placement_generation":0})"),
               "ValidationError: placement_generation must be greater than or equal to 1");
  require_wire(f.rpc("box_exec", data, R"({"workspace_uuid":"w"})"),
               "ValidationError: instance_uuid is required");
  // Host-control contexts are optional, but a sent one must decode.
  require_wire(f.rpc("box_health", "{}", R"({"instance_uuid":"instance-a"})"),
               "ValidationError: workspace_uuid is required");
}

BOOST_AUTO_TEST_CASE(foreign_instance_is_refused_for_every_kind_of_action) {
  net_fixture f;
  const std::string foreign = R"({"instance_uuid":"instance-b","workspace_uuid":"workspace-a"})";
  const auto text = "PermissionError: Box action context does not match the trusted instance";
  require_wire(f.rpc("box_exec", R"({"session_id":"s","cmd":"echo"})", foreign), text);
  require_wire(f.rpc("box_status", "{}", foreign), text);
  require_wire(f.rpc("box_list_skills", "{}", foreign), text);
  require_wire(f.rpc("box_health", "{}", foreign), text);
  require_wire(f.rpc("__ping", "{}", foreign), text);
  require_wire(f.rpc("box_shutdown", "{}", foreign), text);
  BOOST_CHECK_EQUAL(f.backend->start_count(), 0u);
}

BOOST_AUTO_TEST_CASE(host_control_context_of_the_trusted_instance_is_accepted_and_ignored) {
  net_fixture f;
  auto a = f.rpc("box_health", "{}", ctx_a);
  require_ok(a);
  BOOST_CHECK(a.flag("available"));
}

BOOST_AUTO_TEST_CASE(installation_binding_context_is_reduced_to_an_action_context) {
  net_fixture f;
  auto a = f.rpc("box_exec", R"({"session_id":"s","cmd":"echo hi"})",
                 R"({"instance_uuid":"instance-a","workspace_uuid":"workspace-a",)"
                 R"("installation_uuid":"inst-1","execution_generation":1,"runtime_revision":2})");
  require_ok(a);
  BOOST_CHECK_EQUAL(a.str("session_id"), "s");
}

// -- routed, not implemented yet --------------------------------------------------------

BOOST_AUTO_TEST_CASE(managed_process_actions_run_in_standard_mode) {
  net_fixture f;
  require_ok(f.tenant("box_exec", R"({"session_id":"s","cmd":"echo x"})"));
  auto started = f.tenant("box_start_managed_process",
                          R"({"session_id":"s","spec":{"process_id":"mcp","command":"cat","env":{"K":"v"}}})");
  require_ok(started);
  BOOST_CHECK_EQUAL(started.str("status"), "running");
  BOOST_CHECK_EQUAL(started.str("process_id"), "mcp");
  BOOST_CHECK(started.json.find(R"("env_keys":["K"])") != std::string::npos);
  auto got = f.tenant("box_get_managed_process", R"({"session_id":"s","process_id":"mcp"})");
  require_ok(got);
  BOOST_CHECK_EQUAL(got.str("command"), "cat");
  auto session = f.tenant("box_get_session", R"({"session_id":"s"})");
  require_ok(session);
  BOOST_CHECK(session.json.find(R"("managed_processes":{"mcp":{"session_id":"s","process_id":"mcp")")
              != std::string::npos);
  BOOST_CHECK(session.json.find(R"("managed_process":)") == std::string::npos); // no "default"
  auto stopped = f.tenant("box_stop_managed_process", R"({"session_id":"s","process_id":"mcp"})");
  require_ok(stopped);
  BOOST_CHECK_EQUAL(stopped.json, R"({"stopped":"mcp"})");
  require_wire(f.tenant("box_get_managed_process", R"({"session_id":"s","process_id":"mcp"})"),
               "BoxManagedProcessNotFoundError: session s has no managed process with process_id=mcp");
  require_wire(f.tenant("box_start_managed_process", R"({"session_id":"s"})"), "KeyError: 'spec'");
  require_wire(f.tenant("box_get_managed_process", "{}"), "KeyError: 'session_id'");
  require_wire(f.tenant("box_stop_managed_process", R"({"session_id":"gone"})"),
               "BoxSessionNotFoundError: session gone not found");
}

// -- skills -------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(skill_actions_reach_the_workspace_store) {
  net_fixture f;
  auto empty = f.tenant("box_list_skills");
  require_ok(empty);
  BOOST_CHECK_EQUAL(empty.json, R"({"skills":[]})");
  auto created = f.tenant("box_create_skill", R"({"skill":{"name":"demo","description":"d","instructions":"Do it"}})");
  require_ok(created);
  auto got = f.tenant("box_get_skill", R"({"name":"demo"})");
  require_ok(got);
  BOOST_CHECK(got.json.find(R"("instructions":"Do it")") != std::string::npos);
  BOOST_CHECK(got.json.find("/tenants/ws-") != std::string::npos); // package_root is scoped
  // Another workspace of the same instance sees nothing of it.
  auto other = f.rpc("box_get_skill", R"({"name":"demo"})", std::string{R"({"instance_uuid":"instance-a","workspace_uuid":"workspace-b","placement_generation":1})"});
  require_ok(other);
  BOOST_CHECK_EQUAL(other.json, R"({"skill":null})");
  require_ok(f.tenant("box_write_skill_file", R"({"name":"demo","path":"a/b.txt","content":"hi"})"));
  auto read = f.tenant("box_read_skill_file", R"({"name":"demo","path":"a/b.txt"})");
  require_ok(read);
  BOOST_CHECK_EQUAL(read.json, R"({"skill":{"name":"demo"},"path":"a/b.txt","content":"hi"})");
  auto deleted = f.tenant("box_delete_skill", R"({"name":"demo"})");
  require_ok(deleted);
  BOOST_CHECK_EQUAL(deleted.json, R"({"deleted":"demo"})");
}

BOOST_AUTO_TEST_CASE(skill_errors_keep_the_reference_wrapping) {
  net_fixture f;
  // get/list are not wrapped; the rest wraps as BoxValidationError.
  require_wire(f.tenant("box_get_skill"), "KeyError: 'name'");
  require_wire(f.tenant("box_create_skill", R"({"skill":{"name":"bad name!"}})"),
               "BoxValidationError: Skill name can only contain letters, numbers, hyphens and underscores");
  require_wire(f.tenant("box_read_skill_file", R"({"name":"nope","path":"x"})"),
               "BoxValidationError: Skill \"nope\" not found");
  require_wire(f.tenant("box_install_skill_zip"), "BoxValidationError: 'file_key'");
  require_wire(f.tenant("box_install_skill_zip", R"({"file_key":"k1"})"),
               "BoxValidationError: Uploaded file k1 was not found");
  // Fenced like every tenant action.
  require_ok(f.rpc("box_list_skills", "{}", std::string{R"({"instance_uuid":"instance-a","workspace_uuid":"workspace-a","placement_generation":3})"}));
  require_wire(f.tenant("box_list_skills"), "PermissionError: Stale Box placement generation");
}

BOOST_AUTO_TEST_CASE(an_upload_refused_at_the_gate_is_removed_too) {
  net_fixture f;
  require_ok(f.host("__file_chunk", chunk("up-2.zip", "bm90IGEgemlw")));
  // The fence moves to generation 3; an install at generation 1 is refused.
  require_ok(f.rpc("box_list_skills", "{}", std::string{R"({"instance_uuid":"instance-a","workspace_uuid":"workspace-a","placement_generation":3})"}));
  require_wire(f.tenant("box_install_skill_zip", R"({"file_key":"up-2.zip"})"),
               "PermissionError: Stale Box placement generation");
  bool gone = false;
  for (int i = 0; i < 20000 && !gone; ++i) { // removed on the worker pool
    gone = !fs::exists(f.transfers / "up-2.zip");
    if (!gone)
      std::this_thread::yield();
  }
  BOOST_CHECK(gone);
}

BOOST_AUTO_TEST_CASE(an_uploaded_zip_is_consumed_by_the_skill_action) {
  net_fixture f;
  // "not a zip" as an upload, then a preview that reads and deletes it.
  require_ok(f.host("__file_chunk", chunk("up-1.zip", "bm90IGEgemlw")));
  BOOST_REQUIRE(fs::exists(f.transfers / "up-1.zip"));
  require_wire(f.tenant("box_preview_skill_zip", R"({"file_key":"up-1.zip"})"),
               "BoxValidationError: Uploaded file must be a valid .zip archive");
  BOOST_CHECK(!fs::exists(f.transfers / "up-1.zip"));
  // The key is free again: a second use finds nothing.
  require_wire(f.tenant("box_preview_skill_zip", R"({"file_key":"up-1.zip"})"),
               "BoxValidationError: Uploaded file up-1.zip was not found");
}

// -- health and backend info --------------------------------------------------------------

BOOST_AUTO_TEST_CASE(standard_health_and_backend_info_are_name_and_available) {
  net_fixture f;
  for (auto action : {"box_health", "box_get_backend_info"}) {
    auto a = f.host(action);
    require_ok(a);
    BOOST_CHECK_EQUAL(a.str("name"), "scripted");
    BOOST_CHECK(a.flag("available"));
    // box_get_backend_info also lists boxd's extensions; box_health stays the reference's.
    const bool info = std::string_view{action} == "box_get_backend_info";
    BOOST_CHECK_EQUAL(a.root.get_object().value().size(), info ? 3u : 2u);
    if (info)
      BOOST_CHECK_EQUAL(simdjson::minify(a["capabilities"]), R"(["exec_stream"])");
  }
}

BOOST_AUTO_TEST_CASE(standard_health_without_a_backend_reports_unavailable) {
  core_fixture::options o;
  o.backend = false;
  net_fixture f{o};
  auto a = f.host("box_health");
  require_ok(a);
  BOOST_CHECK_EQUAL(a.str("name"), "bwrap");
  BOOST_CHECK(!a.flag("available"));
}

BOOST_AUTO_TEST_CASE(admission_health_is_the_readiness_dict_when_ready) {
  net_fixture f{admission_opts()};
  auto a = f.host("box_health");
  require_ok(a);
  BOOST_CHECK(a.flag("ready"));
  BOOST_CHECK_EQUAL(a.str("mode"), "grant_enforced");
  auto backend = a["backend"];
  BOOST_CHECK_EQUAL(std::string{backend["name"].get_string().value()}, "scripted");
  BOOST_CHECK(backend["available"].get_bool().value());
  auto details = backend["details"];
  BOOST_CHECK(details.is_object());
  BOOST_CHECK(details["limits_mechanism"].error() == simdjson::SUCCESS);
  BOOST_CHECK(details["namespace_isolation"].get_bool().value());
  auto checks = a["checks"];
  for (auto key : {"configuration", "required_backend", "workspace_mount", "backend_available",
                   "resource_limits", "namespace_isolation", "mount_isolation",
                   "network_isolation", "hard_workspace_quota", "hard_skill_storage_quota",
                   "hard_read_only_mount_quota", "bounded_ephemeral_storage", "inode_quota",
                   "session_cap", "managed_process_cap"})
    BOOST_CHECK_MESSAGE(checks[key].get_bool().value(), key);
  BOOST_CHECK(!a.flag("unsafe_soft_storage_limits"));
}

BOOST_AUTO_TEST_CASE(admission_health_not_ready_is_the_exact_readiness_error) {
  net_fixture f{admission_opts(false)};
  require_wire(f.host("box_health"), "BoxReadinessError: managed sandbox isolation is not ready");
}

BOOST_AUTO_TEST_CASE(admission_backend_info_carries_the_readiness) {
  {
    net_fixture f{admission_opts()};
    auto a = f.host("box_get_backend_info");
    require_ok(a);
    BOOST_CHECK_EQUAL(a.str("name"), "scripted");
    BOOST_CHECK(a.flag("available"));
    BOOST_CHECK(a["readiness"]["ready"].get_bool().value());
    BOOST_CHECK_EQUAL(std::string{a["readiness"]["mode"].get_string().value()}, "grant_enforced");
  }
  {
    net_fixture f{admission_opts(false)};
    auto a = f.host("box_get_backend_info");
    require_ok(a);
    BOOST_CHECK(!a.flag("available"));
    BOOST_CHECK(!a["readiness"]["ready"].get_bool().value());
    BOOST_CHECK(!a["readiness"]["checks"]["namespace_isolation"].get_bool().value());
  }
}

// -- grants, revocations, entitlements ----------------------------------------------------

BOOST_AUTO_TEST_CASE(grant_receipt_field_by_field) {
  net_fixture f{admission_opts()};
  auto a = f.host("box_upsert_sandbox_admission_grant", grant_json("instance-a", "ws-1", 3, 2));
  require_ok(a);
  BOOST_CHECK(a.flag("installed"));
  BOOST_CHECK_EQUAL(a.str("workspace_uuid"), "ws-1");
  BOOST_CHECK_EQUAL(a.num("execution_generation"), 2);
  BOOST_CHECK_EQUAL(a.num("entitlement_revision"), 3);
  BOOST_CHECK_EQUAL(a.num("max_sessions"), 1);
  BOOST_CHECK_EQUAL(a.num("max_managed_processes"), 0);
  BOOST_CHECK(a.str("expires_at").ends_with("+00:00"));
  BOOST_CHECK_EQUAL(a.root.get_object().value().size(), 7u);
}

BOOST_AUTO_TEST_CASE(grant_errors) {
  net_fixture f{admission_opts()};
  require_wire(f.host("box_upsert_sandbox_admission_grant", grant_json("instance-b", "ws-1", 1)),
               "PermissionError: Sandbox admission grant does not match the trusted instance");
  require_wire(f.host("box_upsert_sandbox_admission_grant",
                      R"({"instance_uuid":"instance-a","workspace_uuid":"ws-1"})"),
               "BoxValidationError: execution_generation is required");
  auto extra = grant_json("instance-a", "ws-1", 1);
  extra.back() = ',';
  extra += R"("bogus":1})";
  require_wire(f.host("box_upsert_sandbox_admission_grant", extra),
               "BoxValidationError: Extra inputs are not permitted: bogus");
}

BOOST_AUTO_TEST_CASE(revocation_receipt_field_by_field) {
  net_fixture f{admission_opts()};
  require_ok(f.host("box_upsert_sandbox_admission_grant", grant_json("instance-a", "ws-1", 1)));
  auto a = f.host("box_revoke_sandbox_admission_grant",
                  R"({"instance_uuid":"instance-a","workspace_uuid":"ws-1","entitlement_revision":2})");
  require_ok(a);
  BOOST_CHECK(a.flag("revoked"));
  BOOST_CHECK_EQUAL(a.str("workspace_uuid"), "ws-1");
  BOOST_CHECK_EQUAL(a.num("entitlement_revision"), 2);
  BOOST_CHECK_EQUAL(a.root.get_object().value().size(), 3u);
  require_wire(f.host("box_revoke_sandbox_admission_grant",
                      R"({"instance_uuid":"instance-b","workspace_uuid":"ws-1","entitlement_revision":3})"),
               "PermissionError: Sandbox admission revocation does not match the trusted instance");
  require_wire(f.host("box_revoke_sandbox_admission_grant",
                      R"({"instance_uuid":"instance-a","workspace_uuid":"ws-1","entitlement_revision":0})"),
               "BoxValidationError: entitlement_revision must be greater than or equal to 1");
}

BOOST_AUTO_TEST_CASE(entitlement_receipt_field_by_field_and_revocation_count) {
  net_fixture f{admission_opts()};
  auto first = f.host("box_put_workspace_entitlement",
                      snapshot_json("instance-a", "workspace-a", 1, true));
  require_ok(first);
  BOOST_CHECK(first.flag("accepted"));
  BOOST_CHECK_EQUAL(first.str("workspace_uuid"), "workspace-a");
  BOOST_CHECK_EQUAL(first.num("entitlement_revision"), 1);
  BOOST_CHECK_EQUAL(first.num("revoked_sessions"), 0);
  BOOST_CHECK_EQUAL(first.root.get_object().value().size(), 4u);

  // The snapshot admits the workspace: its one session runs.
  auto ran = f.tenant("box_exec", R"({"session_id":"global","cmd":"echo in"})");
  require_ok(ran);
  BOOST_CHECK_EQUAL(ran.str("session_id"), "global");

  // A newer snapshot without the feature revokes it, sessions stopped before the reply.
  auto second = f.host("box_put_workspace_entitlement",
                       snapshot_json("instance-a", "workspace-a", 2, false));
  require_ok(second);
  BOOST_CHECK_EQUAL(second.num("entitlement_revision"), 2);
  BOOST_CHECK_EQUAL(second.num("revoked_sessions"), 1);
  BOOST_CHECK_EQUAL(f.backend->stop_count(), 1u);

  require_wire(f.host("box_put_workspace_entitlement",
                      snapshot_json("instance-a", "workspace-a", 1, true)),
               "EntitlementUnavailableError: Workspace entitlement revision rolled back");
}

BOOST_AUTO_TEST_CASE(entitlement_errors) {
  net_fixture f{admission_opts()};
  require_wire(f.host("box_put_workspace_entitlement",
                      snapshot_json("instance-b", "workspace-a", 1, true)),
               "EntitlementUnavailableError: Entitlement scope does not match the Workspace "
               "execution context");
  require_wire(f.host("box_put_workspace_entitlement",
                      R"({"instance_uuid":"instance-a","workspace_uuid":"w","entitlement_revision":true})"),
               "BoxValidationError: entitlement_revision must be an integer");
}

BOOST_AUTO_TEST_CASE(admission_mode_forged_field_outranks_a_decode_error) {
  net_fixture f{admission_opts()};
  require_ok(f.host("box_put_workspace_entitlement",
                    snapshot_json("instance-a", "workspace-a", 1, true)));
  // memory_mb 10 would fail decoding, but the forged session id is reported first.
  auto a = f.tenant("box_exec", R"({"session_id":"other","cmd":"echo","memory_mb":10})");
  BOOST_REQUIRE(!a.ok());
  BOOST_CHECK_EQUAL(std::string{wire_class(a.error.code)}, "BoxAdmissionError");
}

// -- box_init -----------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(init_applies_a_valid_config) {
  net_fixture f;
  auto a = f.host("box_init", R"({"limits":{"max_sessions":10,"max_rpc_file_bytes":1000}})");
  require_ok(a);
  BOOST_CHECK_EQUAL(a.json, R"({"initialized":true})");
  auto cfg = f.current_config();
  BOOST_CHECK_EQUAL(cfg.limits.max_sessions, 10);
  BOOST_CHECK_EQUAL(cfg.limits.max_rpc_file_bytes, 1000);
  // Omitted limits keep their values.
  BOOST_CHECK_EQUAL(cfg.limits.max_managed_processes, 64);
  auto status = f.tenant("box_status");
  require_ok(status);
  BOOST_CHECK_EQUAL(status["limits"]["max_sessions"].get_int64().value(), 10);
}

BOOST_AUTO_TEST_CASE(init_limit_errors_change_nothing) {
  net_fixture f;
  auto before = f.current_config();
  require_wire(f.host("box_init", R"({"limits":{"max_sessions":6000}})"),
               "ValueError: box.limits.max_sessions must be between 0 and 5000");
  require_wire(f.host("box_init", R"({"limits":{"max_sessions":5,"max_admission_records":0}})"),
               "ValueError: box.limits.max_admission_records must be between 1 and 250000");
  require_wire(f.host("box_init", R"({"limits":{"max_sessions":"5"}})"),
               "ValueError: box.limits.max_sessions must be an integer");
  require_wire(f.host("box_init", R"({"limits":{"max_sessions":true}})"),
               "ValueError: box.limits.max_sessions must be an integer");
  require_wire(f.host("box_init", R"({"limits":[]})"), "ValueError: box.limits must be an object");
  BOOST_CHECK(f.current_config() == before);
}

BOOST_AUTO_TEST_CASE(init_default_workspace_errors_change_nothing) {
  net_fixture f;
  auto before = f.current_config();
  auto root = fs::canonical(f.root).string();
  auto local = [&](const std::string& body) {
    return R"({"limits":{"max_sessions":3},"local":{)" + body + "}}";
  };
  fs::create_directories(f.root / "allowed");
  require_wire(f.host("box_init", local(R"("default_workspace":")" + root + R"(/elsewhere/ws",)"
                                        R"("allowed_mount_roots":[")" + root + R"(/allowed"])")),
               "BoxValidationError: box.local.default_workspace is outside allowed_mount_roots: "
                 + root + "/allowed");
  require_wire(f.host("box_init", local(R"("default_workspace":")" + root + R"(/missing/ws")")),
               "BoxValidationError: box.local.default_workspace cannot be created because no "
               "allowed_mount_roots are configured");
  std::ofstream{f.root / "a-file"} << "x";
  require_wire(f.host("box_init", local(R"("default_workspace":")" + root + R"(/a-file",)"
                                        R"("allowed_mount_roots":[")" + root + R"("])")),
               "BoxValidationError: box.local.default_workspace must point to a directory on "
               "the Box runtime host");
  BOOST_CHECK(f.current_config() == before);
  BOOST_CHECK(!fs::exists(f.root / "elsewhere"));
}

BOOST_AUTO_TEST_CASE(init_creates_the_default_workspace_under_an_allowed_root) {
  net_fixture f;
  auto root = fs::canonical(f.root).string();
  auto a = f.host("box_init", R"({"local":{"host_root":")" + root + R"(","default_workspace":"ws2"}})");
  require_ok(a);
  BOOST_CHECK(fs::is_directory(f.root / "ws2"));
  auto cfg = f.current_config();
  BOOST_CHECK_EQUAL(cfg.local.default_workspace, root + "/ws2");
  BOOST_REQUIRE_EQUAL(cfg.local.allowed_mount_roots.size(), 1u);
  BOOST_CHECK_EQUAL(cfg.local.allowed_mount_roots[0], root);
}

// -- box_verify_shared_workspace ----------------------------------------------------------

BOOST_AUTO_TEST_CASE(verify_shared_workspace_digests_the_marker) {
  net_fixture f;
  std::ofstream{f.root / "default" / probe_name} << "hello";
  auto a = f.host("box_verify_shared_workspace", R"({"marker_name":" )" + probe_name + R"( "})");
  require_ok(a);
  BOOST_CHECK_EQUAL(a.str("marker_name"), probe_name);
  BOOST_CHECK_EQUAL(a.str("sha256"), sha256_hex("hello"));
  BOOST_CHECK_EQUAL(a.num("size"), 5);
}

BOOST_AUTO_TEST_CASE(verify_shared_workspace_failures_are_readiness_errors) {
  net_fixture f;
  auto call = [&](const std::string& name) {
    return f.host("box_verify_shared_workspace", R"({"marker_name":")" + name + R"("})");
  };
  const auto bad_name = "BoxReadinessError: Invalid Box shared Workspace probe basename";
  require_wire(call("../etc/passwd"), bad_name);
  require_wire(call(".langbot-box-volume-probe-0123456789ABCDEF0123456789abcdef"), bad_name);
  require_wire(f.host("box_verify_shared_workspace", "{}"), bad_name);
  require_wire(f.host("box_verify_shared_workspace", R"({"marker_name":5})"), bad_name);
  const auto unreadable = "BoxReadinessError: Box Runtime cannot read the Core shared Workspace probe";
  require_wire(call(probe_name), unreadable);
  auto dir = f.root / "default";
  fs::create_symlink(f.root / "target", dir / probe_name);
  std::ofstream{f.root / "target"} << "x";
  require_wire(call(probe_name), unreadable);
  fs::remove(dir / probe_name);
  fs::create_directory(dir / probe_name);
  require_wire(call(probe_name), "BoxReadinessError: Box shared Workspace probe is not a regular file");
  fs::remove(dir / probe_name);
  std::ofstream{dir / probe_name}.flush();
  require_wire(call(probe_name), "BoxReadinessError: Box shared Workspace probe has an invalid size");
  std::ofstream{dir / probe_name} << std::string(1025, 'x');
  require_wire(call(probe_name), "BoxReadinessError: Box shared Workspace probe has an invalid size");
}

BOOST_AUTO_TEST_CASE(verify_shared_workspace_outside_the_roots_is_a_readiness_error) {
  net_fixture f;
  auto root = fs::canonical(f.root).string();
  fs::create_directories(f.root / "other");
  require_ok(f.host("box_init", R"({"local":{"default_workspace":")" + root
                                  + R"(/default","allowed_mount_roots":[")" + root + R"(/other"]}})"));
  require_wire(f.host("box_verify_shared_workspace", R"({"marker_name":")" + probe_name + R"("})"),
               "BoxReadinessError: Managed sandbox workspace is outside box.local.allowed_mount_roots");
}

// -- box_shutdown -------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(shutdown_drops_every_session_and_answers_empty) {
  net_fixture f;
  require_ok(f.tenant("box_exec", R"({"session_id":"s","cmd":"echo a","persistent":true})"));
  auto a = f.host("box_shutdown");
  require_ok(a);
  BOOST_CHECK_EQUAL(a.json, "{}");
  BOOST_CHECK_EQUAL(f.backend->stop_count(), 1u);
  auto listed = f.tenant("box_get_sessions");
  require_ok(listed);
  BOOST_CHECK_EQUAL(listed["sessions"].get_array().value().size(), 0u);
}

// -- __file_chunk ---------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(file_chunks_are_written_in_order_into_a_private_directory) {
  net_fixture f;
  // "hello " and "world" in two chunks.
  require_ok(f.host("__file_chunk", chunk("abc123-0f.zip", "aGVsbG8g", 0, 2)));
  require_ok(f.host("__file_chunk", chunk("abc123-0f.zip", "d29ybGQ=", 1, 2)));
  BOOST_CHECK_EQUAL(read_file(f.transfers / "abc123-0f.zip"), "hello world");
  struct stat st {};
  BOOST_REQUIRE_EQUAL(::stat(f.transfers.c_str(), &st), 0);
  BOOST_CHECK_EQUAL(st.st_mode & 0777, 0700u);
  // Index 0 again truncates.
  require_ok(f.host("__file_chunk", chunk("abc123-0f.zip", "eA==", 0, 1)));
  BOOST_CHECK_EQUAL(read_file(f.transfers / "abc123-0f.zip"), "x");
  // An empty file still sends one empty chunk.
  require_ok(f.host("__file_chunk", chunk("empty", "", 0, 1)));
  BOOST_CHECK(fs::exists(f.transfers / "empty"));
  BOOST_CHECK_EQUAL(fs::file_size(f.transfers / "empty"), 0u);
}

BOOST_AUTO_TEST_CASE(file_chunk_key_checks) {
  net_fixture f;
  const auto invalid = "ValueError: Invalid file transfer key";
  for (auto key : {"../x", "a/b", "a\\\\b", " a", "a ", ".hidden", "", "a..b", "-x"})
    require_wire(f.host("__file_chunk", chunk(key, "eA==")), invalid);
  require_wire(f.host("__file_chunk", std::string{R"({"file_key":")"} + std::string(256, 'a')
                                        + R"(","chunk_base64":"","chunk_index":0,"chunk_amount":1})"),
               invalid);
  require_wire(f.host("__file_chunk", R"({"file_key":5,"chunk_base64":"","chunk_index":0,"chunk_amount":1})"),
               invalid);
  require_ok(f.host("__file_chunk", chunk(std::string(255, 'a'), "eA==")));
  BOOST_CHECK(!fs::exists(f.root / "x"));
}

BOOST_AUTO_TEST_CASE(file_chunk_missing_keys_are_key_errors_in_reading_order) {
  net_fixture f;
  require_wire(f.host("__file_chunk", R"({"chunk_base64":""})"), "KeyError: 'file_key'");
  // The key is checked before the other keys are read.
  require_wire(f.host("__file_chunk", R"({"file_key":"../x"})"),
               "ValueError: Invalid file transfer key");
  require_wire(f.host("__file_chunk", R"({"file_key":"k"})"), "KeyError: 'chunk_base64'");
  require_wire(f.host("__file_chunk", R"({"file_key":"k","chunk_base64":""})"),
               "KeyError: 'chunk_index'");
  require_wire(f.host("__file_chunk", R"({"file_key":"k","chunk_base64":"","chunk_index":0})"),
               "KeyError: 'chunk_amount'");
}

BOOST_AUTO_TEST_CASE(file_chunk_size_and_position_checks_in_order) {
  net_fixture f;
  const auto too_big = "ValueError: File transfer chunk exceeds the protocol limit";
  const auto position = "ValueError: Invalid file chunk position";
  auto raw = [](const std::string& b64, const std::string& index, const std::string& amount) {
    return R"({"file_key":"k","chunk_base64":)" + b64 + R"(,"chunk_index":)" + index
           + R"(,"chunk_amount":)" + amount + "}";
  };
  require_wire(f.host("__file_chunk", raw('"' + std::string(21849, 'A') + '"', "0", "1")), too_big);
  // The length check comes before the position check.
  require_wire(f.host("__file_chunk", raw('"' + std::string(21849, 'A') + '"', "5", "1")), too_big);
  require_wire(f.host("__file_chunk", raw("5", "0", "1")), too_big);
  require_wire(f.host("__file_chunk", raw("null", "0", "1")), too_big);
  require_wire(f.host("__file_chunk", raw(R"("eA==")", "true", "1")), position);
  require_wire(f.host("__file_chunk", raw(R"("eA==")", "0", "true")), position);
  require_wire(f.host("__file_chunk", raw(R"("eA==")", "0.0", "1")), position);
  require_wire(f.host("__file_chunk", raw(R"("eA==")", "\"0\"", "1")), position);
  require_wire(f.host("__file_chunk", raw(R"("eA==")", "0", "0")), position);
  require_wire(f.host("__file_chunk", raw(R"("eA==")", "-1", "2")), position);
  require_wire(f.host("__file_chunk", raw(R"("eA==")", "2", "2")), position);
  // The position is checked before the base64 is decoded.
  require_wire(f.host("__file_chunk", raw(R"("***")", "2", "2")), position);
  require_wire(f.host("__file_chunk", raw(R"("e A==")", "0", "1")),
               "ValueError: Only base64 data is allowed");
  require_wire(f.host("__file_chunk", raw(R"("eA=")", "0", "1")), "ValueError: Incorrect padding");
  // 21848 characters decode to 16386 bytes: over the chunk limit.
  require_wire(f.host("__file_chunk", raw('"' + std::string(21848, 'A') + '"', "0", "1")), too_big);
  // Exactly 16384 bytes pass.
  std::string full(21844, 'A');
  full += "AA==";
  require_ok(f.host("__file_chunk", raw('"' + full + '"', "0", "1")));
  BOOST_CHECK_EQUAL(fs::file_size(f.transfers / "k"), 16384u);
}

BOOST_AUTO_TEST_CASE(file_chunk_capacity_is_128_distinct_keys_per_connection) {
  net_fixture f;
  for (int i = 0; i < 128; ++i)
    require_ok(f.host("__file_chunk", chunk("key" + std::to_string(i), "eA==")));
  require_wire(f.host("__file_chunk", chunk("key128", "eA==")),
               "ValueError: Active file transfer capacity reached");
  // A key already active still takes chunks.
  require_ok(f.host("__file_chunk", chunk("key7", "eA==", 1, 2)));
  BOOST_CHECK_EQUAL(read_file(f.transfers / "key7"), "xx");
}

BOOST_AUTO_TEST_CASE(file_chunk_size_limit_is_the_configured_max_rpc_file_bytes) {
  net_fixture f;
  require_ok(f.host("box_init", R"({"limits":{"max_rpc_file_bytes":10}})"));
  const auto over = "ValueError: File transfer exceeds the configured size limit";
  // 11 bytes in one chunk.
  require_wire(f.host("__file_chunk", chunk("big", "aGVsbG8gd29ybGQ=")), over);
  // 6 + 5 bytes in two chunks: the second goes over.
  require_ok(f.host("__file_chunk", chunk("two", "aGVsbG8g", 0, 2)));
  require_wire(f.host("__file_chunk", chunk("two", "d29ybGQ=", 1, 2)), over);
  BOOST_CHECK_EQUAL(read_file(f.transfers / "two"), "hello ");
  // 10 bytes exactly pass.
  require_ok(f.host("__file_chunk", chunk("ten", "MDEyMzQ1Njc4OQ==")));
}

BOOST_AUTO_TEST_CASE(file_chunk_without_a_transfer_directory_is_refused) {
  net_fixture f;
  auto other = f.sys.spawn(driver, f.dir(), f.pool, f.shared, std::string{});
  require_wire(f.rpc_on(other, "__file_chunk", chunk("k", "eA=="), ""),
               "RuntimeError: File transfers are not available on this connection");
  // The protocol checks still come first.
  require_wire(f.rpc_on(other, "__file_chunk", chunk("../k", "eA=="), ""),
               "ValueError: Invalid file transfer key");
  caf::anon_send_exit(other, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(closing_the_connection_deletes_its_transfers) {
  net_fixture f;
  // A connection with a pool of its own: once the connection and the test let go of
  // it, the pool's destructor runs every queued job, the removal included.
  auto own_pool = std::make_shared<worker_pool>();
  auto dir = f.root / "transfers" / "conn-own";
  auto conn = f.sys.spawn(driver, f.dir(), own_pool, f.shared, dir.string());
  require_ok(f.rpc_on(conn, "__file_chunk", chunk("partial", "aGVsbG8g", 0, 2), ""));
  BOOST_REQUIRE(fs::exists(dir / "partial"));
  {
    caf::scoped_actor self{f.sys};
    self->monitor(conn);
    caf::anon_send(conn, closing_atom_v);
    self->receive([](const caf::down_msg&) {},
                  caf::after(std::chrono::seconds{30}) >> [] { BOOST_FAIL("the connection did not end"); });
  }
  conn = nullptr;
  own_pool.reset();
  BOOST_CHECK(!fs::exists(dir));
}

BOOST_AUTO_TEST_SUITE_END()
