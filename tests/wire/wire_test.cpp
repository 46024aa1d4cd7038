// boxd as a real process on loopback, driven over a real WebSocket: the acceptance
// scenarios of admission.md §5.1, the bad-input battery, the in-flight cap and
// shutdown. The scripted backend stands in for sandboxes (admission logic only).
#include <boost/test/unit_test.hpp>

#include <simdjson.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "messages/base/json.hpp"
#include "net/ws/client.hpp"
#include "tests/wire/boxd_process.hpp"
#include "tests/wire/process_probe.hpp"
#include "tests/wire/wire_common.hpp"

using namespace boxrt;
using namespace boxrt::test;

namespace {

using namespace wire;


const std::string token_config = R"(, "control_token": ")" + token + "\"";

/// The scripted backend may make admission ready only in a declared test.
std::string server_for(const std::string& backend) {
  return token_config + (backend == "scripted" ? R"(, "testing": true)" : "");
}



bool sandbox_capable() {
  return ::geteuid() == 0 && ::access("/usr/bin/bwrap", X_OK) == 0;
}

/// Real sandboxes need root and bubblewrap (as CI has); elsewhere these tests are skipped.
boost::test_tools::assertion_result sandbox_precondition(boost::unit_test::test_unit_id) {
  return {sandbox_capable()};
}





simdjson::dom::element parse(simdjson::dom::parser& p, const std::string& text) {
  simdjson::dom::element e;
  BOOST_REQUIRE_MESSAGE(p.parse(text).get(e) == simdjson::SUCCESS, "not JSON: " + text);
  return e;
}

std::string str(simdjson::dom::element e, const char* key) {
  std::string_view v;
  if (e[key].get_string().get(v) != simdjson::SUCCESS)
    return "<missing " + std::string{key} + ">";
  return std::string{v};
}

int64_t num(simdjson::dom::element e, const char* key) {
  int64_t v = -999;
  if (e[key].get_int64().get(v)) {}
  return v;
}

} // namespace

BOOST_AUTO_TEST_SUITE(wire_standard)

BOOST_AUTO_TEST_CASE(exec_round_trip_over_a_real_socket) {
  boxd_process boxd{standard_box, token_config};
  auto c = connect(boxd);
  auto r = c.call("box_exec", R"({"session_id":"s1","cmd":"echo hello"})", ctx("workspace-a"));
  BOOST_REQUIRE_EQUAL(r.code, 0);
  BOOST_CHECK_EQUAL(r.message, "success");
  simdjson::dom::parser p;
  auto d = parse(p, r.data_json);
  BOOST_CHECK_EQUAL(str(d, "session_id"), "s1");
  BOOST_CHECK_EQUAL(str(d, "stdout"), "hello");
  BOOST_CHECK_EQUAL(str(d, "status"), "completed");
  BOOST_CHECK_EQUAL(num(d, "exit_code"), 0);
}

BOOST_AUTO_TEST_CASE(handshake_failures_are_unauthorized) {
  boxd_process boxd{standard_box, token_config};
  auto refused = [&](const std::string& tok, const std::string& instance) {
    net::rpc_client c;
    try {
      c.connect({boxd.url(), tok, instance});
    } catch (const std::exception& e) {
      return std::string{e.what()}.find("401") != std::string::npos;
    }
    return false;
  };
  BOOST_CHECK(refused("", "instance-a"));
  BOOST_CHECK(refused(token + "x", "instance-a"));
  BOOST_CHECK(refused(token, "-bad instance"));
  auto pinned = connect(boxd, "instance-a");
  BOOST_CHECK_EQUAL(pinned.call("__ping", "{}").code, 0);
  BOOST_CHECK(refused(token, "instance-b"));
}

BOOST_AUTO_TEST_CASE(bad_input_is_answered_as_the_reference_does_and_changes_nothing) {
  boxd_process boxd{standard_box, token_config};
  auto c = connect(boxd);
  simdjson::dom::parser p;
  // Ignored without a reply: malformed JSON, a non-object, a response, no action.
  c.send_text("{not json");
  c.send_text("[1,2,3]");
  c.send_text(R"({"seq_id":5,"code":0,"message":"success","data":{}})");
  c.send_text(R"({"seq_id":6,"data":{}})");
  BOOST_CHECK_EQUAL(c.call("__ping", "{}").code, 0);
  // Missing seq_id: answered with -1.
  c.send_text(R"({"action":"__ping","data":{}})");
  auto missing = parse(p, c.read_text());
  BOOST_CHECK_EQUAL(num(missing, "seq_id"), -1);
  BOOST_CHECK_EQUAL(num(missing, "code"), 1);
  BOOST_CHECK(str(missing, "message").rfind("ValidationError: ", 0) == 0);
  auto expect = [&](const std::string& action, const std::string& data, const std::string& context,
                    const std::string& message) {
    auto r = c.call(action, data, context);
    BOOST_CHECK_EQUAL(r.code, 1);
    BOOST_CHECK_EQUAL(r.message, message);
  };
  expect("box_nope", "{}", "", "ValueError: Action box_nope not found");
  expect("box_exec", R"({"session_id":"s","cmd":"echo x","memory_mb":"512"})", ctx("workspace-a"),
         "BoxValidationError: memory_mb must be an integer");
  expect("box_exec", R"({"session_id":"s","cmd":"echo x","memory_mb":true})", ctx("workspace-a"),
         "BoxValidationError: memory_mb must be an integer");
  expect("box_exec", R"({"cmd":"echo x"})", ctx("workspace-a"), "KeyError: 'session_id'");
  expect("box_exec", R"({"session_id":"s","cmd":"echo x"})", "",
         "PermissionError: Box tenant action requires a trusted Workspace context");
  expect("box_exec", R"({"session_id":"s","cmd":"echo x"})",
         R"({"instance_uuid":"instance-a","workspace_uuid":"w","plan":"pro"})",
         "ValidationError: Extra inputs are not permitted: plan");
  expect("box_exec", R"({"session_id":"s","cmd":"echo x"})",
         R"({"instance_uuid":"instance-b","workspace_uuid":"w"})",
         "PermissionError: Box action context does not match the trusted instance");
  expect("box_exec", R"({"session_id":"s","cmd":"echo x"})", ctx("workspace-a", 0),
         "ValidationError: placement_generation must be greater than or equal to 1");
  // None of it created a session or moved a fence; the server still serves.
  auto st = c.call("box_status", "{}", ctx("workspace-a"));
  BOOST_REQUIRE_EQUAL(st.code, 0);
  BOOST_CHECK_EQUAL(num(parse(p, st.data_json), "active_sessions"), 0);
  BOOST_CHECK_EQUAL(c.call("box_exec", R"({"session_id":"s","cmd":"echo ok"})", ctx("workspace-a")).code, 0);
}

BOOST_AUTO_TEST_CASE(in_flight_cap_answers_the_129th_request_busy) {
  boxd_process boxd{standard_box, token_config};
  auto c = connect(boxd);
  simdjson::dom::parser p;
  // 128 commands on one session: the first blocks, the rest queue behind it.
  for (int i = 1; i <= 129; ++i)
    c.send_text(R"({"seq_id":)" + std::to_string(i)
                + R"(,"action":"box_exec","data":{"session_id":"held","cmd":"gate g"},"context":)"
                + ctx("workspace-a") + "}");
  auto busy = parse(p, c.read_text());
  BOOST_CHECK_EQUAL(num(busy, "seq_id"), 129);
  BOOST_CHECK_EQUAL(num(busy, "code"), 1);
  BOOST_CHECK_EQUAL(str(busy, "message"), "Runtime connection is busy (max 128 concurrent actions)");
  // A second connection deletes the session: every held request is answered.
  auto other = connect(boxd);
  auto del = other.call("box_delete_session", R"({"session_id":"held"})", ctx("workspace-a"));
  BOOST_REQUIRE_EQUAL(del.code, 0);
  int answered = 0;
  for (int i = 0; i < 128; ++i) {
    auto r = parse(p, c.read_text());
    BOOST_CHECK_EQUAL(num(r, "code"), 1);
    BOOST_CHECK_EQUAL(str(r, "message"), "BoxSessionNotFoundError: session held is being deleted");
    ++answered;
  }
  BOOST_CHECK_EQUAL(answered, 128);
  BOOST_CHECK_EQUAL(c.call("__ping", "{}").code, 0);
}

