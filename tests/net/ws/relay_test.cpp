// The managed-process stdio relay over real loopback sockets (protocol.md §1.2, §1.4):
// the handshake checks and their replies, the echo through a real `cat` started by the
// scripted backend, one attacher at a time with a bounded wait, and the ends of a relay
// (client close, generation fence, server stop). Nothing sleeps to synchronise.
#include <chrono>
#include <filesystem>
#include <optional>
#include <thread>

#include <boost/test/unit_test.hpp>
#include <caf/all.hpp>

#include "actors/caf_support.hpp"
#include "actors/directory.hpp"
#include "actors/process_registry.hpp"
#include "backends/testing/scripted.hpp"
#include "messages/tenancy.hpp"
#include "messages/time.hpp"
#include "net/ws/server.hpp"
#include "tests/actors/fixture.hpp"
#include "tests/net/ws/client.hpp"

namespace boxrt::test {
namespace {

constexpr const char* relay_token = "0123456789abcdef0123456789abcdef-relay";
constexpr const char* busy_reason = "managed process is attached to another relay";

struct relay_fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys;
  std::shared_ptr<scripted_backend> backend;
  std::shared_ptr<worker_pool> pool = std::make_shared<worker_pool>();
  std::shared_ptr<process_registry> processes = std::make_shared<process_registry>();
  std::filesystem::path root;
  std::optional<directory_actor> dir;
  std::unique_ptr<net::server> srv;
  uint16_t port = 0;
  std::string token;

  static caf::actor_system_config& make_config(caf::actor_system_config& cfg) {
    configure_actor_system(cfg, 2);
    return cfg;
  }

  explicit relay_fixture(net::server_options opts = {}, bool admission = false) : sys(make_config(cfg)) {
    root = std::filesystem::temp_directory_path()
           / ("boxrt-relay-" + std::to_string(::getpid()) + "-" + std::to_string(wall_now_us()));
    std::filesystem::create_directories(root / "default");
    box_config config;
    config.backend = "scripted";
    config.local.host_root = root.string();
    config.local.default_workspace = (root / "default").string();
    config.local.allowed_mount_roots = {root.string()};
    config.scripted.ready_keys = all_ready_keys();
    if (admission)
      config.admission = cloud_policy();
    backend = std::make_shared<scripted_backend>(config.scripted);
    directory_args a;
    a.testing = true; // the scripted backend stands in for an isolating one
    a.config = config;
    a.backend = backend;
    a.backend_name = backend->name();
    a.pool = pool;
    a.processes = processes;
    dir = spawn_directory(sys, std::move(a));
    opts.host = "127.0.0.1";
    opts.port = 0;
    opts.transfer_dir = (root / "transfers").string();
    token = opts.control_token;
    srv = std::make_unique<net::server>(sys, *dir, pool, opts, processes);
    port = srv->start();
  }

  ~relay_fixture() {
    srv->stop();
    caf::scoped_actor self{sys};
    self->request(*dir, std::chrono::seconds{30}, shutdown_atom_v).receive([](int64_t) {}, [](caf::error&) {});
    caf::anon_send_exit(*dir, caf::exit_reason::user_shutdown);
    std::error_code err;
    std::filesystem::remove_all(root, err);
  }

  /// An RPC connection of instance-a (its handshake pins the instance).
  ws_client rpc() {
    ws_options o;
    o.token = token;
    return ws_client{port, o};
  }

  /// Creates session `logical` of `workspace` and starts a `cat` in it as `pid`
  /// ("" = the spec leaves process_id out, so it is "default").
  void start_cat(ws_client& c, const std::string& workspace, const std::string& logical,
                 const std::string& pid, int64_t generation = 1) {
    BOOST_REQUIRE(c.is_open());
    auto ctx = context_json(workspace, generation);
    auto r = c.call(next_seq++, "box_exec",
                    R"({"session_id":")" + logical + R"(","cmd":"echo hi"})", ctx);
    BOOST_REQUIRE_MESSAGE(r.code == 0, r.raw);
    std::string spec = R"({"command":"cat")";
    if (!pid.empty())
      spec += R"(,"process_id":")" + pid + R"(")";
    spec += "}";
    r = c.call(next_seq++, "box_start_managed_process",
               R"({"session_id":")" + logical + R"(","spec":)" + spec + "}", ctx);
    BOOST_REQUIRE_MESSAGE(r.code == 0, r.raw);
  }

