// run_process with real children: exit codes, both streams, the exact environment, the
// clip notice, timeouts and exits that take the whole process tree down, start
// failures, inherited and leaked descriptors, interrupts; and shell_quote.
#include "backends/linux/subprocess.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <string>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include "temp_dir.hpp"

using namespace std::chrono_literals;
using namespace boxrt;

namespace {

constexpr auto patience = 10s;

run_options sh(std::string script) {
  run_options options;
  options.argv = {"/bin/sh", "-c", std::move(script)};
  options.env = {"PATH=/usr/bin:/bin"};
  options.timeout = 30s;
  return options;
}

/// Makes this process adopt orphaned descendants while it lives, so a test can reap a
/// grandchild the runner killed and then see its pid gone.
struct subreaper {
  subreaper() {
    BOOST_REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  }
  ~subreaper() {
    ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  }
};

/// True once `pid` is gone. An adopted `pid` is reaped here and must have died of
/// SIGKILL; one that is not ours was reaped by its own parent (a shell blocked in wait
/// reaps a background child that dies before the shell itself does). Yields, never
/// sleeps, for at most `patience`.
bool killed_and_gone(pid_t pid) {
  auto deadline = std::chrono::steady_clock::now() + patience;
  while (std::chrono::steady_clock::now() < deadline) {
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG) != 0)
      break; // not our child
    if (info.si_pid == pid) {
      if (info.si_code != CLD_KILLED || info.si_status != SIGKILL)
        return false;
      break;
    }
    std::this_thread::yield();
  }
  return ::kill(pid, 0) == -1 && errno == ESRCH;
}

pid_t parse_pid(const std::string& text) {
  return static_cast<pid_t>(std::stol(text));
}

} // namespace

BOOST_AUTO_TEST_SUITE(subprocess_suite)

BOOST_AUTO_TEST_CASE(exit_code_stdout_and_stderr_are_reported_stripped) {
  auto out = run_process(sh("echo '  out  '; echo err >&2; exit 3"));
  BOOST_REQUIRE(out.started);
  BOOST_TEST(!out.timed_out);
  BOOST_TEST(!out.interrupted);
  BOOST_TEST(out.exit_code == 3);
  BOOST_TEST(out.stdout_text == "out");
  BOOST_TEST(out.stderr_text == "err");
  BOOST_TEST(out.error == "");
}

BOOST_AUTO_TEST_CASE(death_by_signal_is_128_plus_the_signal) {
  auto out = run_process(sh("kill -TERM $$"));
  BOOST_REQUIRE(out.started);
  BOOST_TEST(out.exit_code == 128 + SIGTERM);
}

BOOST_AUTO_TEST_CASE(the_environment_is_exactly_the_given_one) {
  ::setenv("BOXRT_TEST_LEAK", "leaked", 1);
  run_options options;
  options.argv = {"/usr/bin/env"};
  options.env = {"A=1", "B=two words"};
  auto out = run_process(options);
  ::unsetenv("BOXRT_TEST_LEAK");
  BOOST_REQUIRE(out.started);
  BOOST_TEST(out.stdout_text == "A=1\nB=two words");
}

BOOST_AUTO_TEST_CASE(the_child_runs_in_cwd_and_a_bare_name_is_found_on_path) {
  testing::temp_dir dir;
  run_options options;
  options.argv = {"pwd"};
  options.cwd = dir.str();
  auto out = run_process(options);
  BOOST_REQUIRE(out.started);
  BOOST_TEST(out.stdout_text == dir.str());
}

BOOST_AUTO_TEST_CASE(stdin_is_empty_so_a_reader_does_not_hang) {
  run_options options;
  options.argv = {"cat"};
  auto out = run_process(options);
  BOOST_REQUIRE(out.started);
  BOOST_TEST(out.exit_code == 0);
  BOOST_TEST(out.stdout_text == "");
}