BOOST_AUTO_TEST_CASE(oversize_message_closes_only_that_connection) {
  boxd_process boxd{standard_box, R"(, "max_message_bytes": 65536)" + token_config};
  auto c = connect(boxd);
  c.send_text(R"({"seq_id":1,"action":"__ping","data":{"pad":")" + std::string(70000, 'x') + "\"}}");
  BOOST_CHECK_THROW(c.read_text(), std::exception);
  auto fresh = connect(boxd);
  BOOST_CHECK_EQUAL(fresh.call("__ping", "{}").code, 0);
}

BOOST_AUTO_TEST_CASE(sigterm_fails_in_flight_requests_and_exits_zero) {
  boxd_process boxd{standard_box, token_config};
  auto c = connect(boxd);
  simdjson::dom::parser p;
  c.send_text(R"({"seq_id":1,"action":"box_exec","data":{"session_id":"s","cmd":"gate never"},"context":)"
              + ctx("workspace-a") + "}");
  // A ping answered on the same socket was read after the exec, so the exec is already
  // in the connection actor's mailbox, ahead of the shutdown sent below. Whichever
  // side fails it (the connection or the supervisor), the text is the reference's.
  c.send_text(R"({"seq_id":2,"action":"__ping","data":{}})");
  {
    auto pong = parse(p, c.read_text());
    BOOST_REQUIRE_EQUAL(num(pong, "seq_id"), 2);
  }
  auto stopping = std::thread{[&] { BOOST_CHECK_EQUAL(boxd.stop(), 0); }};
  auto r = parse(p, c.read_text());
  BOOST_CHECK_EQUAL(num(r, "seq_id"), 1);
  BOOST_CHECK_EQUAL(num(r, "code"), 1);
  BOOST_CHECK_EQUAL(str(r, "message"), "BoxRuntimeUnavailableError: Box runtime is shutting down");
  stopping.join();
}

BOOST_AUTO_TEST_SUITE_END()