  int64_t next_seq = 1;
};

/// The physical id of `logical` in instance-a's `workspace` at `generation`.
std::string physical(const std::string& workspace, const std::string& logical,
                     int64_t generation = 1) {
  return runtime_namespace("instance-a", workspace, generation) + "-" + logical;
}

struct relay_target {
  std::string workspace = "ws-relay";
  std::string session = physical("ws-relay", "s1");
  std::string process = "p1";
  std::string generation = "1";
  bool legacy = false;
  bool mcp = true;
};

ws_options relay_options(const relay_target& t, const std::string& token = "") {
  ws_options o;
  o.token = token;
  o.target = "/v1/sessions/" + t.session + "/managed-process/"
             + (t.legacy ? std::string{} : t.process + "/") + "ws";
  o.extra_headers = {{"X-LangBot-Workspace-Id", t.workspace},
                     {"X-LangBot-Placement-Generation", t.generation}};
  if (t.mcp)
    o.extra_headers.emplace_back("Sec-WebSocket-Protocol", "mcp");
  return o;
}

void require_unauthorized(const ws_client& c) {
  BOOST_REQUIRE(!c.is_open());
  BOOST_CHECK_EQUAL(c.http_status(), 401u);
  BOOST_CHECK_EQUAL(c.http_body(), "Unauthorized");
}

void require_error(const ws_client& c, const std::string& code, const std::string& message) {
  BOOST_REQUIRE(!c.is_open());
  BOOST_CHECK_EQUAL(c.http_status(), 400u);
  BOOST_CHECK_EQUAL(std::string{c.http_response()[http::field::content_type]},
                    "application/json");
  BOOST_CHECK_EQUAL(c.http_body(), R"({"error":{"code":")" + code + R"(","message":")" + message
                                     + R"("}})");
}

/// Reads TEXT frames until their concatenation holds `want`; false when the relay closes
/// first. Chunks are not aligned to lines, so one line may come in pieces.
bool read_until(ws_client& c, const std::string& want, std::string* got = nullptr) {
  std::string all;
  while (all.find(want) == std::string::npos) {
    auto text = c.read();
    if (!text) {
      if (got)
        *got = all;
      return false;
    }
    all += *text;
  }
  if (got)
    *got = all;
  return true;
}

net::server_options short_wait() {
  net::server_options o;
  o.relay_attach_wait_ms = 200;
  return o;
}

net::server_options long_wait() {
  net::server_options o;
  o.relay_attach_wait_ms = 20000;
  return o;
}

net::server_options with_token() {
  net::server_options o;
  o.control_token = relay_token;
  return o;
}

struct short_wait_fixture : relay_fixture {
  short_wait_fixture() : relay_fixture(short_wait()) {}
};

struct long_wait_fixture : relay_fixture {
  long_wait_fixture() : relay_fixture(long_wait()) {}
};

struct admission_relay_fixture : relay_fixture {
  admission_relay_fixture() : relay_fixture({}, true) {}
};

struct token_relay_fixture : relay_fixture {
  token_relay_fixture() : relay_fixture(with_token()) {}
};

} // namespace

BOOST_AUTO_TEST_SUITE(relay)

// -- handshake checks 1 to 3 (the server's own) ------------------------------------------------

