// Managed processes outside a sandbox: the rolling stderr preview (§4.7), the process
// backend's host children and the scripted backend's echo server, with real processes.
#include "backends/linux/managed.hpp"
#include "backends/process/process_backend.hpp"
#include "backends/testing/scripted.hpp"

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <boost/test/unit_test.hpp>

#include "managed_helpers.hpp"
#include "temp_dir.hpp"

using namespace boxrt;
using namespace boxrt::testing;
namespace fs = std::filesystem;

BOOST_AUTO_TEST_SUITE(stderr_preview_suite)

BOOST_AUTO_TEST_CASE(chunks_are_right_stripped_and_empty_ones_skipped) {
  stderr_preview_buffer p;
  p.add("  first line\n\n");
  p.add(" \n\t ");
  p.add("second\n");
  BOOST_TEST(p.text() == "  first line\nsecond");
}

BOOST_AUTO_TEST_CASE(oldest_chunks_are_evicted_past_4000_chars_plus_one_per_chunk) {
  stderr_preview_buffer p;
  p.add(std::string(1999, 'a'));
  p.add(std::string(1999, 'b'));
  // 3998 + 2 = 4000: both stay.
  BOOST_TEST(p.text() == std::string(1999, 'a') + "\n" + std::string(1999, 'b'));
  p.add("c");
  // 3999 + 3 > 4000: the oldest goes.
  BOOST_TEST(p.text() == std::string(1999, 'b') + "\nc");
}

BOOST_AUTO_TEST_CASE(characters_not_bytes_are_counted_and_bad_utf8_is_replaced) {
  stderr_preview_buffer p;
  std::string wide;
  for (int i = 0; i < 1999; ++i)
    wide += "\xC3\xA9"; // é: two bytes, one character
  p.add(wide);
  p.add(std::string(1999, 'x'));
  BOOST_TEST(p.text() == wide + "\n" + std::string(1999, 'x'));
  stderr_preview_buffer q;
  q.add("bad \xFF byte");
  BOOST_TEST(q.text() == "bad \xEF\xBF\xBD byte");
}