namespace {


void scenario_ac01_concurrent_first_use_gives_one_global_session(const std::string& box, const std::string& backend) {
  boxd_process boxd{box, server_for(backend)};
  auto host = connect(boxd);
  BOOST_REQUIRE_EQUAL(host.call("box_put_workspace_entitlement", snapshot("workspace-a", 1, true)).code, 0);
  auto a = connect(boxd);
  auto b = connect(boxd);
  a.send_text(R"({"seq_id":1,"action":"box_exec","data":{"session_id":"global","cmd":"echo first"},"context":)"
              + ctx("workspace-a") + "}");
  b.send_text(R"({"seq_id":1,"action":"box_exec","data":{"session_id":"global","cmd":"echo second"},"context":)"
              + ctx("workspace-a") + "}");
  simdjson::dom::parser p;
  auto ra = parse(p, a.read_text());
  BOOST_CHECK_EQUAL(num(ra, "code"), 0);
  BOOST_CHECK_EQUAL(str(ra["data"], "stdout"), "first");
  simdjson::dom::parser q;
  auto rb = parse(q, b.read_text());
  BOOST_CHECK_EQUAL(num(rb, "code"), 0);
  BOOST_CHECK_EQUAL(str(rb["data"], "stdout"), "second");
  auto sessions = host.call("box_get_sessions", "{}", ctx("workspace-a"));
  BOOST_REQUIRE_EQUAL(sessions.code, 0);
  simdjson::dom::parser s;
  simdjson::dom::array list = parse(s, sessions.data_json)["sessions"].get_array().value();
  BOOST_REQUIRE_EQUAL(list.size(), 1u);
  simdjson::dom::element info = list.at(0).value();
  BOOST_CHECK_EQUAL(str(info, "session_id"), "global");
  BOOST_CHECK_EQUAL(str(info, "backend_name"), backend);
  BOOST_CHECK(info["persistent"].get_bool().value());
  BOOST_CHECK_EQUAL(info["cpus"].get_double().value(), 0.5);
  BOOST_CHECK_EQUAL(num(info, "memory_mb"), 256);
  BOOST_CHECK_EQUAL(num(info, "pids_limit"), 64);
  BOOST_CHECK_EQUAL(num(info, "workspace_quota_mb"), 32);
  BOOST_CHECK_EQUAL(str(info, "network"), "off");
}

void scenario_ac02_entitlement_loss_revokes_and_closes(const std::string& box, const std::string& backend) {
  boxd_process boxd{box, server_for(backend)};
  auto c = connect(boxd);
  simdjson::dom::parser p;
  BOOST_REQUIRE_EQUAL(c.call("box_put_workspace_entitlement", snapshot("workspace-a", 1, true)).code, 0);
  BOOST_REQUIRE_EQUAL(c.call("box_exec", R"({"session_id":"global","cmd":"echo x"})", ctx("workspace-a")).code, 0);
  auto put = c.call("box_put_workspace_entitlement", snapshot("workspace-a", 2, false));
  BOOST_REQUIRE_EQUAL(put.code, 0);
  auto receipt = parse(p, put.data_json);
  BOOST_CHECK(receipt["accepted"].get_bool().value());
  BOOST_CHECK_EQUAL(str(receipt, "workspace_uuid"), "workspace-a");
  BOOST_CHECK_EQUAL(num(receipt, "entitlement_revision"), 2);
  BOOST_CHECK_EQUAL(num(receipt, "revoked_sessions"), 1);
  auto r = c.call("box_exec", R"({"session_id":"global","cmd":"echo y"})", ctx("workspace-a"));
  BOOST_CHECK_EQUAL(r.code, 1);
  BOOST_CHECK_EQUAL(r.message, "EntitlementUnavailableError: Workspace entitlement does not grant managed_sandbox");
  auto st = c.call("box_status", "{}", ctx("workspace-a"));
  BOOST_REQUIRE_EQUAL(st.code, 0);
  BOOST_CHECK_EQUAL(num(parse(p, st.data_json), "active_sessions"), 0);
  auto rollback = c.call("box_put_workspace_entitlement", snapshot("workspace-a", 1, true));
  BOOST_CHECK_EQUAL(rollback.message, "EntitlementUnavailableError: Workspace entitlement revision rolled back");
}

void scenario_ac03_two_workspaces_are_isolated(const std::string& box, const std::string& backend) {
  boxd_process boxd{box, server_for(backend)};
  auto c = connect(boxd);
  for (auto ws : {"workspace-a", "workspace-b"}) {
    BOOST_REQUIRE_EQUAL(c.call("box_put_workspace_entitlement", snapshot(ws, 1, true)).code, 0);
    auto r = c.call("box_exec", R"({"session_id":"global","cmd":"echo x"})", ctx(ws));
    BOOST_REQUIRE_EQUAL(r.code, 0);
  }
  simdjson::dom::parser p, q;
  auto a = parse(p, c.call("box_get_session", R"({"session_id":"global"})", ctx("workspace-a")).data_json);
  auto b = parse(q, c.call("box_get_session", R"({"session_id":"global"})", ctx("workspace-b")).data_json);
  BOOST_CHECK_EQUAL(str(a, "session_id"), "global");
  BOOST_CHECK_EQUAL(str(b, "session_id"), "global");
  BOOST_CHECK(str(a, "backend_session_id") != str(b, "backend_session_id"));
  BOOST_CHECK(str(a, "host_path") != str(b, "host_path"));
  BOOST_CHECK(str(a, "host_path").find("/tenants/ws-695136eeae1cb9b6af4a8226") != std::string::npos);
  if (backend == "scripted")
    return;
  // Real sandboxes: what workspace A writes, workspace B cannot see.
  auto write = c.call("box_exec", R"({"session_id":"global","cmd":"echo secret-a > /workspace/mine.txt && cat /workspace/mine.txt"})", ctx("workspace-a"));
  BOOST_CHECK_EQUAL(str(parse(p, write.data_json), "stdout"), "secret-a");
  auto look = c.call("box_exec", R"({"session_id":"global","cmd":"ls -a /workspace; cat /workspace/mine.txt 2>/dev/null"})", ctx("workspace-b"));
  BOOST_REQUIRE_EQUAL(look.code, 0);
  simdjson::dom::parser r;
  auto seen = str(parse(r, look.data_json), "stdout");
  BOOST_CHECK(seen.find("secret-a") == std::string::npos);
  BOOST_CHECK(seen.find("mine.txt") == std::string::npos);
  BOOST_CHECK(seen.find("..") != std::string::npos); // the listing itself ran
  // The command is not uid 0, inside or on the host, and the workspace quota is hard.
  auto who = c.call("box_exec", R"({"session_id":"global","cmd":"id -u; cut -c1-40 /proc/self/uid_map"})", ctx("workspace-a"));
  BOOST_REQUIRE_EQUAL(who.code, 0);
  std::istringstream ids{str(parse(r, who.data_json), "stdout")};
  std::string uid, inside, outside;
  ids >> uid >> inside >> outside;
  BOOST_CHECK(!uid.empty() && uid != "0");
  if (backend == "nsjail") // mapped onto itself (bwrap nests a user namespace: 0 there)
    BOOST_CHECK_EQUAL(outside, uid);
  auto fill = c.call("box_exec", R"({"session_id":"global","cmd":"dd if=/dev/zero of=/workspace/big bs=1M count=64 2>&1; df -k /workspace | tail -1"})", ctx("workspace-a"));
  BOOST_REQUIRE_EQUAL(fill.code, 0);
  auto filled = str(parse(r, fill.data_json), "stdout");
  BOOST_CHECK_MESSAGE(filled.find("No space left on device") != std::string::npos, filled);
}

void scenario_ac05_forged_fields_never_reach_the_runtime(const std::string& box, const std::string& backend) {
  boxd_process boxd{box, server_for(backend)};
  auto c = connect(boxd);
  simdjson::dom::parser p;
  BOOST_REQUIRE_EQUAL(c.call("box_put_workspace_entitlement", snapshot("workspace-a", 1, true)).code, 0);
  auto expect = [&](const std::string& action, const std::string& data, const std::string& message) {
    auto r = c.call(action, data, ctx("workspace-a"));
    BOOST_CHECK_EQUAL(r.code, 1);
    BOOST_CHECK_EQUAL(r.message, message);
  };
  expect("box_exec", R"({"session_id":"global","cmd":"echo x","plan":"pro"})",
         "BoxAdmissionError: Managed sandbox policy fields are host-controlled: plan");
  expect("box_exec", R"({"session_id":"global","cmd":"echo x","network":"on"})",
         "BoxAdmissionError: Managed sandbox network access is disabled");
  expect("box_exec", R"({"session_id":"attacker","cmd":"echo x"})",
         "BoxAdmissionError: Managed sandbox session_id is runtime-owned");
  expect("box_start_managed_process",
         R"({"session_id":"global","spec":{"command":"sleep","args":["60"]}})",
         "BoxAdmissionError: Managed processes are disabled for Cloud sandboxes");
  auto st = c.call("box_status", "{}", ctx("workspace-a"));
  BOOST_REQUIRE_EQUAL(st.code, 0);
  BOOST_CHECK_EQUAL(num(parse(p, st.data_json), "active_sessions"), 0);
}

/// A tenant's read-only mount never reaches another tenant's tree, the tenants folder,
/// boxd's state or the transfer folder, whether the path exists or not; the tenant's own
/// published revision still mounts. Before, workspace A printed B's secret.txt.
void scenario_ac06_no_workspace_mounts_anothers_tree(const std::string& box, const std::string& backend) {
  namespace fs = std::filesystem;
  boxd_process boxd{box, server_for(backend)};
  auto c = connect(boxd);
  for (auto ws : {"workspace-a", "workspace-b"})
    BOOST_REQUIRE_EQUAL(c.call("box_put_workspace_entitlement", snapshot(ws, 1, true)).code, 0);
  BOOST_REQUIRE_EQUAL(c.call("box_exec", R"({"session_id":"global","cmd":"echo b-secret > /workspace/secret.txt"})",
                             ctx("workspace-b")).code, 0);
  const auto dir = fs::canonical(boxd.dir()).string();
  const auto root = dir + "/box", tenants = root + "/default/tenants";
  const auto tree_b = tenants + "/ws-3d33e390c753bc9a7d42416b";
  const std::string hex(64, 'a');
  auto exec = [&](const std::string& source, const std::string& manifest) {
    return c.call("box_exec",
                  R"({"session_id":"global","cmd":"cat /opt/langbot-artifacts/)" + hex + R"(/secret.txt",)"
                    R"("extra_mounts":[{"host_path":")" + source + R"(","mount_path":"/opt/langbot-artifacts/)" + hex
                    + R"(","mode":"ro","content_digest":"sha256:)" + hex + R"(","manifest_path":")" + manifest
                    + R"("}]})",
                  ctx("workspace-a"));
  };
  const std::string refused = "BoxAdmissionError: Managed sandbox read-only mount is unavailable to this Workspace";
  const std::pair<std::string, std::string> attempts[] = {
    {tree_b, tree_b + "/secret.txt"},          // the reported attack
    {tree_b, tree_b + "/missing.txt"},         // the same reply for a file that is not there
    {tree_b + "/nope", tree_b + "/nope.json"}, // and for a folder that is not there
    {tenants, tree_b + "/secret.txt"},         // every tenant at once
    {root + "/state", root + "/state/admission.sqlite"},
    {dir + "/data/temp/lbp", dir + "/data/temp/lbp/x"},
  };
  for (const auto& [source, manifest] : attempts) {
    auto r = exec(source, manifest);
    BOOST_CHECK_EQUAL(r.code, 1);
    BOOST_CHECK_MESSAGE(r.message == refused, source << ": " << r.message);
    BOOST_CHECK(r.data_json.find("b-secret") == std::string::npos);
  }
  // A's own published revision (LangBot 4.11's layout) mounts, read-only.
  const auto rev = root + "/skills/tenants/ws-695136eeae1cb9b6af4a8226/.langbot-skill-store/revisions/" + hex;
  fs::create_directories(rev + "/package");
  std::ofstream{rev + "/package/secret.txt"} << "a-artifact\n";
  std::ofstream{rev + "/manifest.json"} << "{}";
  auto ok = exec(rev + "/package", rev + "/manifest.json");
  BOOST_REQUIRE_MESSAGE(ok.code == 0, ok.message);
  if (backend != "scripted") {
    simdjson::dom::parser p;
    BOOST_CHECK_EQUAL(str(parse(p, ok.data_json), "stdout"), "a-artifact");
  }
}

