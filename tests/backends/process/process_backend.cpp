// The process backend with real host processes: session directories, workdir mapping,
// the exact environment, exit codes, timeouts, the sticky interrupt, the §10 denylist,
// output caps, readiness and orphan cleanup.
#include "backends/process/process_backend.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <boost/test/unit_test.hpp>

#include "temp_dir.hpp"

using namespace boxrt;
namespace fs = std::filesystem;

namespace {

struct process_fixture {
  testing::temp_dir tmp;
  process_backend backend{tmp.str("base"), "inst1"};

  box_spec spec(std::string cmd, std::string host_path = {}) {
    box_spec s;
    s.session_id = "sess-1";
    s.cmd = std::move(cmd);
    s.host_path = std::move(host_path);
    s.timeout_sec = 30;
    return s;
  }

  std::shared_ptr<backend_session> start(const box_spec& s) {
    auto started = backend.start_session(s);
    BOOST_REQUIRE_MESSAGE(started.ok(), (started.ok() ? std::string{} : started.error().message));
    return *started;
  }

  exec_result run(backend_session& session, const box_spec& s, exec_limits limits = {}) {
    auto out = backend.exec(session, s, limits);
    BOOST_REQUIRE_MESSAGE(out.ok(), (out.ok() ? std::string{} : out.error().message));
    return *out;
  }
};

std::string slurp(const std::string& path) {
  std::ifstream in{path};
  return {std::istreambuf_iterator<char>{in}, {}};
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(process_backend_suite, process_fixture)

BOOST_AUTO_TEST_CASE(names_itself_process_and_never_claims_isolation) {
  BOOST_TEST(backend.name() == "process");
  BOOST_TEST(!backend.isolating());
  auto report = backend.probe_readiness("", true);
  BOOST_TEST(report.backend_name == "process");
  BOOST_TEST(report.available);
  BOOST_TEST(!report.isolating);
  BOOST_TEST(report.details.size() == 9u);
  for (const auto& [key, ready] : report.details)
    BOOST_TEST(!ready, key);
  BOOST_TEST(report.details.contains("namespace_isolation"));
}

BOOST_AUTO_TEST_CASE(unusable_base_directory_makes_it_unavailable) {
  std::ofstream{tmp.str("file")} << "x";
  process_backend blocked{tmp.str("file") + "/base"};
  auto report = blocked.probe_readiness("", false);
  BOOST_TEST(!report.available);
  BOOST_TEST(report.error.starts_with("cannot create " + tmp.str("file") + "/base"));
}

BOOST_AUTO_TEST_CASE(start_creates_a_session_directory_that_stop_removes) {
  auto session = start(spec("true"));
  auto dir = session->id();
  BOOST_TEST(dir.starts_with(tmp.str("base") + "/inst1_sess-1_"));
  BOOST_TEST(dir.size() == (tmp.str("base") + "/inst1_sess-1_").size() + 8);
  BOOST_TEST(fs::is_directory(dir + "/workspace"));
  BOOST_TEST(fs::is_directory(dir + "/home"));
  BOOST_TEST(session->alive());
  backend.stop_session(*session);
  BOOST_TEST(!fs::exists(dir));
  BOOST_TEST(!session->alive());
  backend.stop_session(*session); // already gone: tolerated
}

BOOST_AUTO_TEST_CASE(a_session_whose_directory_vanished_is_not_alive) {
  auto session = start(spec("true"));
  fs::remove_all(session->id());
  BOOST_TEST(!session->alive());
}

BOOST_AUTO_TEST_CASE(without_host_path_the_workdir_is_the_session_workspace) {
  auto s = spec("pwd");
  auto session = start(s);
  auto out = run(*session, s);
  BOOST_TEST(out.backend_name == "process");
  BOOST_TEST(out.session_id == "sess-1");
  BOOST_TEST((out.status == exec_status::completed));
  BOOST_TEST(out.exit_code == 0);
  BOOST_TEST(out.stdout_text == session->id() + "/workspace");
}

BOOST_AUTO_TEST_CASE(the_workdir_maps_onto_host_path_and_is_created) {
  auto host = tmp.str("project");
  auto s = spec("pwd; echo data > file.txt", host);
  s.workdir = "/workspace/src/deep";
  auto session = start(s);
  BOOST_TEST(fs::is_directory(host)); // a missing rw host_path is created at start
  auto out = run(*session, s);
  BOOST_TEST(out.exit_code == 0);
  BOOST_TEST(out.stdout_text == host + "/src/deep");
  BOOST_TEST(slurp(host + "/src/deep/file.txt") == "data\n");
}

BOOST_AUTO_TEST_CASE(the_environment_is_path_home_and_the_spec_env_only) {
  BOOST_REQUIRE(std::getenv("PATH") != nullptr);
  ::setenv("BOXRT_TEST_LEAK", "leaked", 1);
  auto s = spec("echo \"$FOO|$HOME|${BOXRT_TEST_LEAK:-unset}|$PATH\"");
  s.env = {{"FOO", "bar baz"}};
  auto session = start(s);
  auto out = run(*session, s);
  ::unsetenv("BOXRT_TEST_LEAK");
  BOOST_TEST(out.stdout_text == "bar baz|" + session->id() + "/home|unset|" + std::getenv("PATH"));
}

BOOST_AUTO_TEST_CASE(spec_env_may_override_home) {
  auto s = spec("echo $HOME");
  s.env = {{"HOME", "/elsewhere"}};
  auto session = start(s);
  BOOST_TEST(run(*session, s).stdout_text == "/elsewhere");
}

BOOST_AUTO_TEST_CASE(exit_code_and_stderr_come_back) {
  auto s = spec("echo oops >&2; exit 7");
  auto session = start(s);
  auto out = run(*session, s);
  BOOST_TEST((out.status == exec_status::completed));
  BOOST_TEST(out.exit_code == 7);
  BOOST_TEST(out.stderr_text == "oops");
}

BOOST_AUTO_TEST_CASE(a_timeout_is_status_timed_out_with_the_reference_text) {
  auto s = spec("sleep 30");
  s.timeout_sec = 1;
  auto session = start(s);
  auto out = run(*session, s);
  BOOST_TEST((out.status == exec_status::timed_out));
  BOOST_TEST(out.exit_code == -1);
  BOOST_TEST(out.stderr_text == "Command timed out after 1 seconds.");
}

BOOST_AUTO_TEST_CASE(output_is_capped_by_the_exec_limits) {
  auto s = spec("head -c 3000 /dev/zero | tr '\\000' x");
  auto session = start(s);
  auto out = run(*session, s, exec_limits{1024});
  BOOST_TEST(out.stdout_text
             == std::string(1024, 'x') + "\n... [raw output clipped at 1024 bytes, 1976 bytes discarded]");
}

BOOST_AUTO_TEST_CASE(after_an_interrupt_every_exec_returns_at_once_without_running) {
  auto marker = tmp.str("ran");
  auto s = spec("touch " + marker);
  auto session = start(s);
  session->interrupt();
  auto out = run(*session, s);
  BOOST_TEST(out.exit_code == 137);
  BOOST_TEST(out.stderr_text == "interrupted");
  BOOST_TEST(!fs::exists(marker));
  out = run(*session, s);
  BOOST_TEST(out.exit_code == 137);
  BOOST_TEST(!fs::exists(marker));
}

BOOST_AUTO_TEST_CASE(blocked_host_paths_are_refused_before_anything_is_created) {
  auto refused = backend.start_session(spec("true", "/etc"));
  BOOST_REQUIRE(!refused.ok());
  BOOST_TEST((refused.error().code == ec::validation));
  BOOST_TEST(refused.error().message == "host_path /etc is blocked for security");
  auto under_proc = backend.start_session(spec("true", "/proc/self"));
  BOOST_REQUIRE(!under_proc.ok());
  BOOST_TEST(under_proc.error().message.ends_with("is blocked for security"));
  auto s = spec("true");
  s.extra_mounts = {mount_spec{"/var/run/docker.sock", "/sock", mount_mode::ro}};
  auto extra = backend.start_session(s);
  BOOST_REQUIRE(!extra.ok());
  BOOST_TEST(extra.error().message == "extra_mounts[0].host_path /var/run/docker.sock is blocked for security");
  BOOST_TEST(!fs::exists(tmp.str("base")));
}

BOOST_AUTO_TEST_CASE(cleanup_removes_only_other_instances_directories) {
  fs::create_directories(tmp.str("base/old_sess_12345678/workspace"));
  fs::create_directories(tmp.str("base/inst1_sess_abcdef01"));
  backend.cleanup_orphans();
  BOOST_TEST(!fs::exists(tmp.str("base/old_sess_12345678")));
  BOOST_TEST(fs::exists(tmp.str("base/inst1_sess_abcdef01")));
}

BOOST_AUTO_TEST_CASE(an_empty_instance_id_becomes_twelve_hex_digits) {
  process_backend other{tmp.str("b2")};
  BOOST_TEST(other.instance_id().size() == 12u);
  BOOST_TEST(other.instance_id().find_first_not_of("0123456789abcdef") == std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(process_host_workdir_suite)

BOOST_AUTO_TEST_CASE(maps_through_the_longest_matching_mount) {
  box_spec s;
  s.host_path = "/data/ws";
  s.mount_path = "/workspace";
  s.extra_mounts = {mount_spec{"/data/skill", "/workspace/.skills/demo", mount_mode::ro},
                    mount_spec{"/data/off", "/workspace/off", mount_mode::none}};
  s.workdir = "/workspace";
  BOOST_TEST(process_host_workdir(s, "/sd") == "/data/ws");
  s.workdir = "/workspace/a/b/";
  BOOST_TEST(process_host_workdir(s, "/sd") == "/data/ws/a/b");
  s.workdir = "/workspace/.skills/demo/x";
  BOOST_TEST(process_host_workdir(s, "/sd") == "/data/skill/x");
  s.workdir = "/workspace/off";
  BOOST_TEST(process_host_workdir(s, "/sd") == "/data/ws/off"); // mode none is no mount
  s.workdir = "/workspacex";
  BOOST_TEST(process_host_workdir(s, "/sd") == "/sd/root/workspacex");
}

BOOST_AUTO_TEST_CASE(without_host_path_the_session_directory_stands_in) {
  box_spec s;
  s.mount_path = "/project";
  s.workdir = "/project/src";
  BOOST_TEST(process_host_workdir(s, "/sd") == "/sd/workspace/src");
  s.host_path = "/data/ws";
  s.host_path_mode = mount_mode::none;
  BOOST_TEST(process_host_workdir(s, "/sd") == "/sd/workspace/src");
  s.workdir = "/tmp/../etc";
  BOOST_TEST(process_host_workdir(s, "/sd") == "/sd/root/etc");
}

BOOST_AUTO_TEST_SUITE_END()