BOOST_AUTO_TEST_CASE(output_past_one_mebibyte_gets_the_reference_clip_notice) {
  auto out = run_process(sh("head -c 1100000 /dev/zero | tr '\\000' a; "
                            "head -c 20 /dev/zero | tr '\\000' e >&2"));
  BOOST_REQUIRE(out.started);
  BOOST_TEST(out.exit_code == 0);
  BOOST_TEST(out.stdout_text
             == std::string(1048576, 'a')
                  + "\n... [raw output clipped at 1048576 bytes, 51424 bytes discarded]");
  BOOST_TEST(out.stderr_text == std::string(20, 'e'));
}

BOOST_AUTO_TEST_CASE(each_stream_is_clipped_at_its_own_cap) {
  auto options = sh("printf 0123456789abcdef; printf 'xyz  ' >&2");
  options.max_output_bytes = 10;
  auto out = run_process(options);
  BOOST_REQUIRE(out.started);
  BOOST_TEST(out.stdout_text == "0123456789\n... [raw output clipped at 10 bytes, 6 bytes discarded]");
  BOOST_TEST(out.stderr_text == "xyz");
}

BOOST_AUTO_TEST_CASE(timeout_kills_the_whole_tree_and_reports_the_reference_text) {
  subreaper adopt;
  auto options = sh("sleep 100 & echo $!; sleep 100");
  options.timeout = 1500ms;
  auto out = run_process(options);
  BOOST_REQUIRE(out.started);
  BOOST_TEST(out.timed_out);
  BOOST_TEST(out.exit_code == -1);
  BOOST_TEST(out.stderr_text == "Command timed out after 1.5 seconds.");
  BOOST_REQUIRE(!out.stdout_text.empty());
  auto grandchild = parse_pid(out.stdout_text);
  BOOST_TEST(killed_and_gone(grandchild));
}

BOOST_AUTO_TEST_CASE(timeout_keeps_captured_stderr_instead_of_the_notice) {
  auto options = sh("echo partial >&2; exec sleep 100");
  options.timeout = 1s;
  auto out = run_process(options);
  BOOST_TEST(out.timed_out);
  BOOST_TEST(out.stderr_text == "partial");
}

BOOST_AUTO_TEST_CASE(a_background_child_holding_the_pipes_is_killed_when_the_main_child_exits) {
  subreaper adopt;
  // Without a timeout, only the kill after the main child's exit can end this run.
  auto options = sh("sleep 100 & echo $!; exit 4");
  options.timeout = 0ms;
  auto out = run_process(options);
  BOOST_REQUIRE(out.started);
  BOOST_TEST(!out.timed_out);
  BOOST_TEST(out.exit_code == 4);
  BOOST_REQUIRE(!out.stdout_text.empty());
  auto grandchild = parse_pid(out.stdout_text);
  BOOST_TEST(killed_and_gone(grandchild));
}

BOOST_AUTO_TEST_CASE(a_missing_program_is_not_started_and_says_why) {
  run_options by_path;
  by_path.argv = {"/nonexistent/boxrt-no-such-program"};
  auto out = run_process(by_path);
  BOOST_TEST(!out.started);
  BOOST_TEST(out.error == "cannot execute /nonexistent/boxrt-no-such-program: No such file or directory");

  run_options by_name;
  by_name.argv = {"boxrt-no-such-program"};
  out = run_process(by_name);
  BOOST_TEST(!out.started);
  BOOST_TEST(out.error == "executable not found on PATH: boxrt-no-such-program");

  run_options empty;
  out = run_process(empty);
  BOOST_TEST(!out.started);
  BOOST_TEST(out.error == "no program to run (empty argv)");
}

BOOST_AUTO_TEST_CASE(a_missing_working_directory_is_a_start_failure) {
  auto options = sh("true");
  options.cwd = "/nonexistent/boxrt-dir";
  auto out = run_process(options);
  BOOST_TEST(!out.started);
  BOOST_TEST(out.error == "cannot change directory to /nonexistent/boxrt-dir: No such file or directory");
}