BOOST_FIXTURE_TEST_CASE(relay_never_pins_the_instance, relay_fixture) {
  relay_target t;
  // Nothing is pinned yet: the relay refuses and does not pin.
  require_unauthorized(ws_client{port, relay_options(t)});
  auto c = rpc();  // pins instance-a
  ws_options other = relay_options(t);
  other.instance = "instance-b";
  require_unauthorized(ws_client{port, other});
  ws_options missing = relay_options(t);
  missing.instance = std::nullopt;
  require_unauthorized(ws_client{port, missing});
  ws_options malformed = relay_options(t);
  malformed.instance = "-bad";
  require_unauthorized(ws_client{port, malformed});
}

BOOST_FIXTURE_TEST_CASE(relay_needs_the_control_token, token_relay_fixture) {
  auto c = rpc();
  relay_target t;
  require_unauthorized(ws_client{port, relay_options(t)});
  require_unauthorized(ws_client{port, relay_options(t, std::string{relay_token} + "x")});
  // The right token passes check 1; the unknown workspace then fails the fence.
  require_unauthorized(ws_client{port, relay_options(t, relay_token)});
}

BOOST_FIXTURE_TEST_CASE(relay_checks_the_workspace_header, relay_fixture) {
  auto c = rpc();
  start_cat(c, "ws-relay", "s1", "p1");
  for (std::string ws : {std::string{}, std::string{"   "}, std::string(257, 'w')}) {
    BOOST_TEST_CONTEXT("workspace '" << ws << "'") {
      relay_target t;
      t.workspace = ws;
      require_unauthorized(ws_client{port, relay_options(t)});
    }
  }
  // Stripped before use: the padded header names the same workspace.
  relay_target padded;
  padded.workspace = "  ws-relay ";
  ws_client ok{port, relay_options(padded)};
  BOOST_CHECK(ok.is_open());
}

BOOST_FIXTURE_TEST_CASE(relay_checks_the_generation_header, relay_fixture) {
  auto c = rpc();
  start_cat(c, "ws-relay", "s1", "p1");
  for (std::string g : {"", "0", "-1", "01", "+1", "1.0", "1_0", "one", "1 1",
                        "99999999999999999999999"}) {
    BOOST_TEST_CONTEXT("generation '" << g << "'") {
      relay_target t;
      t.generation = g;
      require_unauthorized(ws_client{port, relay_options(t)});
    }
  }
  relay_target padded;
  padded.generation = " 1 ";
  ws_client ok{port, relay_options(padded)};
  BOOST_CHECK(ok.is_open());
}

BOOST_FIXTURE_TEST_CASE(relay_paths_and_methods, relay_fixture) {
  BOOST_CHECK_EQUAL(http_get(port, "/v1/sessions/x/managed-process/p/ws/extra").status, 404u);
  BOOST_CHECK_EQUAL(http_get(port, "/v1/sessions//managed-process/ws").status, 404u);
  BOOST_CHECK_EQUAL(http_get(port, "/v1/sessions/x/managed/ws").status, 404u);
  BOOST_CHECK_EQUAL(http_request(port, http::verb::post, "/v1/sessions/x/managed-process/ws").status,
                    405u);
  // A relay path without the headers: authentication first.
  BOOST_CHECK_EQUAL(http_get(port, "/v1/sessions/x/managed-process/ws").status, 401u);
}

// -- the directory's checks ---------------------------------------------------------------------

BOOST_FIXTURE_TEST_CASE(unknown_session_and_process_are_400_json, relay_fixture) {
  auto c = rpc();
  start_cat(c, "ws-relay", "s1", "p1");
  relay_target no_session;
  no_session.session = physical("ws-relay", "nosuch");
  require_error(ws_client{port, relay_options(no_session)}, "BoxSessionNotFoundError",
                "session " + no_session.session + " not found");
  relay_target no_process;
  no_process.process = "p2";
  require_error(ws_client{port, relay_options(no_process)}, "BoxManagedProcessNotFoundError",
                "session " + no_process.session + " has no managed process with process_id=p2");
  relay_target legacy;  // the legacy path means "default", which was not started
  legacy.legacy = true;
  require_error(ws_client{port, relay_options(legacy)}, "BoxManagedProcessNotFoundError",
                "session " + legacy.session + " has no managed process with process_id=default");
}

