// Managed processes through the actors (standard mode, scripted backend: its managed
// process is a real `cat`, and `exit N` a real process that exits N).
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <dirent.h>
#include <fstream>
#include <string>
#include <thread>
#include <unistd.h>

#include "tests/actors/fixture.hpp"

using namespace boxrt;
using namespace boxrt::test;

namespace {

process_request preq(const std::string& session, const std::string& pid = "default") {
  process_request r;
  r.ctx = ctx("workspace-a");
  r.session_id = session;
  r.process_id = pid;
  return r;
}

process_request start_req(const std::string& session, const std::string& pid,
                          const std::string& command, std::vector<std::string> args = {}) {
  auto r = preq(session, pid);
  r.spec.process_id = pid;
  r.spec.command = command;
  r.spec.args = std::move(args);
  r.spec.env = {{"B", "2"}, {"A", "1"}};
  return r;
}

/// Live (not zombie) children of this test process running `cat`: the scripted
/// backend's managed processes are real host children.
size_t live_cat_children() {
  size_t n = 0;
  const std::string me = std::to_string(::getpid());
  if (DIR* d = ::opendir("/proc")) {
    while (auto* e = ::readdir(d)) {
      std::ifstream st{std::string{"/proc/"} + e->d_name + "/stat"};
      std::string line;
      if (!std::getline(st, line))
        continue;
      auto close = line.rfind(')');
      auto open = line.find('(');
      if (close == std::string::npos || open == std::string::npos)
        continue;
      auto comm = line.substr(open + 1, close - open - 1);
      // After ") ": state, then the parent's pid.
      auto rest = line.substr(close + 2);
      auto state = rest.substr(0, 1);
      auto ppid = rest.substr(2, rest.find(' ', 2) - 2);
      if (comm == "cat" && ppid == me && state != "Z")
        ++n;
    }
    ::closedir(d);
  }
  return n;
}

} // namespace

BOOST_AUTO_TEST_SUITE(managed_processes)

BOOST_AUTO_TEST_CASE(start_get_and_stop_a_process_of_a_session) {
  core_fixture f;
  BOOST_REQUIRE(f.exec("workspace-a", "s1", "echo x").ok());
  auto started = f.call<process_info>(pstart_atom_v, start_req("s1", "mcp", "cat", {"-u"}));
  BOOST_REQUIRE(started.ok());
  BOOST_CHECK_EQUAL(started->session_id, "s1");
  BOOST_CHECK_EQUAL(started->process_id, "mcp");
  BOOST_CHECK((started->status == process_status::running));
  BOOST_CHECK_EQUAL(started->command, "cat");
  BOOST_CHECK((started->env_keys == std::vector<std::string>{"A", "B"}));
  BOOST_CHECK(started->started_at > 0);
  // The process is registered for the relay under the session's physical id.
  BOOST_CHECK_EQUAL(f.processes->running(), 1u);
  auto got = f.call<process_info>(pget_atom_v, preq("s1", "mcp"));
  BOOST_REQUIRE(got.ok());
  BOOST_CHECK((got->status == process_status::running));
  auto stopped = f.call<std::string>(pstop_atom_v, preq("s1", "mcp"));
  BOOST_REQUIRE(stopped.ok());
  BOOST_CHECK_EQUAL(stopped.value(), "mcp");
  BOOST_CHECK_EQUAL(f.processes->running(), 0u);
  require_error(f.call<process_info>(pget_atom_v, preq("s1", "mcp")), ec::process_not_found,
                "session s1 has no managed process with process_id=mcp");
}

BOOST_AUTO_TEST_CASE(unknown_sessions_and_processes_are_not_found) {
  core_fixture f;
  require_error(f.call<process_info>(pstart_atom_v, start_req("nope", "default", "cat")),
                ec::session_not_found, "session nope not found");
  BOOST_REQUIRE(f.exec("workspace-a", "s1", "echo x").ok());
  require_error(f.call<std::string>(pstop_atom_v, preq("s1", "other")), ec::process_not_found,
                "session s1 has no managed process with process_id=other");
}

BOOST_AUTO_TEST_CASE(an_exited_process_keeps_its_exit_code) {
  core_fixture f;
  BOOST_REQUIRE(f.exec("workspace-a", "s1", "echo x").ok());
  BOOST_REQUIRE(f.call<process_info>(pstart_atom_v, start_req("s1", "default", "exit", {"3"})).ok());
  std::optional<process_info> last;
  // Bounded by time, not by a count of round trips: under a loaded machine the real
  // process may need more of them than a fixed count allows.
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds{10};
       std::chrono::steady_clock::now() < until;) {
    auto got = f.call<process_info>(pget_atom_v, preq("s1"));
    BOOST_REQUIRE(got.ok());
    last = got.value();
    if (last->status == process_status::exited)
      break;
    std::this_thread::yield();
  }
  BOOST_REQUIRE((last->status == process_status::exited));
  BOOST_CHECK_EQUAL(last->exit_code, 3);
  BOOST_CHECK(last->exited_at >= last->started_at);
}

