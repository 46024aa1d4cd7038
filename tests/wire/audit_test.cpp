// The audit trail (server.audit_log; docs/operations.md "Audit trail") of a real boxd:
// a known workload in admission mode leaves exactly its lines, each written before its
// reply; the command text only with audit_commands; rotation by size.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <simdjson.h>

#include "net/ws/client.hpp"
#include "tests/wire/boxd_process.hpp"
#include "tests/wire/wire_common.hpp"

namespace boxrt::test {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> lines_of(const fs::path& file) {
  std::ifstream in{file};
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    out.push_back(line);
  return out;
}

struct audit_line {
  std::string action, decision, error_class, session, ns, command;
  int64_t exit_code = -1;
  bool has_command = false;
};

audit_line parse_line(const std::string& text) {
  simdjson::dom::parser p;
  simdjson::dom::element d;
  BOOST_REQUIRE_MESSAGE(p.parse(text).get(d) == simdjson::SUCCESS, "not JSON: " + text);
  audit_line a;
  auto str = [&](const char* key, std::string& out) {
    std::string_view v;
    if (d[key].get_string().get(v) == simdjson::SUCCESS)
      out = std::string{v};
  };
  str("action", a.action);
  str("decision", a.decision);
  str("error_class", a.error_class);
  str("session", a.session);
  str("namespace", a.ns);
  a.has_command = d["command"].error() == simdjson::SUCCESS;
  str("command", a.command);
  if (d["exit_code"].get_int64().get(a.exit_code) != simdjson::SUCCESS)
    a.exit_code = -1;
  // Every line carries the schema's keys.
  for (auto key : {"time", "action", "instance", "workspace", "namespace", "session", "decision", "error_class",
                   "exit_code", "duration_ms", "peer"})
    BOOST_CHECK_MESSAGE(d[key].error() == simdjson::SUCCESS, std::string{"no "} + key + " in " + text);
  return a;
}

} // namespace

BOOST_AUTO_TEST_SUITE(audit_trail)

BOOST_AUTO_TEST_CASE(a_known_workload_leaves_exactly_its_lines) {
  boxd_process boxd{wire::admission_box, R"(, "control_token": ")" + wire::token
                                           + R"(", "testing": true, "audit_log": "audit.log", "audit_commands": true)"};
  const auto file = boxd.dir() / "audit.log";
  auto c = wire::connect(boxd);
  BOOST_REQUIRE_EQUAL(c.call("box_put_workspace_entitlement", wire::snapshot("ws-a", 1, true)).code, 0);
  // N = 3 admitted execs; each reply comes after its line.
  for (int i = 0; i < 3; ++i) {
    auto r = c.call("box_exec", R"({"session_id":"global","cmd":"echo )" + std::to_string(i) + R"("})",
                    wire::ctx("ws-a"));
    BOOST_REQUIRE_MESSAGE(r.code == 0, r.message);
    BOOST_CHECK_EQUAL(lines_of(file).size(), static_cast<size_t>(2 + i));
  }
  // M = 3 refusals: a workspace without an entitlement, a forged host-controlled field,
  // and (below) an exec after the revocation.
  BOOST_CHECK_NE(c.call("box_exec", R"({"session_id":"global","cmd":"true"})", wire::ctx("ws-none")).code, 0);
  BOOST_CHECK_NE(c.call("box_exec", R"({"session_id":"global","cmd":"true","host_path":"/srv"})", wire::ctx("ws-a")).code,
                 0);
  auto revoked = c.call("box_revoke_sandbox_admission_grant",
                        R"({"instance_uuid":"instance-a","workspace_uuid":"ws-a","entitlement_revision":1})");
  BOOST_REQUIRE_MESSAGE(revoked.code == 0, revoked.message);
  BOOST_CHECK_NE(c.call("box_exec", R"({"session_id":"global","cmd":"true"})", wire::ctx("ws-a")).code, 0);
  // Heartbeats are never audited.
  BOOST_CHECK_EQUAL(c.call("__ping", "{}").code, 0);

  auto lines = lines_of(file);
  BOOST_REQUIRE_EQUAL(lines.size(), 8u);
  std::vector<audit_line> got;
  for (const auto& l : lines)
    got.push_back(parse_line(l));
  BOOST_CHECK_EQUAL(got[0].action, "box_put_workspace_entitlement");
  BOOST_CHECK_EQUAL(got[0].decision, "allowed");
  for (int i = 1; i <= 3; ++i) {
    BOOST_CHECK_EQUAL(got[i].action, "box_exec");
    BOOST_CHECK_EQUAL(got[i].decision, "allowed");
    BOOST_CHECK_EQUAL(got[i].exit_code, 0);
    BOOST_CHECK_EQUAL(got[i].session, "global");
    BOOST_CHECK_EQUAL(got[i].command, "echo " + std::to_string(i - 1));
    BOOST_CHECK(got[i].ns.rfind("ws-", 0) == 0);
  }
  BOOST_CHECK_EQUAL(got[4].decision, "refused");
  BOOST_CHECK_EQUAL(got[5].decision, "refused");
  BOOST_CHECK_EQUAL(got[5].error_class, "BoxAdmissionError");
  BOOST_CHECK_EQUAL(got[6].action, "box_revoke_sandbox_admission_grant");
  BOOST_CHECK_EQUAL(got[6].decision, "allowed");
  BOOST_CHECK_EQUAL(got[7].decision, "refused");
  BOOST_CHECK_EQUAL(got[7].error_class, "BoxAdmissionError");
  size_t allowed_execs = 0, refusals = 0, revocations = 0;
  for (const auto& a : got) {
    allowed_execs += a.action == "box_exec" && a.decision == "allowed";
    refusals += a.decision == "refused";
    revocations += a.action == "box_revoke_sandbox_admission_grant";
  }
  BOOST_CHECK_EQUAL(allowed_execs, 3u);
  BOOST_CHECK_EQUAL(refusals, 3u);
  BOOST_CHECK_EQUAL(revocations, 1u);
}