/// AC-04: Cloud skills, on real sandboxes.
void scenario_ac04_cloud_skills(const std::string& box) {
  boxd_process boxd{box, token_config};
  auto c = connect(boxd);
  simdjson::dom::parser p;
  for (auto ws : {"workspace-a", "workspace-b"})
    BOOST_REQUIRE_EQUAL(c.call("box_put_workspace_entitlement", snapshot(ws, 1, true)).code, 0);
  BOOST_REQUIRE_EQUAL(c.call("box_create_skill", R"({"skill":{"name":"private","instructions":"b only"}})",
                             ctx("workspace-b")).code, 0);
  auto created = c.call("box_create_skill", R"({"skill":{"name":"runner","description":"runs"}})", ctx("workspace-a"));
  BOOST_REQUIRE_EQUAL(created.code, 0);
  for (auto file : {R"J({"name":"runner","path":"scripts/main.py","content":"print('hi from runner')"})J",
                    R"({"name":"runner","path":"requirements.txt","content":"requests\n"})"})
    BOOST_REQUIRE_EQUAL(c.call("box_write_skill_file", file, ctx("workspace-a")).code, 0);
  auto got = c.call("box_get_skill", R"({"name":"runner"})", ctx("workspace-a"));
  BOOST_REQUIRE_EQUAL(got.code, 0);
  auto skill = parse(p, got.data_json)["skill"];
  BOOST_CHECK(skill["python_project"].get_bool().value());
  auto read = c.call("box_read_skill_file", R"({"name":"runner","path":"scripts/main.py"})", ctx("workspace-a"));
  BOOST_CHECK(read.data_json.find("print('hi from runner')") != std::string::npos);
  // The exec mounts exactly that skill, read-only.
  auto run = c.call("box_exec",
                    R"({"session_id":"global","skill_name":"runner","workdir":"/workspace/.skills/runner",)"
                    R"("cmd":"ls /workspace/.skills; python3 scripts/main.py; touch x 2>&1 || true"})",
                    ctx("workspace-a"));
  BOOST_REQUIRE_MESSAGE(run.code == 0, run.message);
  simdjson::dom::parser q;
  auto out = str(parse(q, run.data_json), "stdout");
  BOOST_CHECK_EQUAL(out.substr(0, out.find('\n')), "runner");
  BOOST_CHECK(out.find("hi from runner") != std::string::npos);
  BOOST_CHECK(out.find("Read-only file system") != std::string::npos);
  // Another workspace's skill does not exist here, neither listed nor mountable.
  auto other = c.call("box_get_skill", R"({"name":"private"})", ctx("workspace-a"));
  BOOST_CHECK_EQUAL(other.data_json, R"({"skill":null})");
  auto steal = c.call("box_exec", R"({"session_id":"global","skill_name":"private","cmd":"true"})", ctx("workspace-a"));
  BOOST_CHECK_EQUAL(steal.message, "BoxAdmissionError: Managed sandbox skill is unavailable in this Workspace");
  // Cloud rules.
  auto rooted = c.call("box_create_skill", R"({"skill":{"name":"x","package_root":"/etc"}})", ctx("workspace-a"));
  BOOST_CHECK_EQUAL(rooted.message, "BoxAdmissionError: Cloud skill package_root is runtime-owned");
  auto scan = c.call("box_scan_skill_directory", R"({"path":"/"})", ctx("workspace-a"));
  BOOST_CHECK_EQUAL(scan.message, "BoxAdmissionError: Scanning arbitrary host skill directories is disabled in Cloud");
  // Entitlement: an ineligible workspace cannot use skills at all.
  BOOST_REQUIRE_EQUAL(c.call("box_put_workspace_entitlement", snapshot("workspace-c", 1, false)).code, 0);
  auto denied = c.call("box_list_skills", "{}", ctx("workspace-c"));
  BOOST_CHECK_EQUAL(denied.message, "EntitlementUnavailableError: Workspace entitlement does not grant managed_sandbox");
}

} // namespace

BOOST_AUTO_TEST_SUITE(wire_logs)

BOOST_AUTO_TEST_CASE(network_policies_are_refused_in_admission_mode) {
  // Admission mode refuses network "on" (the contract): a policy would apply to nothing,
  // and is refused rather than kept (docs/network.md).
  boxd_process boxd{admission_box, server_for("scripted")};
  auto c = connect(boxd);
  auto r = c.call("box_set_network_policy",
                  R"({"instance_uuid":"instance-a","workspace_uuid":"workspace-a","policy":{"allow_domains":["a.test"]}})");
  BOOST_TEST(r.code == 1);
  BOOST_TEST(r.message == "BoxValidationError: network policies apply in standard mode only (admission mode refuses network \"on\")");
  auto got = c.call("box_get_network_policy", R"({"instance_uuid":"instance-a","workspace_uuid":"workspace-a"})");
  BOOST_TEST(got.data_json.find(R"("source":"none")") != std::string::npos, got.data_json);
  // Neither policy nor profile, or both: refused before anything is asked.
  auto neither = c.call("box_set_network_policy", R"({"workspace_uuid":"workspace-a"})");
  BOOST_TEST(neither.message.find("takes either policy") != std::string::npos, neither.message);
}

BOOST_AUTO_TEST_CASE(json_logs_carry_admission_decisions_and_session_lifetimes) {
  // server.log_format "json": every line is one JSON object; an admission decision and
  // a session's start and stop are events with the workspace namespace, the session,
  // the backend and a duration.
  boxd_process boxd{admission_box, server_for("scripted") + R"(, "log_format": "json")"};
  auto c = connect(boxd);
  auto refused = c.call("box_exec", R"({"session_id":"global","cmd":"echo x"})", ctx("workspace-a"));
  BOOST_REQUIRE_EQUAL(refused.code, 1);
  BOOST_REQUIRE_EQUAL(c.call("box_put_workspace_entitlement", snapshot("workspace-a", 1, true)).code, 0);
  BOOST_REQUIRE_EQUAL(c.call("box_exec", R"({"session_id":"global","cmd":"echo x"})", ctx("workspace-a")).code, 0);
  // Entitlement loss stops the session before the reply: its stop is logged by then.
  BOOST_REQUIRE_EQUAL(c.call("box_put_workspace_entitlement", snapshot("workspace-a", 2, false)).code, 0);
  std::ifstream in{boxd.dir() / "boxd.log"};
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line))
    lines.push_back(line);
  simdjson::dom::parser p;
  std::vector<std::string> seen;
  std::string admit_ws, refuse_reason, start_session, stop_session;
  for (auto& l : lines) {
    simdjson::dom::element e;
    BOOST_REQUIRE_MESSAGE(p.parse(l).get(e) == simdjson::SUCCESS, "not JSON: " << l);
    BOOST_CHECK(!std::string_view{e["time"].get_string().value()}.empty());
    BOOST_CHECK(!std::string_view{e["level"].get_string().value()}.empty());
    std::string_view event;
    if (e["event"].get_string().get(event) != simdjson::SUCCESS) {
      BOOST_CHECK(e["msg"].is_string());
      continue;
    }
    seen.emplace_back(event);
    if (event == "admission" && str(e, "decision") == "admit")
      admit_ws = str(e, "ws");
    if (event == "admission" && str(e, "decision") == "refuse")
      refuse_reason = str(e, "reason");
    if (event == "session_start") {
      start_session = str(e, "session");
      BOOST_CHECK_EQUAL(str(e, "backend"), "scripted");
      BOOST_CHECK(num(e, "duration_ms") >= 0);
    }
    if (event == "session_stop") {
      stop_session = str(e, "session");
      BOOST_CHECK(num(e, "lifetime_ms") >= 0);
      BOOST_CHECK(!str(e, "reason").empty());
    }
  }
  BOOST_CHECK_EQUAL(refuse_reason, refused.message);
  BOOST_CHECK(admit_ws.starts_with("ws-"));
  BOOST_CHECK(start_session.starts_with(admit_ws));
  BOOST_CHECK_EQUAL(stop_session, start_session);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(wire_admission)

BOOST_AUTO_TEST_CASE(ac01_concurrent_first_use_gives_one_global_session) { scenario_ac01_concurrent_first_use_gives_one_global_session(admission_box, "scripted"); }
BOOST_AUTO_TEST_CASE(ac02_entitlement_loss_revokes_and_closes) { scenario_ac02_entitlement_loss_revokes_and_closes(admission_box, "scripted"); }
BOOST_AUTO_TEST_CASE(ac03_two_workspaces_are_isolated) { scenario_ac03_two_workspaces_are_isolated(admission_box, "scripted"); }
BOOST_AUTO_TEST_CASE(ac05_forged_fields_never_reach_the_runtime) { scenario_ac05_forged_fields_never_reach_the_runtime(admission_box, "scripted"); }
BOOST_AUTO_TEST_CASE(ac06_no_workspace_mounts_anothers_tree) { scenario_ac06_no_workspace_mounts_anothers_tree(admission_box, "scripted"); }

BOOST_AUTO_TEST_SUITE_END()

// The same scenarios with real sandboxes: readiness must really hold, the commands
// really run, the workspaces are really apart.
namespace {

/// Mount points of this process's namespace (the host's, where boxd runs in these tests)
/// at or below `dir`.
size_t mounts_below(const std::filesystem::path& dir) {
  std::ifstream in{"/proc/self/mountinfo"};
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    std::istringstream fields{line};
    std::string id, parent, devno, root, point;
    fields >> id >> parent >> devno >> root >> point;
    n += point == dir.string() || point.starts_with(dir.string() + "/");
  }
  return n;
}

/// Loop devices whose backing file lies below `dir`.
size_t loops_below(const std::filesystem::path& dir) {
  size_t n = 0;
  std::error_code err;
  for (auto& e : std::filesystem::directory_iterator{"/sys/block", err}) {
    std::ifstream in{e.path() / "loop" / "backing_file"};
    std::string file;
    if (std::getline(in, file) && file.starts_with(dir.string() + "/"))
      ++n;
  }
  return n;
}