BOOST_FIXTURE_TEST_CASE(admission_mode_refuses_the_relay_with_the_reference_400, admission_relay_fixture) {
  // An admission-mode workspace whose fence holds generation 1 (an entitlement put).
  auto c = rpc();
  auto put = c.call(next_seq++, "box_put_workspace_entitlement",
                    R"({"instance_uuid":"instance-a","workspace_uuid":"ws-relay","entitlement_revision":1,)"
                    R"("status":"active","not_before":1,"expires_at":4000000000,)"
                    R"("features":{"managed_sandbox":true},"limits":{"managed_sandbox_sessions":1}})");
  BOOST_REQUIRE_MESSAGE(put.code == 0, put.raw);
  auto exec = c.call(next_seq++, "box_exec", R"({"session_id":"global","cmd":"echo hi"})",
                     context_json("ws-relay"));
  BOOST_REQUIRE_MESSAGE(exec.code == 0, exec.raw);
  relay_target t;
  t.session = physical("ws-relay", "global");
  require_error(ws_client{port, relay_options(t)}, "BoxAdmissionError",
                "Sandbox admission grant does not permit managed process relay");
  // The sandbox admission runs first: once the entitlement is lost its refusal (not an
  // admission or readiness error, so not a 400 body) makes the handshake unauthorized.
  auto lost = c.call(next_seq++, "box_put_workspace_entitlement",
                     R"({"instance_uuid":"instance-a","workspace_uuid":"ws-relay","entitlement_revision":2,)"
                     R"("status":"active","not_before":1,"expires_at":4000000000,)"
                     R"("features":{"managed_sandbox":false},"limits":{"managed_sandbox_sessions":0}})");
  BOOST_REQUIRE_MESSAGE(lost.code == 0, lost.raw);
  require_unauthorized(ws_client{port, relay_options(t)});
}

BOOST_FIXTURE_TEST_CASE(stale_or_foreign_placements_are_401, relay_fixture) {
  auto c = rpc();
  start_cat(c, "ws-relay", "s1", "p1");
  relay_target future;
  future.generation = "2";
  require_unauthorized(ws_client{port, relay_options(future)});
  relay_target unknown_workspace;
  unknown_workspace.workspace = "ws-never-seen";
  require_unauthorized(ws_client{port, relay_options(unknown_workspace)});
  relay_target other_placement;  // a session id of another workspace
  other_placement.session = physical("ws-other", "s1");
  require_unauthorized(ws_client{port, relay_options(other_placement)});
  relay_target bare_prefix;
  bare_prefix.session = runtime_namespace("instance-a", "ws-relay", 1) + "-";
  require_unauthorized(ws_client{port, relay_options(bare_prefix)});
}

// -- the relay itself ---------------------------------------------------------------------------

BOOST_FIXTURE_TEST_CASE(relay_echoes_through_cat, relay_fixture) {
  auto c = rpc();
  start_cat(c, "ws-relay", "s1", "p1");
  relay_target t;
  ws_client r{port, relay_options(t)};
  BOOST_REQUIRE(r.is_open());
  BOOST_CHECK_EQUAL(std::string{r.http_response()[http::field::sec_websocket_protocol]}, "mcp");
  r.send("hello");
  BOOST_CHECK(read_until(r, "hello\n"));
  // BINARY frames are ignored; lines keep their order.
  r.send_binary("ignored");
  r.send("one");
  r.send("two");
  std::string got;
  BOOST_CHECK(read_until(r, "one\ntwo\n", &got));
  BOOST_CHECK_EQUAL(got, "one\ntwo\n");
  r.close();
  // The process keeps running: a new relay attaches at once.
  ws_client again{port, relay_options(t)};
  BOOST_REQUIRE(again.is_open());
  again.send("again");
  BOOST_CHECK(read_until(again, "again\n"));
}