BOOST_AUTO_TEST_CASE(a_chunk_too_big_for_the_window_evicts_everything_as_the_rule_says) {
  stderr_preview_buffer p;
  p.add("small");
  p.add(std::string(4000, 'z'));
  BOOST_TEST(p.text().empty());
  p.add("after");
  BOOST_TEST(p.text() == "after");
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

struct process_managed_fixture {
  temp_dir tmp;
  process_backend backend{tmp.str("base"), "inst1"};
  std::shared_ptr<backend_session> session;

  process_managed_fixture() {
    box_spec s;
    s.session_id = "sess-m";
    s.host_path = tmp.str("ws");
    s.timeout_sec = 30;
    auto started = backend.start_session(s);
    BOOST_REQUIRE(started.ok());
    session = *started;
  }

  std::shared_ptr<managed_process> start(std::string command, std::vector<std::string> args = {},
                                         std::string cwd = "/workspace") {
    process_spec spec;
    spec.command = std::move(command);
    spec.args = std::move(args);
    spec.cwd = std::move(cwd);
    spec.env = {{"GREETING", "hi there"}};
    auto p = backend.start_managed_process(*session, spec);
    BOOST_REQUIRE_MESSAGE(p.ok(), (p.ok() ? std::string{} : p.error().message));
    return *p;
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(process_managed_suite, process_managed_fixture)

BOOST_AUTO_TEST_CASE(cat_echoes_stdin_lines_on_stdout) {
  auto p = start("cat");
  BOOST_TEST(code_of(*p) == running);
  BOOST_REQUIRE(p->write_stdin("hello\n"));
  BOOST_TEST(read_until(p->stdout_fd(), "hello\n") == "hello\n");
  BOOST_REQUIRE(p->write_stdin("second line\n"));
  BOOST_TEST(read_until(p->stdout_fd(), "second line\n") == "second line\n");
  BOOST_TEST(code_of(*p) == running);
}

BOOST_AUTO_TEST_CASE(stderr_is_drained_into_the_preview) {
  auto p = start("sh", {"-c", "echo oops >&2; exec cat"});
  BOOST_TEST(eventually([&] { return p->stderr_preview() == "oops"; }));
  BOOST_TEST(p->write_stdin("still\n"));
  BOOST_TEST(read_until(p->stdout_fd(), "still\n") == "still\n");
}

BOOST_AUTO_TEST_CASE(terminate_closes_stdin_first) {
  // SIGTERM is ignored (cat inherits that), so only the end of input ends it: exit 5.
  auto p = start("sh", {"-c", "trap '' TERM; echo up; cat; exit 5"});
  BOOST_REQUIRE(read_until(p->stdout_fd(), "up\n") == "up\n");
  auto t0 = std::chrono::steady_clock::now();
  p->terminate(std::chrono::seconds{5});
  BOOST_TEST(code_of(*p) == 5);
  BOOST_TEST((std::chrono::steady_clock::now() - t0 < std::chrono::seconds{4}));
  BOOST_TEST(!p->write_stdin("late\n"));
  p->terminate(std::chrono::seconds{5}); // idempotent
  BOOST_TEST(code_of(*p) == 5);
}

BOOST_AUTO_TEST_CASE(terminate_sends_sigterm_to_a_process_that_ignores_end_of_input) {
  auto p = start("sh", {"-c", "echo up; exec sleep 4711"});
  BOOST_REQUIRE(read_until(p->stdout_fd(), "up\n") == "up\n");
  auto t0 = std::chrono::steady_clock::now();
  p->terminate(std::chrono::seconds{5});
  BOOST_TEST(code_of(*p) == 128 + SIGTERM);
  BOOST_TEST((std::chrono::steady_clock::now() - t0 < std::chrono::seconds{4}));
}

BOOST_AUTO_TEST_CASE(terminate_kills_after_the_grace_when_sigterm_is_ignored) {
  auto p = start("sh", {"-c", "trap '' TERM; echo up; while :; do read x || :; done"});
  BOOST_REQUIRE(read_until(p->stdout_fd(), "up\n") == "up\n");
  p->terminate(std::chrono::milliseconds{200});
  BOOST_TEST(code_of(*p) == 128 + SIGKILL);
}

BOOST_AUTO_TEST_CASE(a_process_that_exits_by_itself_reports_its_code) {
  auto p = start("sh", {"-c", "exit 7"});
  BOOST_TEST(wait_eof(p->stdout_fd()));
  BOOST_TEST(exit_within(*p) == 7);
  BOOST_TEST(!p->write_stdin("nobody reads\n"));
}

BOOST_AUTO_TEST_CASE(no_shell_args_reach_the_command_verbatim_with_env_and_cwd) {
  auto p = start("sh", {"-c", "printf '%s|%s|%s|%s\\n' \"$1\" \"$GREETING\" \"$(pwd)\" \"$HOME\"", "sh", "a b;$(x)"},
                 "/workspace/sub/dir");
  auto out = read_until(p->stdout_fd(), "\n");
  auto ws = fs::canonical(tmp.str("ws")).string();
  BOOST_TEST(out.starts_with("a b;$(x)|hi there|" + ws + "/sub/dir|"));
  BOOST_TEST(out.find("/home\n") != std::string::npos);
  BOOST_TEST(exit_within(*p) == 0);
}

BOOST_AUTO_TEST_CASE(a_missing_command_starts_and_exits_127_with_the_reason_on_stderr) {
  auto p = start("no-such-command-4712");
  BOOST_TEST(exit_within(*p) == 127);
  BOOST_TEST(eventually([&] { return p->stderr_preview() == "no-such-command-4712: not found"; }));
}

BOOST_AUTO_TEST_CASE(stopping_the_session_kills_its_processes) {
  auto p = start("cat");
  BOOST_REQUIRE(p->write_stdin("ping\n"));
  BOOST_REQUIRE(read_until(p->stdout_fd(), "ping\n") == "ping\n");
  backend.stop_session(*session);
  BOOST_TEST(exit_within(*p) == 137);
  BOOST_TEST(wait_eof(p->stdout_fd()));
}

BOOST_AUTO_TEST_CASE(destroying_the_object_kills_a_running_process) {
  auto p = start("sh", {"-c", "echo $$; exec cat"});
  auto pid = std::stoi(read_until(p->stdout_fd(), "\n"));
  BOOST_REQUIRE(::kill(pid, 0) == 0);
  p.reset();
  BOOST_TEST(::kill(pid, 0) != 0); // killed and reaped
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(scripted_managed_suite)

BOOST_AUTO_TEST_CASE(scripted_managed_process_is_a_cat_echo_server_and_records_the_spec) {
  scripted_backend backend;
  box_spec s;
  s.session_id = "sess";
  auto session = backend.start_session(s);
  BOOST_REQUIRE(session.ok());
  process_spec spec;
  spec.process_id = "mcp";
  spec.command = "python3";
  spec.args = {"server.py"};
  auto p = backend.start_managed_process(**session, spec);
  BOOST_REQUIRE(p.ok());
  BOOST_REQUIRE((*p)->write_stdin("{\"jsonrpc\":\"2.0\"}\n"));
  BOOST_TEST(read_until((*p)->stdout_fd(), "\n") == "{\"jsonrpc\":\"2.0\"}\n");
  BOOST_REQUIRE(backend.managed_specs().size() == 1u);
  BOOST_TEST((backend.managed_specs()[0] == spec));
  backend.stop_session(**session);
  BOOST_TEST(exit_within(**p) == 137);
}

BOOST_AUTO_TEST_CASE(scripted_exit_command_exits_with_its_code) {
  scripted_backend backend;
  box_spec s;
  s.session_id = "sess";
  auto session = backend.start_session(s);
  BOOST_REQUIRE(session.ok());
  process_spec spec;
  spec.command = "exit";
  spec.args = {"3"};
  auto p = backend.start_managed_process(**session, spec);
  BOOST_REQUIRE(p.ok());
  BOOST_TEST(exit_within(**p) == 3);
}

BOOST_AUTO_TEST_CASE(backends_without_support_say_so) {
  struct bare : scripted_backend {
    result<std::shared_ptr<managed_process>> start_managed_process(backend_session& s,
                                                                   const process_spec& p) override {
      return backend::start_managed_process(s, p);
    }
  } backend;
  box_spec s;
  s.session_id = "sess";
  auto session = backend.start_session(s);
  BOOST_REQUIRE(session.ok());
  auto p = backend.start_managed_process(**session, process_spec{});
  BOOST_REQUIRE(!p.ok());
  BOOST_TEST(p.error().message == "scripted backend does not support managed processes");
}

BOOST_AUTO_TEST_SUITE_END()