/// Opens `n` Cloud workspaces on `c`, each writing a file to its quota image.
void open_workspaces(net::rpc_client& c, int n) {
  for (int i = 0; i < n; ++i) {
    auto ws = "ws-stop-" + std::to_string(i);
    BOOST_REQUIRE_EQUAL(c.call("box_put_workspace_entitlement", snapshot(ws, 1, true)).code, 0);
    BOOST_REQUIRE_EQUAL(c.call("box_exec", R"({"session_id":"global","cmd":"echo kept > /workspace/f"})", ctx(ws)).code, 0);
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(wire_admission_bwrap, *boost::unit_test::precondition(sandbox_precondition))

BOOST_AUTO_TEST_CASE(ac01_concurrent_first_use_gives_one_global_session) { scenario_ac01_concurrent_first_use_gives_one_global_session(admission_bwrap_box, "bwrap"); }
BOOST_AUTO_TEST_CASE(ac02_entitlement_loss_revokes_and_closes) { scenario_ac02_entitlement_loss_revokes_and_closes(admission_bwrap_box, "bwrap"); }
BOOST_AUTO_TEST_CASE(ac03_two_workspaces_are_isolated) { scenario_ac03_two_workspaces_are_isolated(admission_bwrap_box, "bwrap"); }
BOOST_AUTO_TEST_CASE(ac05_forged_fields_never_reach_the_runtime) { scenario_ac05_forged_fields_never_reach_the_runtime(admission_bwrap_box, "bwrap"); }
BOOST_AUTO_TEST_CASE(ac06_no_workspace_mounts_anothers_tree) { scenario_ac06_no_workspace_mounts_anothers_tree(admission_bwrap_box, "bwrap"); }
BOOST_AUTO_TEST_CASE(ac04_cloud_skills) { scenario_ac04_cloud_skills(admission_bwrap_box); }

// Stopping with live sandboxes leaves nothing behind: a second SIGTERM while boxd stops
// changes nothing (it keeps stopping, and takes every quota image and loop device along);
// a kill -9 leaves the quota images mounted in the host's namespace, and the next start
// on the same state folder removes them, with the workspaces' files intact. The
// sandboxes' own mounts are never in the host's namespace at all.
BOOST_AUTO_TEST_CASE(a_second_sigterm_or_a_kill_9_leaves_nothing_a_start_does_not_clean) {
  const auto dir = boxd_process::fresh_dir();
  {
    boxd_process boxd{admission_bwrap_box, server_for("bwrap"), {}, dir};
    auto c = connect(boxd);
    open_workspaces(c, 4);
    BOOST_REQUIRE_EQUAL(mounts_below(dir), 4); // the quota images, where LangBot sees them
    ::kill(boxd.pid(), SIGTERM);
    BOOST_CHECK_EQUAL(boxd.stop(), 0); // a second SIGTERM, then the wait
    BOOST_CHECK_EQUAL(mounts_below(dir), 0);
    BOOST_CHECK_EQUAL(loops_below(dir), 0);
  }
  {
    boxd_process boxd{admission_bwrap_box, server_for("bwrap"), {}, dir};
    auto c = connect(boxd);
    open_workspaces(c, 4);
    ::kill(boxd.pid(), SIGKILL);
    BOOST_CHECK_EQUAL(boxd.wait_killed(), SIGKILL);
    BOOST_CHECK_EQUAL(mounts_below(dir), 4);
  }
  {
    boxd_process boxd{admission_bwrap_box, server_for("bwrap"), {}, dir};
    auto c = connect(boxd);
    BOOST_CHECK(eventually([&] { return mounts_below(dir) == 0 && loops_below(dir) == 0; }));
    BOOST_REQUIRE_EQUAL(c.call("box_put_workspace_entitlement", snapshot("ws-stop-0", 1, true)).code, 0);
    auto r = c.call("box_exec", R"({"session_id":"global","cmd":"cat /workspace/f"})", ctx("ws-stop-0"));
    BOOST_REQUIRE_EQUAL(r.code, 0);
    simdjson::dom::parser p;
    BOOST_CHECK_EQUAL(str(parse(p, r.data_json), "stdout"), "kept");
    BOOST_CHECK_EQUAL(boxd.stop(), 0);
  }
  BOOST_CHECK_EQUAL(mounts_below(dir), 0);
  std::error_code err;
  std::filesystem::remove_all(dir, err);
}

BOOST_AUTO_TEST_SUITE_END()

// And on nsjail, the backend LangBot's Cloud mode insists on: admission-ready on this
// machine kind with the same walls.
BOOST_AUTO_TEST_SUITE(wire_admission_nsjail, *boost::unit_test::precondition(sandbox_precondition))

BOOST_AUTO_TEST_CASE(ac01_concurrent_first_use_gives_one_global_session) { scenario_ac01_concurrent_first_use_gives_one_global_session(admission_nsjail_box, "nsjail"); }
BOOST_AUTO_TEST_CASE(ac02_entitlement_loss_revokes_and_closes) { scenario_ac02_entitlement_loss_revokes_and_closes(admission_nsjail_box, "nsjail"); }
BOOST_AUTO_TEST_CASE(ac03_two_workspaces_are_isolated) { scenario_ac03_two_workspaces_are_isolated(admission_nsjail_box, "nsjail"); }
BOOST_AUTO_TEST_CASE(ac05_forged_fields_never_reach_the_runtime) { scenario_ac05_forged_fields_never_reach_the_runtime(admission_nsjail_box, "nsjail"); }
BOOST_AUTO_TEST_CASE(ac06_no_workspace_mounts_anothers_tree) { scenario_ac06_no_workspace_mounts_anothers_tree(admission_nsjail_box, "nsjail"); }
BOOST_AUTO_TEST_CASE(ac04_cloud_skills) { scenario_ac04_cloud_skills(admission_nsjail_box); }

BOOST_AUTO_TEST_SUITE_END()

// box_init names a backend (protocol.md §4.10.1): it is selected again while no session
// exists, and the readiness after the reply is the new backend's.
BOOST_AUTO_TEST_SUITE(wire_backend_selection)

namespace {

std::string backend_info(net::rpc_client& c) {
  auto r = c.call("box_get_backend_info", "{}");
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.message);
  return r.data_json;
}

} // namespace

BOOST_AUTO_TEST_CASE(box_init_selects_the_named_backend_while_no_session_exists) {
  boxd_process boxd{standard_box, token_config};
  auto c = connect(boxd);
  BOOST_CHECK_EQUAL(backend_info(c), R"({"name":"scripted","available":true,"capabilities":["exec_stream"]})");
  auto r = c.call("box_init", R"({"backend":"process","local":{"host_root":"box"}})");
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.message);
  // At once, not after the next background probe.
  BOOST_CHECK_EQUAL(backend_info(c), R"({"name":"process","available":true,"capabilities":["exec_stream","files"]})");
  auto e = c.call("box_exec", R"({"session_id":"s1","cmd":"echo hi"})", ctx("workspace-a"));
  BOOST_REQUIRE_MESSAGE(e.code == 0, e.message);
  simdjson::dom::parser p;
  BOOST_CHECK_EQUAL(str(parse(p, e.data_json), "backend_name"), "process");
  // A session exists now: the backend it runs on stays, whatever box_init names.
  r = c.call("box_init", R"({"backend":"scripted","local":{"host_root":"box"}})");
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.message);
  BOOST_CHECK_EQUAL(backend_info(c), R"({"name":"process","available":true,"capabilities":["exec_stream","files"]})");
  e = c.call("box_exec", R"({"session_id":"s1","cmd":"echo again"})", ctx("workspace-a"));
  BOOST_REQUIRE_MESSAGE(e.code == 0, e.message);
  BOOST_CHECK_EQUAL(str(parse(p, e.data_json), "backend_name"), "process");
}