BOOST_AUTO_TEST_CASE(an_inherited_descriptor_is_readable_and_nothing_else_leaks) {
  int fds[2];
  BOOST_REQUIRE(::pipe(fds) == 0);
  BOOST_REQUIRE(::write(fds[1], "hello", 5) == 5);
  ::close(fds[1]);
  // A descriptor without CLOEXEC that the child must not see anyway.
  auto leak = ::fcntl(fds[0], F_DUPFD, 20);
  BOOST_REQUIRE(leak >= 20);
  auto options = sh("if test -e /proc/self/fd/" + std::to_string(leak)
                    + "; then echo leaked; else echo closed; fi; cat <&5");
  options.inherit_fds = {{fds[0], 5}};
  auto out = run_process(options);
  ::close(fds[0]);
  ::close(leak);
  BOOST_REQUIRE(out.started);
  BOOST_TEST(out.stdout_text == "closed\nhello");
}

BOOST_AUTO_TEST_CASE(inherited_descriptors_may_swap_places) {
  int a[2];
  int b[2];
  BOOST_REQUIRE(::pipe(a) == 0);
  BOOST_REQUIRE(::pipe(b) == 0);
  BOOST_REQUIRE(::write(a[1], "A", 1) == 1);
  BOOST_REQUIRE(::write(b[1], "B", 1) == 1);
  ::close(a[1]);
  ::close(b[1]);
  // Each source is another's target: a naive dup2 sequence would read B twice.
  auto options = sh("cat /proc/self/fd/" + std::to_string(b[0]) + "; cat /proc/self/fd/"
                    + std::to_string(a[0]));
  options.inherit_fds = {{a[0], b[0]}, {b[0], a[0]}};
  auto out = run_process(options);
  ::close(a[0]);
  ::close(b[0]);
  BOOST_REQUIRE(out.started);
  BOOST_TEST(out.stdout_text == "AB");
}

BOOST_AUTO_TEST_CASE(targets_below_three_are_refused) {
  auto options = sh("true");
  options.inherit_fds = {{0, 1}};
  auto out = run_process(options);
  BOOST_TEST(!out.started);
  BOOST_TEST(out.error == "inherited descriptors must map onto child descriptors >= 3");
}

BOOST_AUTO_TEST_CASE(a_set_interrupt_flag_kills_the_child_and_returns) {
  std::atomic<bool> stop{true};
  auto out = run_process(sh("exec sleep 100"), &stop);
  BOOST_REQUIRE(out.started);
  BOOST_TEST(out.interrupted);
  BOOST_TEST(!out.timed_out);
  BOOST_TEST(out.exit_code == 128 + SIGKILL);
}

BOOST_AUTO_TEST_CASE(an_interrupt_raised_while_running_ends_the_run) {
  std::atomic<bool> stop{false};
  testing::temp_dir dir;
  auto fifo = dir.str("ready");
  BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::thread raiser{[&] {
    // Blocks until the child has written its line: it is running by then.
    auto fd = ::open(fifo.c_str(), O_RDONLY);
    char c = 0;
    auto got = ::read(fd, &c, 1);
    (void)got;
    stop.store(true);
    ::close(fd);
  }};
  auto out = run_process(sh("echo > " + fifo + "; exec sleep 100"), &stop);
  raiser.join();
  BOOST_REQUIRE(out.started);
  BOOST_TEST(out.interrupted);
  BOOST_TEST(out.exit_code == 128 + SIGKILL);
}

BOOST_AUTO_TEST_CASE(shell_quote_wraps_in_single_quotes) {
  BOOST_TEST(shell_quote("") == "''");
  BOOST_TEST(shell_quote("/workspace") == "'/workspace'");
  BOOST_TEST(shell_quote("a'b") == "'a'\"'\"'b'");
}

BOOST_AUTO_TEST_CASE(shell_quote_round_trips_through_sh) {
  std::string nasty = "a b'c\"d$HOME`id`\\e*;|&\nf'";
  auto out = run_process(sh("printf %s " + shell_quote(nasty)));
  BOOST_REQUIRE(out.started);
  BOOST_TEST(out.stdout_text == nasty);
}

BOOST_AUTO_TEST_SUITE_END()