BOOST_AUTO_TEST_CASE(hostile_envelopes_are_logged_as_the_decoders_read_them) {
  boxd_process boxd{wire::standard_box, R"(, "control_token": ")" + wire::token
                                          + R"(", "audit_log": "audit.log", "audit_commands": true)"};
  const auto file = boxd.dir() / "audit.log";
  auto c = wire::connect(boxd);
  // A known action with a context that is not an object: refused, boxd unharmed.
  c.send_text(R"({"seq_id":1,"action":"box_exec","data":{"session_id":"s","cmd":"true"},"context":"x"})");
  auto refused = c.read_text();
  BOOST_CHECK_MESSAGE(refused.find(R"("code":0)") == std::string::npos, refused);
  // A command sent twice runs as its last copy, and is logged so.
  c.send_text(R"({"seq_id":2,"action":"box_exec","data":{"session_id":"s","cmd":"echo first","cmd":"echo last"},)"
              R"("context":{"instance_uuid":"instance-a","workspace_uuid":"ws-d","placement_generation":1}})");
  auto ran = c.read_text();
  BOOST_CHECK_MESSAGE(ran.find(R"("stdout":"last")") != std::string::npos, ran);
  BOOST_REQUIRE_EQUAL(c.call("box_health", "{}").code, 0);
  auto lines = lines_of(file);
  BOOST_REQUIRE_EQUAL(lines.size(), 3u);
  auto first = parse_line(lines[0]);
  BOOST_CHECK_EQUAL(first.action, "box_exec");
  BOOST_CHECK_EQUAL(first.decision, "refused");
  auto second = parse_line(lines[1]);
  BOOST_CHECK_EQUAL(second.command, "echo last");
  BOOST_CHECK_EQUAL(second.decision, "allowed");
}

BOOST_AUTO_TEST_CASE(commands_are_left_out_unless_asked_and_files_rotate_by_size) {
  boxd_process boxd{wire::standard_box, R"(, "control_token": ")" + wire::token
                                          + R"(", "audit_log": "audit.log", "audit_max_bytes": 4096, "audit_files": 3)"};
  const auto dir = boxd.dir();
  auto c = wire::connect(boxd);
  auto r = c.call("box_exec", R"({"session_id":"s","cmd":"echo secret"})", wire::ctx("ws-b"));
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.message);
  auto first = parse_line(lines_of(dir / "audit.log").front());
  BOOST_CHECK_EQUAL(first.action, "box_exec");
  BOOST_CHECK(!first.has_command);
  for (int i = 0; i < 200; ++i)
    BOOST_REQUIRE_EQUAL(c.call("box_health", "{}").code, 0);
  // 201 lines of about 250 bytes: the current file and two rotated ones, each within
  // the bound; the oldest lines are gone.
  size_t total = 0;
  for (auto name : {"audit.log", "audit.log.1", "audit.log.2"}) {
    BOOST_REQUIRE_MESSAGE(fs::exists(dir / name), name);
    BOOST_CHECK_LE(fs::file_size(dir / name), 4096u);
    total += lines_of(dir / name).size();
  }
  BOOST_CHECK(!fs::exists(dir / "audit.log.3"));
  BOOST_CHECK_LT(total, 201u);
  BOOST_CHECK_EQUAL(parse_line(lines_of(dir / "audit.log").back()).action, "box_health");
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace boxrt::test