BOOST_AUTO_TEST_CASE(a_box_init_with_a_refused_policy_is_initialized_and_names_the_value) {
  boxd_process boxd{standard_box, token_config};
  auto c = connect(boxd);
  // As the reference: initialized, then fail closed; the log and the readiness error
  // name the key and the validator's text, and each ignored key.
  auto r = c.call("box_init", R"({"backend":"scripted","bakend":"nsjail","local":{"host_root":"box"},
    "admission":{"required":true,"memory_mb":8}})");
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.message);
  BOOST_CHECK_EQUAL(r.data_json, R"({"initialized":true})");
  auto e = c.call("box_exec", R"({"session_id":"global","cmd":"true"})", ctx("workspace-a"));
  BOOST_CHECK_EQUAL(e.message, "BoxReadinessError: Managed sandbox isolation is not ready (failed checks: "
                               "configuration; box.admission: memory_mb must be at least 32)");
  std::ifstream in{boxd.dir() / "boxd.log"};
  std::string log{std::istreambuf_iterator<char>{in}, {}};
  BOOST_CHECK_MESSAGE(log.find("box_init: box.admission: memory_mb must be at least 32") != std::string::npos, log);
  BOOST_CHECK_MESSAGE(log.find("box_init: box.bakend is not a key boxd uses; ignored") != std::string::npos, log);
}

BOOST_AUTO_TEST_CASE(the_admission_readiness_after_box_init_is_the_named_backends) {
  boxd_process boxd{standard_box, token_config};
  auto c = connect(boxd);
  // LangBot's connector sends its whole box config; required_backend nsjail against the
  // scripted backend fails the required_backend check at once, not seconds later.
  auto r = c.call("box_init", R"({"backend":"scripted","local":{"host_root":"box"},
    "admission":{"required":true,"required_backend":"nsjail","max_sessions":1,
    "max_managed_processes":0,"readiness_cache_sec":0}})");
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.message);
  auto health = c.call("box_health", "{}");
  BOOST_CHECK_EQUAL(health.code, 1);
  BOOST_CHECK_MESSAGE(health.message.find("managed sandbox isolation is not ready") != std::string::npos,
                      health.message);
}

BOOST_AUTO_TEST_CASE(naming_the_running_bwrap_keeps_it_usable,
                     *boost::unit_test::precondition(sandbox_precondition)) {
  // "" selected bwrap at start; "bwrap" and "local" select it again, and a second bwrap
  // on the same state folder could not take the folder's lock: the running one stays.
  boxd_process boxd{R"({"local": {"host_root": "box"}})", token_config};
  auto c = connect(boxd);
  for (const char* name : {"bwrap", "local", ""}) {
    auto r = c.call("box_init", std::string{R"({"backend":")"} + name + R"(","local":{"host_root":"box"}})");
    BOOST_REQUIRE_MESSAGE(r.code == 0, r.message);
    BOOST_CHECK_EQUAL(backend_info(c), R"({"name":"bwrap","available":true,"capabilities":["exec_stream","files"]})");
  }
  auto e = c.call("box_exec", R"({"session_id":"s1","cmd":"echo hi"})", ctx("workspace-a"));
  BOOST_REQUIRE_MESSAGE(e.code == 0, e.message);
}

BOOST_AUTO_TEST_CASE(box_init_finds_the_real_nsjail_beside_boxd,
                     *boost::unit_test::precondition(sandbox_precondition)) {
  boxd_process boxd{R"({"local": {"host_root": "box"}})", token_config};
  auto c = connect(boxd);
  BOOST_CHECK_EQUAL(backend_info(c), R"({"name":"bwrap","available":true,"capabilities":["exec_stream","files"]})");
  auto r = c.call("box_init", R"({"backend":"nsjail","local":{"host_root":"box"}})");
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.message);
  BOOST_CHECK_EQUAL(backend_info(c), R"({"name":"nsjail","available":true,"capabilities":["exec_stream","files"]})");
  auto e = c.call("box_exec", R"({"session_id":"s1","cmd":"echo hi"})", ctx("workspace-a"));
  BOOST_REQUIRE_MESSAGE(e.code == 0, e.message);
  simdjson::dom::parser p;
  auto d = parse(p, e.data_json);
  BOOST_CHECK_EQUAL(str(d, "backend_name"), "nsjail");
  BOOST_CHECK_EQUAL(str(d, "stdout"), "hi");
}

BOOST_AUTO_TEST_CASE(box_init_moves_between_the_drivers_on_one_state_folder,
                     *boost::unit_test::precondition(sandbox_precondition)) {
  // bwrap at start, nsjail, then bwrap again: each a real backend of its own driver on
  // the same state folder, never the other one under the requested name.
  boxd_process boxd{R"({"local": {"host_root": "box"}})", token_config};
  auto c = connect(boxd);
  for (const char* name : {"nsjail", "bwrap", "nsjail", ""}) {
    auto r = c.call("box_init", std::string{R"({"backend":")"} + name + R"(","local":{"host_root":"box"}})");
    BOOST_REQUIRE_MESSAGE(r.code == 0, r.message);
    auto expected = std::string{*name ? name : "bwrap"};
    BOOST_CHECK_EQUAL(backend_info(c), R"({"name":")" + expected + R"(","available":true,"capabilities":["exec_stream","files"]})");
  }
  auto e = c.call("box_exec", R"({"session_id":"s1","cmd":"echo hi"})", ctx("workspace-a"));
  BOOST_REQUIRE_MESSAGE(e.code == 0, e.message);
  simdjson::dom::parser p;
  BOOST_CHECK_EQUAL(str(parse(p, e.data_json), "backend_name"), "bwrap");
}

BOOST_AUTO_TEST_CASE(langbots_cloud_box_init_makes_nsjail_admission_ready,
                     *boost::unit_test::precondition(sandbox_precondition)) {
  // What LangBot's connector sends in Cloud mode right after __ping, to a boxd that
  // started on bwrap: the reply comes once nsjail is selected and its readiness known.
  boxd_process boxd{R"({"local": {"host_root": "box"}})", token_config};
  auto c = connect(boxd);
  auto r = c.call("box_init", R"({"backend":"nsjail","local":{"host_root":"box"},
    "admission":{"required":true,"required_backend":"nsjail","max_sessions":1,
    "max_managed_processes":0,"workspace_quota_mb":32,"readiness_cache_sec":0}})");
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.message);
  auto info = backend_info(c);
  BOOST_CHECK_MESSAGE(info.starts_with(R"({"name":"nsjail","available":true,"readiness":{"ready":true,)"), info);
  auto health = c.call("box_health", "{}");
  BOOST_CHECK_MESSAGE(health.code == 0, health.message);
  BOOST_REQUIRE_EQUAL(c.call("box_put_workspace_entitlement", snapshot("workspace-a", 1, true)).code, 0);
  auto e = c.call("box_exec", R"({"session_id":"global","cmd":"id -u"})", ctx("workspace-a"));
  BOOST_REQUIRE_MESSAGE(e.code == 0, e.message);
  simdjson::dom::parser p;
  auto d = parse(p, e.data_json);
  BOOST_CHECK_EQUAL(str(d, "backend_name"), "nsjail");
  BOOST_CHECK(str(d, "stdout") != "0");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(wire_boxctl)

namespace {

/// Runs `line` with /bin/sh; returns {exit code, stdout + stderr}.
std::pair<int, std::string> shell(const std::string& line) {
  std::string out;
  FILE* p = ::popen((line + " 2>&1").c_str(), "r");
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0)
    out.append(buf, n);
  int st = ::pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

/// Runs build/boxctl with `args`.
std::pair<int, std::string> boxctl(const std::string& args) {
  return shell((std::filesystem::path{boxd_path()}.parent_path() / "boxctl").string() + " " + args);
}

} // namespace