BOOST_AUTO_TEST_CASE(exited_processes_are_kept_only_up_to_the_completed_cap) {
  core_fixture::options o;
  o.limits.max_completed_processes = 1;
  core_fixture f{o};
  BOOST_REQUIRE(f.exec("workspace-a", "s1", "echo x").ok());
  auto wait_exited = [&](const std::string& pid) {
    for (int i = 0; i < 2000; ++i) {
      auto got = f.call<process_info>(pget_atom_v, preq("s1", pid));
      if (got.ok() && got->status == process_status::exited)
        return true;
      std::this_thread::yield();
    }
    return false;
  };
  BOOST_REQUIRE(f.call<process_info>(pstart_atom_v, start_req("s1", "a", "exit", {"0"})).ok());
  BOOST_REQUIRE(wait_exited("a"));
  BOOST_REQUIRE(f.call<process_info>(pstart_atom_v, start_req("s1", "b", "exit", {"0"})).ok());
  BOOST_REQUIRE(wait_exited("b"));
  // The next start forgets the oldest exited record beyond the cap.
  BOOST_REQUIRE(f.call<process_info>(pstart_atom_v, start_req("s1", "c", "cat")).ok());
  require_error(f.call<process_info>(pget_atom_v, preq("s1", "a")), ec::process_not_found,
                "session s1 has no managed process with process_id=a");
  BOOST_CHECK(f.call<process_info>(pget_atom_v, preq("s1", "b")).ok());
}

BOOST_AUTO_TEST_CASE(the_global_cap_counts_running_processes_but_not_a_replaced_one) {
  core_fixture::options o;
  o.limits.max_managed_processes = 1;
  core_fixture f{o};
  BOOST_REQUIRE(f.exec("workspace-a", "s1", "echo x").ok());
  BOOST_REQUIRE(f.exec("workspace-a", "s2", "echo x").ok());
  BOOST_REQUIRE(f.call<process_info>(pstart_atom_v, start_req("s1", "default", "cat")).ok());
  require_error(f.call<process_info>(pstart_atom_v, start_req("s2", "default", "cat")),
                ec::capacity_exceeded, "Box managed process capacity reached (1)");
  // The same id again replaces the running process instead of counting twice.
  BOOST_REQUIRE(f.call<process_info>(pstart_atom_v, start_req("s1", "default", "cat")).ok());
  BOOST_CHECK_EQUAL(f.processes->running(), 1u);
}

BOOST_AUTO_TEST_CASE(concurrent_starts_of_one_id_leave_one_process) {
  core_fixture f;
  BOOST_REQUIRE(f.exec("workspace-a", "s1", "echo x").ok());
  caf::scoped_actor self{f.sys};
  for (int i = 0; i < 3; ++i)
    self->send(f.dir(), pstart_atom_v, start_req("s1", "same", "cat"));
  for (int i = 0; i < 3; ++i)
    self->receive([](process_info&) {}, [](caf::error& e) { BOOST_FAIL(caf::to_string(e)); },
                  caf::after(std::chrono::seconds{30}) >> [] { BOOST_FAIL("no start reply within 30 s"); });
  // Each start replaced the one before: one process runs, none is orphaned.
  BOOST_CHECK_EQUAL(f.processes->running(), 1u);
  BOOST_CHECK_EQUAL(f.processes->starting(), 0u);
}

BOOST_AUTO_TEST_CASE(deleting_the_session_ends_its_processes) {
  core_fixture f;
  BOOST_REQUIRE(f.exec("workspace-a", "s1", "echo x").ok());
  BOOST_REQUIRE(f.call<process_info>(pstart_atom_v, start_req("s1", "default", "cat")).ok());
  // The child shows as `cat` once it has exec'd (a bounded wait under load).
  auto started = std::chrono::steady_clock::now() + std::chrono::seconds{10};
  while (live_cat_children() == 0 && std::chrono::steady_clock::now() < started)
    std::this_thread::yield();
  BOOST_REQUIRE_GE(live_cat_children(), 1u);
  session_request del;
  del.ctx = ctx("workspace-a");
  del.session_id = "s1";
  BOOST_REQUIRE(f.call<std::string>(caf::delete_atom_v, del).ok());
  BOOST_CHECK_EQUAL(f.processes->running(), 0u);
  // The process itself is gone, not only its registry entry (killed with the session;
  // a bounded wait for the kernel to deliver the kill).
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds{10};
  while (live_cat_children() > 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::yield();
  BOOST_CHECK_EQUAL(live_cat_children(), 0u);
  require_error(f.call<process_info>(pget_atom_v, preq("s1")), ec::session_not_found,
                "session s1 not found");
}

BOOST_AUTO_TEST_CASE(admission_mode_refuses_managed_processes_before_anything_starts) {
  core_fixture::options o;
  o.admission = true;
  core_fixture f{o};
  const std::string refused = "Managed processes are disabled for Cloud sandboxes";
  require_error(f.call<process_info>(pstart_atom_v, start_req("global", "p", "cat")), ec::admission,
                refused);
  require_error(f.call<process_info>(pget_atom_v, preq("global", "p")), ec::admission, refused);
  require_error(f.call<std::string>(pstop_atom_v, preq("global", "p")), ec::admission, refused);
  BOOST_CHECK_EQUAL(f.backend->start_count(), 0u);
  BOOST_CHECK_EQUAL(f.processes->running(), 0u);
}

BOOST_AUTO_TEST_SUITE_END()