BOOST_FIXTURE_TEST_CASE(a_client_without_subprotocol_is_accepted, relay_fixture) {
  auto c = rpc();
  start_cat(c, "ws-relay", "s1", "p1");
  relay_target t;
  t.mcp = false;
  ws_client r{port, relay_options(t)};
  BOOST_REQUIRE(r.is_open());
  BOOST_CHECK(r.http_response().find(http::field::sec_websocket_protocol)
              == r.http_response().end());
  r.send("plain");
  BOOST_CHECK(read_until(r, "plain\n"));
}

BOOST_FIXTURE_TEST_CASE(the_legacy_path_relays_the_default_process, relay_fixture) {
  auto c = rpc();
  start_cat(c, "ws-relay", "s1", "");
  relay_target t;
  t.legacy = true;
  ws_client r{port, relay_options(t)};
  BOOST_REQUIRE(r.is_open());
  r.send("legacy");
  BOOST_CHECK(read_until(r, "legacy\n"));
}

BOOST_FIXTURE_TEST_CASE(a_second_attacher_waits_for_the_first_to_detach, long_wait_fixture) {
  auto c = rpc();
  start_cat(c, "ws-relay", "s1", "p1");
  relay_target t;
  ws_client first{port, relay_options(t)};
  BOOST_REQUIRE(first.is_open());
  first.send("first");
  BOOST_REQUIRE(read_until(first, "first\n"));
  ws_client second{port, relay_options(t)};
  BOOST_REQUIRE(second.is_open());  // upgraded, then waiting
  second.send("second");
  // While the first holds the process, the second's line does not reach stdin and the
  // second reads none of stdout: the first gets every line, in order, and nothing else.
  std::string expected;
  for (int i = 1; i <= 50; ++i) {
    first.send("line-" + std::to_string(i));
    expected += "line-" + std::to_string(i) + "\n";
  }
  std::string got;
  BOOST_REQUIRE(read_until(first, "line-50\n", &got));
  BOOST_CHECK_EQUAL(got, expected);
  first.close();
  // The waiting relay attaches and its queued line goes through, and only that.
  std::string second_got;
  BOOST_REQUIRE(read_until(second, "second\n", &second_got));
  BOOST_CHECK_EQUAL(second_got, "second\n");
}

BOOST_FIXTURE_TEST_CASE(a_waiting_relay_that_leaves_loses_its_turn, long_wait_fixture) {
  auto c = rpc();
  start_cat(c, "ws-relay", "s1", "p1");
  relay_target t;
  ws_client first{port, relay_options(t)};
  BOOST_REQUIRE(first.is_open());
  first.send("first");
  BOOST_REQUIRE(read_until(first, "first\n"));
  // The second waits, then leaves; the third waits behind it.
  ws_client second{port, relay_options(t)};
  BOOST_REQUIRE(second.is_open());
  second.send("second");
  second.close();
  ws_client third{port, relay_options(t)};
  BOOST_REQUIRE(third.is_open());
  third.send("third");
  first.close();
  // The session hands the process to the third, not to the relay that left (which would
  // hold it until the 20 s wait runs out), and the second's line never reaches stdin.
  std::string got;
  BOOST_REQUIRE(read_until(third, "third\n", &got));
  BOOST_CHECK_EQUAL(got, "third\n");
}

BOOST_FIXTURE_TEST_CASE(the_process_info_reports_a_holder, relay_fixture) {
  auto c = rpc();
  start_cat(c, "ws-relay", "s1", "p1");
  auto get = [&] {
    auto reply = c.call(next_seq++, "box_get_managed_process",
                        R"({"session_id":"s1","process_id":"p1"})", context_json("ws-relay"));
    BOOST_REQUIRE_MESSAGE(reply.code == 0, reply.raw);
    return reply.raw;
  };
  BOOST_CHECK_NE(get().find(R"("attached":false)"), std::string::npos);
  relay_target t;
  ws_client r{port, relay_options(t)};
  BOOST_REQUIRE(r.is_open());
  r.send("x");
  BOOST_REQUIRE(read_until(r, "x\n"));
  BOOST_CHECK_NE(get().find(R"("attached":true)"), std::string::npos);
}

