// Durable admission state (contract §4.11) against real boxd processes on one data
// folder: what was acknowledged survives a restart and a kill -9; a corrupt,
// unreadable or missing database is never silently replaced in admission mode.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

#include <signal.h>

#include "net/ws/client.hpp"
#include "tests/wire/boxd_process.hpp"
#include "tests/wire/process_probe.hpp"
#include "tests/wire/wire_common.hpp"

namespace boxrt::test {
namespace {

namespace fs = std::filesystem;

const std::string server = R"(, "control_token": ")" + wire::token + R"(", "testing": true)";

const std::string& admission = wire::admission_box;

const std::string& standard = wire::standard_box;




fs::path database(const fs::path& dir) {
  return dir / "box" / "state" / "admission.sqlite";
}

/// A fresh data folder, removed at scope end.
struct data_dir {
  fs::path path = boxd_process::fresh_dir();
  ~data_dir() {
    std::error_code err;
    fs::remove_all(path, err);
  }
};

bool log_has(const fs::path& dir, const std::string& needle) {
  std::ifstream in{dir / "boxd.log"};
  std::string text{std::istreambuf_iterator<char>{in}, {}};
  return text.find(needle) != std::string::npos;
}

const std::string rolled_back =
  "EntitlementUnavailableError: Workspace entitlement revision rolled back";

} // namespace

BOOST_AUTO_TEST_SUITE(state_suite)

// Before, snapshots, revisions and fences lived in memory only: after a restart an
// older active snapshot re-admitted a revoked workspace.
BOOST_AUTO_TEST_CASE(revocations_and_fences_survive_a_restart) {
  data_dir dir;
  {
    boxd_process boxd{admission, server, {}, dir.path};
    auto c = wire::connect(boxd);
    BOOST_REQUIRE_EQUAL(c.call("box_put_workspace_entitlement", wire::snapshot("ws-r", 1, true)).code, 0);
    BOOST_REQUIRE_EQUAL(c.call("box_exec", R"({"session_id":"global","cmd":"echo x"})",
                               wire::ctx("ws-r", 3)).code, 0);
    BOOST_REQUIRE_EQUAL(c.call("box_put_workspace_entitlement", wire::snapshot("ws-r", 2, false)).code, 0);
  }
  boxd_process boxd{admission, server, {}, dir.path};
  auto c = wire::connect(boxd);
  // The replayed older snapshot is refused, and the workspace stays revoked.
  BOOST_CHECK_EQUAL(c.call("box_put_workspace_entitlement", wire::snapshot("ws-r", 1, true)).message,
                    rolled_back);
  auto r = c.call("box_exec", R"({"session_id":"global","cmd":"echo y"})", wire::ctx("ws-r", 3));
  BOOST_CHECK_EQUAL(r.message,
                    "EntitlementUnavailableError: Workspace entitlement does not grant "
                    "managed_sandbox");
  // The fence kept generation 3.
  auto stale = c.call("box_status", "{}", wire::ctx("ws-r", 2));
  BOOST_CHECK_EQUAL(stale.message, "PermissionError: Stale Box placement generation");
}

// A revocation at the snapshot's own revision holds against the grant boxd derives from
// that snapshot, across a restart and a replay of the same snapshot; before, the next
// exec was admitted again ("decision=admit reason=grant").
BOOST_AUTO_TEST_CASE(a_revocation_holds_against_the_stored_snapshot_across_a_restart) {
  data_dir dir;
  const std::string exec = R"({"session_id":"global","cmd":"echo x"})";
  const std::string revoked =
    "BoxAdmissionError: Sandbox admission grant revision was revoked";
  const std::string revoke =
    R"({"instance_uuid":"instance-a","workspace_uuid":"ws-t","entitlement_revision":1})";
  {
    boxd_process boxd{admission, server, {}, dir.path};
    auto c = wire::connect(boxd);
    BOOST_REQUIRE_EQUAL(c.call("box_put_workspace_entitlement", wire::snapshot("ws-t", 1, true)).code, 0);
    BOOST_REQUIRE_EQUAL(c.call("box_exec", exec, wire::ctx("ws-t", 1)).code, 0);
    auto r = c.call("box_revoke_sandbox_admission_grant", revoke);
    BOOST_REQUIRE_EQUAL(r.code, 0);
    BOOST_CHECK_EQUAL(c.call("box_exec", exec, wire::ctx("ws-t", 1)).message, revoked);
  }
  boxd_process boxd{admission, server, {}, dir.path};
  auto c = wire::connect(boxd);
  BOOST_CHECK_EQUAL(c.call("box_exec", exec, wire::ctx("ws-t", 1)).message, revoked);
  // The stored revision with the same contents is accepted, and admits nothing.
  BOOST_CHECK_EQUAL(c.call("box_put_workspace_entitlement", wire::snapshot("ws-t", 1, true)).code, 0);
  BOOST_CHECK_EQUAL(c.call("box_exec", exec, wire::ctx("ws-t", 1)).message, revoked);
  // Only a newer revision admits again.
  BOOST_CHECK_EQUAL(c.call("box_put_workspace_entitlement", wire::snapshot("ws-t", 2, true)).code, 0);
  BOOST_CHECK_EQUAL(c.call("box_exec", exec, wire::ctx("ws-t", 1)).code, 0);
}

// The first generation a workspace sees sets its fence, in standard mode too.
BOOST_AUTO_TEST_CASE(a_first_fence_survives_a_restart_in_standard_mode) {
  data_dir dir;
  {
    boxd_process boxd{standard, server, {}, dir.path};
    auto c = wire::connect(boxd);
    BOOST_REQUIRE_EQUAL(c.call("box_exec", R"({"session_id":"s","cmd":"echo x"})",
                               wire::ctx("ws-g", 7)).code, 0);
  }
  boxd_process boxd{standard, server, {}, dir.path};
  auto c = wire::connect(boxd);
  BOOST_CHECK_EQUAL(c.call("box_exec", R"({"session_id":"s","cmd":"echo y"})", wire::ctx("ws-g", 5))
                      .message,
                    "PermissionError: Stale Box placement generation");
  BOOST_CHECK_EQUAL(c.call("box_exec", R"({"session_id":"s","cmd":"echo z"})", wire::ctx("ws-g", 7))
                      .code,
                    0);
}

// boxd kills itself right after its 6th commit, before the reply: revisions 1-5 were
// acknowledged, 6 was committed. After the restart none of them can be undercut.
BOOST_AUTO_TEST_CASE(an_acknowledged_revision_survives_kill_9) {
  data_dir dir;
  int acked = 0;
  {
    boxd_process boxd{admission, server, {}, dir.path, {}, {"BOXD_TEST_CRASH_AFTER_COMMITS=6"}};
    auto c = wire::connect(boxd);
    try {
      for (int rev = 1; rev <= 10; ++rev) {
        auto r = c.call("box_put_workspace_entitlement", wire::snapshot("ws-k", rev, true));
        if (r.code != 0)
          break;
        acked = rev;
      }
    } catch (const std::exception&) {
      // the connection went down with boxd
    }
    BOOST_CHECK_EQUAL(boxd.wait_killed(), SIGKILL);
  }
  BOOST_REQUIRE_EQUAL(acked, 5);
  boxd_process boxd{admission, server, {}, dir.path};
  auto c = wire::connect(boxd);
  for (int rev = 1; rev <= acked; ++rev)
    BOOST_CHECK_EQUAL(c.call("box_put_workspace_entitlement", wire::snapshot("ws-k", rev, true)).message,
                      rolled_back);
  BOOST_CHECK_EQUAL(c.call("box_put_workspace_entitlement", wire::snapshot("ws-k", 6, true)).code, 0);
}

BOOST_AUTO_TEST_CASE(a_corrupt_or_unreadable_database_stops_admission_mode) {
  data_dir dir;
  fs::create_directories(database(dir.path).parent_path());
  std::ofstream{database(dir.path)} << "this is not a database, not even close to one";
  auto [status, log] = boxd_process::run_refused(dir.path, admission, server);
  BOOST_CHECK_EQUAL(status, 2);
  BOOST_CHECK_MESSAGE(log.find("refusing to start in admission mode") != std::string::npos, log);
  BOOST_CHECK_MESSAGE(log.find(database(dir.path).string()) != std::string::npos, log);
  // Unreadable: not a file at all.
  fs::remove(database(dir.path));
  fs::create_directories(database(dir.path));
  std::tie(status, log) = boxd_process::run_refused(dir.path, admission, server);
  BOOST_CHECK_EQUAL(status, 2);
  BOOST_CHECK_MESSAGE(log.find("refusing to start in admission mode") != std::string::npos, log);
}

// Standard mode: the state guards nothing a restart cannot rebuild, so a corrupt file is
// kept aside and a new one created.
BOOST_AUTO_TEST_CASE(a_corrupt_database_is_recreated_in_standard_mode) {
  data_dir dir;
  fs::create_directories(database(dir.path).parent_path());
  std::ofstream{database(dir.path)} << "garbage garbage garbage garbage garbage garbage";
  boxd_process boxd{standard, server, {}, dir.path};
  BOOST_CHECK(log_has(dir.path, "moved aside to"));
  auto c = wire::connect(boxd);
  BOOST_CHECK_EQUAL(c.call("box_exec", R"({"session_id":"s","cmd":"echo ok"})", wire::ctx("ws-s")).code, 0);
}

// A deleted database must not reopen the replay hole: where tenant state exists boxd
// starts only with --init-state, and says so.
BOOST_AUTO_TEST_CASE(a_missing_database_beside_tenant_state_needs_init_state) {
  data_dir dir;
  {
    boxd_process boxd{admission, server, {}, dir.path};
  }
  fs::create_directories(dir.path / "box" / "default" / "tenants" / "ws-0123456789abcdef01234567");
  for (const char* suffix : {"", "-wal", "-shm"})
    fs::remove(database(dir.path).string() + suffix);
  auto [status, log] = boxd_process::run_refused(dir.path, admission, server);
  BOOST_CHECK_EQUAL(status, 2);
  BOOST_CHECK_MESSAGE(log.find("is missing but the data directory holds tenant state")
                        != std::string::npos,
                      log);
  boxd_process boxd{admission, server, {}, dir.path, {"--init-state"}};
  BOOST_CHECK(log_has(dir.path, "created empty (--init-state)"));
  BOOST_CHECK(fs::exists(database(dir.path)));
}

BOOST_AUTO_TEST_SUITE_END()

// -- admission.entitlements_file (contract §3) -------------------------------------------

namespace {

/// Admission mode reading its snapshots from `file`.
std::string admission_with_file(const fs::path& file) {
  auto box = admission;
  auto at = box.rfind('}', box.rfind('}') - 1);
  return box.substr(0, at) + R"(, "entitlements_file": ")" + file.string() + "\"" + box.substr(at);
}

size_t count_in_log(const fs::path& dir, const std::string& needle) {
  std::ifstream in{dir / "boxd.log"};
  std::string text{std::istreambuf_iterator<char>{in}, {}};
  size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++n;
  return n;
}

/// Sends SIGHUP and waits until boxd has logged the reload's outcome.
void reload(const boxd_process& boxd, const std::string& outcome) {
  const auto before = count_in_log(boxd.dir(), outcome);
  ::kill(boxd.pid(), SIGHUP);
  BOOST_REQUIRE_MESSAGE(eventually([&] { return count_in_log(boxd.dir(), outcome) > before; }),
                        "no reload logged");
}

void write_file(const fs::path& file, const std::string& text) {
  std::ofstream{file} << text;
}

const std::string exec_global = R"({"session_id":"global","cmd":"echo x"})";
const std::string not_granted =
  "EntitlementUnavailableError: Workspace entitlement does not grant managed_sandbox";

} // namespace