BOOST_AUTO_TEST_CASE(boxctl_prints_results_and_exits_with_the_command_code) {
  boxd_process boxd{standard_box, token_config};
  auto base = "--url " + boxd.url() + " --token " + token + " --instance instance-a --workspace w ";
  auto [rc, out] = boxctl(base + "exec --session s -- echo hi");
  BOOST_CHECK_EQUAL(rc, 0);
  BOOST_CHECK_EQUAL(out, "hi\n");
  auto [rc2, out2] = boxctl(base + "exec --session s -- fail 3");
  BOOST_CHECK_EQUAL(rc2, 3);
  auto [rc3, out3] = boxctl(base + "sessions --json");
  BOOST_CHECK_EQUAL(rc3, 0);
  BOOST_CHECK(out3.find("\"session_id\":\"s\"") != std::string::npos);
  auto [rc4, out4] = boxctl(base + "delete nope");
  BOOST_CHECK_EQUAL(rc4, 1);
  BOOST_CHECK_EQUAL(out4, "BoxSessionNotFoundError: session nope not found\n");
  auto [rc5, out5] = boxctl("--url " + boxd.url() + " --token wrong-token --instance instance-a health");
  BOOST_CHECK_EQUAL(rc5, 1);
  BOOST_CHECK(out5.find("401") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(boxctl_parses_options_anywhere_before_the_double_dash) {
  // Through /bin/sh (popen), as an operator types them; the process backend runs them.
  boxd_process boxd{R"({"backend": "process", "local": {"host_root": "box"}})", token_config};
  auto bin = (std::filesystem::path{boxd_path()}.parent_path() / "boxctl").string();
  auto sh = [&](const std::string& line) {
    return shell("BOXCTL_URL=" + boxd.url() + " LANGBOT_BOX_CONTROL_TOKEN=" + token
                 + " BOXCTL_INSTANCE=instance-a BOXCTL=" + bin + " sh -c '" + line + "'");
  };
  // Options before the command, after it, and --name=value, all the same.
  auto [rc, out] = sh("$BOXCTL exec --timeout 5 --no-stream -- echo one");
  BOOST_CHECK_EQUAL(rc, 0);
  BOOST_CHECK_EQUAL(out, "one\n");
  auto [rc1, out1] = sh("$BOXCTL --timeout=1 --no-stream exec -- sleep 5");
  BOOST_CHECK_EQUAL(rc1, 124);
  auto [rc2, out2] = sh("$BOXCTL --workspace w2 exec --session other --no-stream -- pwd");
  BOOST_CHECK_EQUAL(rc2, 0);
  // The command after -- is the command, whatever it looks like.
  auto [rc3, out3] = sh("$BOXCTL exec --no-stream -- sh -c \"echo --timeout\"");
  BOOST_CHECK_EQUAL(out3, "--timeout\n");
  // An option that is not exec's, before --, is an error that says where it belongs.
  auto [rc4, out4] = sh("$BOXCTL exec -l -- ls");
  BOOST_CHECK_EQUAL(rc4, 2);
  BOOST_CHECK_EQUAL(out4, "boxctl: unknown option -l for exec (the command's own options go after --)\n");
  auto [rc5, out5] = sh("$BOXCTL exec --timeout soon -- true");
  BOOST_CHECK_EQUAL(rc5, 2);
  BOOST_CHECK_EQUAL(out5, "boxctl: --timeout takes a number of seconds, not soon\n");
  // Standard input with -i: text, then 3 MiB of random bytes (several file calls).
  auto [rc6, out6] = sh("printf \"a\\nb\\n\" | $BOXCTL exec -i --no-stream -- wc -l");
  BOOST_CHECK_EQUAL(rc6, 0);
  BOOST_CHECK_EQUAL(out6, "2\n");
  auto here = std::filesystem::temp_directory_path() / ("boxctl-stdin-" + std::to_string(::getpid()));
  auto [rc7, out7] = sh("head -c 3145728 /dev/urandom > " + here.string() + "; $BOXCTL exec -i --no-stream -- sha256sum < "
                        + here.string() + " | cut -c1-64; sha256sum " + here.string() + " | cut -c1-64");
  BOOST_CHECK_EQUAL(rc7, 0);
  BOOST_REQUIRE_EQUAL(out7.size(), 130u);
  BOOST_CHECK_EQUAL(out7.substr(0, 65), out7.substr(65));
  std::filesystem::remove(here);
  // Nothing of stdin is left in the workspace.
  auto [rc8, out8] = sh("$BOXCTL ls -l .");
  BOOST_CHECK_EQUAL(rc8, 0);
  BOOST_CHECK_MESSAGE(out8.find(".boxctl-stdin") == std::string::npos, out8);
  // --json everywhere; help per command; versions.
  auto [rc9, out9] = sh("$BOXCTL --json exec --no-stream -- echo j");
  BOOST_CHECK_EQUAL(rc9, 0);
  BOOST_CHECK_MESSAGE(out9.find("\"stdout\":\"j\"") != std::string::npos, out9);
  auto [rc10, out10] = sh("$BOXCTL help exec");
  BOOST_CHECK_EQUAL(rc10, 0);
  BOOST_CHECK(out10.rfind("usage: boxctl exec ", 0) == 0);
  BOOST_CHECK_EQUAL(sh("$BOXCTL exec --help").second, out10);
  BOOST_CHECK_EQUAL(sh("$BOXCTL help nosuch").first, 2);
  auto [rc11, out11] = sh("$BOXCTL --version");
  BOOST_CHECK_EQUAL(rc11, 0);
  BOOST_CHECK(out11.rfind("boxctl boxrt ", 0) == 0);
  auto [rc12, out12] = sh("$BOXCTL version");
  BOOST_CHECK_MESSAGE(out12.find("boxd   boxrt ") != std::string::npos, out12);
  // A 401 is explained by the client.
  auto [rc13, out13] = sh("$BOXCTL --instance someone-else health");
  BOOST_CHECK_EQUAL(rc13, 1);
  BOOST_CHECK_MESSAGE(out13.find("is not the one boxd trusts: boxd pins the first instance id") != std::string::npos,
                      out13);
}

BOOST_AUTO_TEST_CASE(boxctl_ps_lists_sessions_across_workspaces) {
  boxd_process boxd{R"({"backend": "process", "local": {"host_root": "box"}})", token_config};
  auto base = "--url " + boxd.url() + " --token " + token + " --instance instance-a ";
  for (auto [ws, session] : {std::pair{"w1", "s1"}, std::pair{"w2", "s2"}, std::pair{"w2", "s3"}})
    BOOST_REQUIRE_EQUAL(boxctl(base + "--workspace " + ws + " exec --no-stream --session " + session + " -- true").first, 0);
  auto [rc, out] = boxctl(base + "ps");
  BOOST_CHECK_EQUAL(rc, 0);
  BOOST_CHECK_MESSAGE(out.rfind("INSTANCE    WORKSPACE  SESSION  BACKEND  CPU", 0) == 0, out);
  BOOST_CHECK_EQUAL(std::count(out.begin(), out.end(), '\n'), 4);
  auto [rcj, js] = boxctl(base + "--json ps --limit 2");
  BOOST_CHECK_EQUAL(rcj, 0);
  simdjson::dom::parser p;
  auto d = parse(p, js);
  simdjson::dom::array xs;
  BOOST_REQUIRE(d["sessions"].get_array().get(xs) == simdjson::SUCCESS);
  BOOST_CHECK_EQUAL(xs.size(), 2u);
  bool truncated = false;
  BOOST_CHECK(d["truncated"].get_bool().get(truncated) == simdjson::SUCCESS && truncated);
  auto first = xs.at(0).value();
  BOOST_CHECK_EQUAL(str(first, "workspace_uuid"), "w1");
  BOOST_CHECK_EQUAL(str(first, "session_id"), "s1");
  BOOST_CHECK_EQUAL(str(first, "backend"), "process");
  // A tenant's context is not needed (a host-control action); a bad limit is refused.
  auto c = connect(boxd);
  BOOST_CHECK_EQUAL(c.call("box_list_all_sessions", R"({"limit": 0})").message,
                    "BoxValidationError: limit must be an integer between 1 and 10000");
}

BOOST_AUTO_TEST_CASE(boxctl_hints_at_the_global_session_in_admission_mode) {
  boxd_process boxd{admission_box, server_for("scripted")};
  auto [rc, out] = boxctl("--url " + boxd.url() + " --token " + token
                          + " --instance instance-a --workspace w exec --no-stream -- true");
  BOOST_CHECK_EQUAL(rc, 1);
  BOOST_CHECK_MESSAGE(out.find("use --session global") != std::string::npos, out);
}

BOOST_AUTO_TEST_CASE(boxctl_copies_lists_prints_and_removes_workspace_files) {
  // The file actions (docs/files.md) through boxctl, both ways, a 3 MiB file taking
  // several ranged calls; the process backend (a real host folder, quick).
  boxd_process boxd{R"({"backend": "process", "local": {"host_root": "box"}})", token_config};
  auto base = "--url " + boxd.url() + " --token " + token + " --instance instance-a --workspace w ";
  auto here = std::filesystem::temp_directory_path() / ("boxctl-files-" + std::to_string(::getpid()));
  std::filesystem::remove_all(here);
  std::filesystem::create_directories(here / "up" / "sub");
  std::string big(3 * 1048576 + 17, '\0');
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<char>((i * 2654435761u) >> 13);
  std::ofstream{here / "up" / "big.bin", std::ios::binary} << big;
  std::ofstream{here / "up" / "sub" / "small.txt"} << "small\n";
  BOOST_REQUIRE_EQUAL(boxctl(base + "exec --no-stream -- true").first, 0); // the session "boxctl"
  auto [rc, out] = boxctl(base + "cp " + (here / "up" / "big.bin").string() + " :/workspace/in/big.bin");
  BOOST_CHECK_MESSAGE(rc == 0, out);
  auto [rc_r, out_r] = boxctl(base + "cp -r " + (here / "up").string() + " :tree");
  BOOST_CHECK_MESSAGE(rc_r == 0, out_r);
  auto [rc_ls, ls] = boxctl(base + "ls -R tree");
  BOOST_CHECK_EQUAL(rc_ls, 0);
  BOOST_CHECK_EQUAL(ls, "big.bin\nsub\nsub/small.txt\n"); // relative to the folder listed
  auto [rc_cat, cat] = boxctl(base + "cat :tree/sub/small.txt");
  BOOST_CHECK_EQUAL(rc_cat, 0);
  BOOST_CHECK_EQUAL(cat, "small\n");
  auto [rc_down, down] = boxctl(base + "cp -r :tree " + (here / "down").string());
  BOOST_CHECK_MESSAGE(rc_down == 0, down);
  std::ifstream in{here / "down" / "big.bin", std::ios::binary};
  BOOST_CHECK(std::string(std::istreambuf_iterator<char>{in}, {}) == big);
  auto [rc_one, one] = boxctl(base + "cp :in/big.bin " + (here / "one.bin").string());
  BOOST_CHECK_MESSAGE(rc_one == 0, one);
  BOOST_CHECK_EQUAL(std::filesystem::file_size(here / "one.bin"), big.size());
  // No part files left behind, on either side.
  auto [rc_ls2, ls2] = boxctl(base + "ls in");
  BOOST_CHECK_EQUAL(ls2, "big.bin\n");
  BOOST_CHECK(!std::filesystem::exists(here / "one.bin.boxctl-part"));
  auto [rc_rm, rm] = boxctl(base + "rm tree");
  BOOST_CHECK_EQUAL(rc_rm, 1);
  BOOST_CHECK_EQUAL(rm, "BoxError: [Errno 39] Directory not empty: '/workspace/tree'\n");
  BOOST_CHECK_EQUAL(boxctl(base + "rm -r tree").first, 0);
  auto [rc_gone, gone] = boxctl(base + "cat tree/sub/small.txt");
  BOOST_CHECK_EQUAL(rc_gone, 1);
  BOOST_CHECK_EQUAL(gone, "BoxError: [Errno 2] No such file or directory: '/workspace/tree/sub/small.txt'\n");
  auto [rc_out, outside] = boxctl(base + "cat /etc/passwd");
  BOOST_CHECK_EQUAL(rc_out, 1);
  BOOST_CHECK_EQUAL(outside, "BoxValidationError: path /etc/passwd is outside the workspace /workspace\n");
  std::filesystem::remove_all(here);
}

BOOST_AUTO_TEST_CASE(file_action_limits_are_the_servers) {
  boxd_process boxd{R"({"backend": "process", "local": {"host_root": "box"}})",
                    token_config + R"(, "max_file_call_bytes": 1024, "max_list_entries": 2)"};
  auto c = connect(boxd);
  auto cx = ctx("workspace-a");
  BOOST_REQUIRE(c.call("box_create_session", R"({"session_id":"f"})", cx).code == 0);
  auto big = c.call("box_write_file", R"({"session_id":"f","path":"x","content":")" + std::string(2000, 'a') + "\"}", cx);
  BOOST_CHECK_EQUAL(big.message, "BoxValidationError: content of 2000 bytes is more than one call may write (1024 bytes, "
                                 "server.max_file_call_bytes)");
  for (auto name : {"a", "b", "c"})
    BOOST_REQUIRE(c.call("box_write_file", R"({"session_id":"f","path":")" + std::string{name} + R"(","content":"x"})", cx).code == 0);
  auto ls = c.call("box_list_files", R"({"session_id":"f","path":"."})", cx);
  BOOST_REQUIRE_MESSAGE(ls.code == 0, ls.message);
  BOOST_CHECK_NE(ls.data_json.find(R"("truncated":true)"), std::string::npos);
  auto read = c.call("box_read_file", R"({"session_id":"f","path":"a","length":1025})", cx);
  BOOST_CHECK_EQUAL(read.message, "BoxValidationError: length 1025 is more than one call may read (1024 bytes, "
                                  "server.max_file_call_bytes)");
  // Bad values are typed refusals that change nothing.
  auto bad = c.call("box_write_file", R"({"session_id":"f","path":"a","content":"y","offset":"1"})", cx);
  BOOST_CHECK_EQUAL(bad.message, "BoxValidationError: offset must be an integer");
  auto nob64 = c.call("box_write_file", R"({"session_id":"f","path":"a","content":"@@","encoding":"base64"})", cx);
  BOOST_CHECK_EQUAL(nob64.message, "BoxValidationError: content is not valid base64: Only base64 data is allowed");
  auto same = c.call("box_read_file", R"({"session_id":"f","path":"a"})", cx);
  BOOST_CHECK_NE(same.data_json.find(R"("content":"x")"), std::string::npos);
}

BOOST_AUTO_TEST_CASE(boxctl_exec_keeps_each_argument_whole) {
  // Several arguments after `--` are one command and its arguments, quoted for sh; one
  // argument is a shell command line. A real shell runs them (the process backend).
  // Small messages: a streamed command's output takes many frames (acknowledged).
  boxd_process boxd{R"({"backend": "process", "local": {"host_root": "box"}})",
                    token_config + R"(, "max_message_bytes": 1024)"};
  // The instance comes from BOXCTL_INSTANCE when --instance is not given.
  auto base = "BOXCTL_INSTANCE=instance-a " + std::filesystem::path{boxd_path()}.parent_path().string()
              + "/boxctl --url " + boxd.url() + " --token " + token + " --workspace w ";
  auto run = [&](const std::string& args) { return shell(base + args); };
  auto [rc, out] = run(R"(exec -- python3 -c 'print(1)')");
  BOOST_CHECK_EQUAL(rc, 0);
  BOOST_CHECK_EQUAL(out, "1\n");
  auto [rc2, out2] = run(R"(exec -- printf '%s|' "a b" "it's" '$HOME' '')");
  BOOST_CHECK_EQUAL(rc2, 0);
  BOOST_CHECK_EQUAL(out2, "a b|it's|$HOME||\n");
  auto [rc3, out3] = run(R"(exec -- 'echo x | tr x y')");
  BOOST_CHECK_EQUAL(rc3, 0);
  BOOST_CHECK_EQUAL(out3, "y\n");
  // --stream (box_exec_stream): the same output and exit code, and more of it than a
  // window of frames; output is printed as the command wrote it.
  auto [rc4, out4] = run(R"(exec --stream -- 'printf "a\nb"; echo c >&2; exit 3')");
  BOOST_CHECK_EQUAL(rc4, 3);
  // (The process backend is not live: it frames box_exec's text, trailing newlines cut.)
  BOOST_CHECK_MESSAGE(out4 == "a\nbc" || out4 == "ca\nb", out4);
  auto [rc5, out5] = run(R"(exec --stream -- 'seq 1 3000')");
  BOOST_CHECK_EQUAL(rc5, 0);
  std::string expected;
  for (int i = 1; i <= 3000; ++i)
    expected += std::to_string(i) + "\n";
  expected.pop_back();
  BOOST_CHECK(out5 == expected);
}

BOOST_AUTO_TEST_SUITE_END()