BOOST_FIXTURE_TEST_CASE(a_second_attacher_gives_up_after_the_bounded_wait, short_wait_fixture) {
  auto c = rpc();
  start_cat(c, "ws-relay", "s1", "p1");
  relay_target t;
  ws_client first{port, relay_options(t)};
  BOOST_REQUIRE(first.is_open());
  first.send("first");
  BOOST_REQUIRE(read_until(first, "first\n"));
  ws_client second{port, relay_options(t)};
  BOOST_REQUIRE(second.is_open());
  BOOST_CHECK_EQUAL(second.wait_closed(), uint16_t{1013});
  BOOST_CHECK_EQUAL(second.close_reason().reason, busy_reason);
  // The holder is unaffected.
  first.send("after");
  BOOST_CHECK(read_until(first, "after\n"));
}

BOOST_FIXTURE_TEST_CASE(a_stopped_process_ends_its_relay, relay_fixture) {
  auto c = rpc();
  start_cat(c, "ws-relay", "s1", "p1");
  relay_target t;
  ws_client r{port, relay_options(t)};
  BOOST_REQUIRE(r.is_open());
  r.send("x");
  BOOST_REQUIRE(read_until(r, "x\n"));
  auto reply = c.call(next_seq++, "box_stop_managed_process", R"({"session_id":"s1","process_id":"p1"})",
                      context_json("ws-relay"));
  BOOST_CHECK_MESSAGE(reply.code == 0, reply.raw);
  BOOST_CHECK_EQUAL(r.wait_closed(), uint16_t{1000});
  BOOST_CHECK_EQUAL(r.close_reason().reason, "managed process exited");
}

BOOST_FIXTURE_TEST_CASE(advancing_the_generation_ends_an_attached_relay, relay_fixture) {
  auto c = rpc();
  start_cat(c, "ws-relay", "s1", "p1");
  relay_target t;
  ws_client r{port, relay_options(t)};
  BOOST_REQUIRE(r.is_open());
  r.send("before");
  BOOST_REQUIRE(read_until(r, "before\n"));
  // A tenant call at generation 2 advances the fence and retires generation 1's sessions.
  auto reply = c.call(next_seq++, "box_get_sessions", "{}", context_json("ws-relay", 2));
  BOOST_CHECK_MESSAGE(reply.code == 0, reply.raw);
  BOOST_CHECK_EQUAL(r.wait_closed(), uint16_t{1000});
  // Closed because the placement went stale, and said so (not just "exited").
  BOOST_CHECK_EQUAL(r.close_reason().reason, "Stale Box placement generation");
  // The old generation is stale from now on.
  require_unauthorized(ws_client{port, relay_options(t)});
}

BOOST_FIXTURE_TEST_CASE(server_stop_closes_relays_with_1001, relay_fixture) {
  auto c = rpc();
  start_cat(c, "ws-relay", "s1", "p1");
  relay_target t;
  ws_client r{port, relay_options(t)};
  BOOST_REQUIRE(r.is_open());
  r.send("x");
  BOOST_REQUIRE(read_until(r, "x\n"));
  std::thread stopper{[this] { srv->stop(); }};
  BOOST_CHECK_EQUAL(r.wait_closed(), uint16_t{1001});
  BOOST_CHECK_EQUAL(r.close_reason().reason, "Box runtime shutting down");
  BOOST_CHECK_EQUAL(c.wait_closed(), uint16_t{1001});
  stopper.join();
  BOOST_CHECK_EQUAL(srv->connections(), 0u);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace boxrt::test