BOOST_AUTO_TEST_SUITE(entitlements_file_suite)

// The key was decoded and nothing read it; SIGHUP ended boxd at once.
BOOST_AUTO_TEST_CASE(the_file_is_loaded_at_start_and_a_reload_revokes) {
  data_dir dir;
  fs::create_directories(dir.path);
  auto file = dir.path / "entitlements.json";
  write_file(file, "[" + wire::snapshot("ws-f", 1, true) + "]");
  boxd_process boxd{admission_with_file(file), server, {}, dir.path};
  auto c = wire::connect(boxd);
  // Admitted from the file alone.
  BOOST_REQUIRE_EQUAL(c.call("box_exec", exec_global, wire::ctx("ws-f")).code, 0);
  // A workspace pushed over the wire and missing from the file is left alone.
  BOOST_REQUIRE_EQUAL(c.call("box_put_workspace_entitlement", wire::snapshot("ws-p", 1, true)).code, 0);
  BOOST_REQUIRE_EQUAL(c.call("box_exec", exec_global, wire::ctx("ws-p")).code, 0);
  // A higher revision that no longer grants revokes before the reload completes.
  write_file(file, "[" + wire::snapshot("ws-f", 2, false) + "]");
  reload(boxd, "1 snapshot(s) accepted, 0 refused, 1 session(s) revoked");
  BOOST_CHECK_EQUAL(c.call("box_exec", exec_global, wire::ctx("ws-f")).message, not_granted);
  BOOST_CHECK_EQUAL(c.call("box_exec", exec_global, wire::ctx("ws-p")).code, 0);
  // An older revision in the file is refused and logged; nothing changes.
  write_file(file, "[" + wire::snapshot("ws-f", 1, true) + "]");
  reload(boxd, "0 snapshot(s) accepted, 1 refused");
  BOOST_CHECK(count_in_log(dir.path, "revision rolled back") >= 1);
  BOOST_CHECK_EQUAL(c.call("box_exec", exec_global, wire::ctx("ws-f")).message, not_granted);
  // boxd is still there after three SIGHUPs... and stops cleanly on SIGTERM.
  BOOST_CHECK_EQUAL(c.call("box_health", "{}").code, 0);
  BOOST_CHECK_EQUAL(boxd.stop(), 0);
}

BOOST_AUTO_TEST_CASE(a_bad_file_changes_nothing_and_says_why) {
  data_dir dir;
  fs::create_directories(dir.path);
  auto file = dir.path / "entitlements.json";
  write_file(file, "[" + wire::snapshot("ws-b", 1, true) + "]");
  boxd_process boxd{admission_with_file(file), server, {}, dir.path};
  auto c = wire::connect(boxd);
  BOOST_REQUIRE_EQUAL(c.call("box_exec", exec_global, wire::ctx("ws-b")).code, 0);
  // A revoking snapshot beside a malformed one: neither is applied.
  write_file(file, "[" + wire::snapshot("ws-b", 2, false) + R"(, {"instance_uuid": 5}])");
  reload(boxd, "nothing was changed");
  BOOST_CHECK(count_in_log(dir.path, "snapshot 1: ") >= 1);
  BOOST_CHECK_EQUAL(c.call("box_exec", exec_global, wire::ctx("ws-b")).code, 0);
  for (const std::string& bad : {std::string{"not json"}, std::string{R"({"a": 1})"}}) {
    write_file(file, bad);
    reload(boxd, "nothing was changed");
    BOOST_CHECK_EQUAL(c.call("box_exec", exec_global, wire::ctx("ws-b")).code, 0);
  }
  fs::remove(file);
  reload(boxd, "nothing was changed");
  BOOST_CHECK_EQUAL(c.call("box_exec", exec_global, wire::ctx("ws-b")).code, 0);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace boxrt::test
