// scripted_backend: the command language, output clipping, held starts, gates,
// interrupts, scripted failures, records and readiness.
#include "backends/testing/scripted.hpp"

#include <chrono>
#include <future>
#include <string>
#include <thread>

#include <boost/test/unit_test.hpp>

using namespace std::chrono_literals;
using namespace boxrt;

namespace {

constexpr auto patience = std::chrono::milliseconds{10000};

box_spec spec_for(std::string session_id, std::string cmd = {}) {
  box_spec spec;
  spec.session_id = std::move(session_id);
  spec.cmd = std::move(cmd);
  return spec;
}

struct scripted_fixture {
  scripted_backend backend;

  std::shared_ptr<backend_session> start(const std::string& session_id) {
    auto started = backend.start_session(spec_for(session_id));
    BOOST_REQUIRE(started.ok());
    return *started;
  }

  exec_result run(backend_session& session, const std::string& cmd,
                  exec_limits limits = {}) {
    auto out = backend.exec(session, spec_for("sess", cmd), limits);
    BOOST_REQUIRE(out.ok());
    return *out;
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(scripted_backend_suite, scripted_fixture)

BOOST_AUTO_TEST_CASE(names_itself_scripted_and_never_claims_isolation) {
  BOOST_TEST(backend.name() == "scripted");
  BOOST_TEST(!backend.isolating());
}

BOOST_AUTO_TEST_CASE(sessions_get_numbered_ids_and_start_alive) {
  auto a = start("a");
  auto b = start("b");
  BOOST_TEST(a->id() == "scripted-1");
  BOOST_TEST(b->id() == "scripted-2");
  BOOST_TEST(a->alive());
  BOOST_TEST(b->alive());
}

BOOST_AUTO_TEST_CASE(echo_prints_its_text_and_exits_zero) {
  auto s = start("a");
  auto r = run(*s, "echo hello  world");
  BOOST_TEST(r.stdout_text == "hello  world");
  BOOST_TEST(r.stderr_text == "");
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST((r.status == exec_status::completed));
  BOOST_TEST(r.backend_name == "scripted");
  BOOST_TEST(r.session_id == "sess");
  BOOST_TEST(r.duration_ms == 0);
}

BOOST_AUTO_TEST_CASE(echo_output_is_whitespace_stripped) {
  auto s = start("a");
  BOOST_TEST(run(*s, "echo   padded \t ").stdout_text == "padded");
  BOOST_TEST(run(*s, "echo").stdout_text == "");
}

BOOST_AUTO_TEST_CASE(fail_exits_with_the_given_code_and_says_failed) {
  auto s = start("a");
  auto r = run(*s, "fail 3");
  BOOST_TEST(r.exit_code == 3);
  BOOST_TEST(r.stderr_text == "failed");
  BOOST_TEST(r.stdout_text == "");
  BOOST_TEST((r.status == exec_status::completed));
  BOOST_TEST(run(*s, "fail").exit_code == 1);
  BOOST_TEST(run(*s, "fail x").exit_code == 1);
}

BOOST_AUTO_TEST_CASE(timeout_reports_timed_out_with_the_reference_text) {
  auto s = start("a");
  auto spec = spec_for("sess", "timeout");
  spec.timeout_sec = 7;
  auto r = backend.exec(*s, spec, {});
  BOOST_REQUIRE(r.ok());
  BOOST_TEST((r->status == exec_status::timed_out));
  BOOST_TEST(r->stderr_text == "Command timed out after 7 seconds.");
  BOOST_TEST(r->stdout_text == "");
}

BOOST_AUTO_TEST_CASE(die_exits_one_and_leaves_the_session_dead) {
  auto s = start("a");
  auto r = run(*s, "die");
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(!s->alive());
  auto again = backend.exec(*s, spec_for("sess", "echo hi"), {});
  BOOST_REQUIRE(!again.ok());
  BOOST_TEST((again.error().code == ec::box_error));
}

BOOST_AUTO_TEST_CASE(any_other_command_prints_itself) {
  auto s = start("a");
  auto r = run(*s, "  python3 -c 'print(1)'  ");
  BOOST_TEST(r.stdout_text == "python3 -c 'print(1)'");
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(run(*s, "echoes x").stdout_text == "echoes x");
}

BOOST_AUTO_TEST_CASE(output_over_the_limit_is_clipped_with_the_reference_notice) {
  auto s = start("a");
  auto r = run(*s, "echo " + std::string(200, 'A'), exec_limits{100});
  BOOST_TEST(r.stdout_text
             == std::string(100, 'A')
                  + "\n... [raw output clipped at 100 bytes, 100 bytes discarded]");
}

BOOST_AUTO_TEST_CASE(output_exactly_at_the_limit_is_not_clipped) {
  auto s = start("a");
  auto r = run(*s, "echo " + std::string(100, 'B'), exec_limits{100});
  BOOST_TEST(r.stdout_text == std::string(100, 'B'));
}

BOOST_AUTO_TEST_CASE(clipped_output_is_stripped_before_the_notice) {
  auto s = start("a");
  auto r = run(*s, "echo abc" + std::string(20, ' ') + "def", exec_limits{10});
  BOOST_TEST(r.stdout_text == "abc\n... [raw output clipped at 10 bytes, 16 bytes discarded]");
}

BOOST_AUTO_TEST_CASE(clip_inside_a_utf8_character_becomes_a_replacement_character) {
  auto s = start("a");
  // "é" is two bytes; a limit of 4 cuts the second one in half.
  auto r = run(*s, "echo abc\xC3\xA9xyz", exec_limits{4});
  BOOST_TEST(r.stdout_text
             == "abc\xEF\xBF\xBD\n... [raw output clipped at 4 bytes, 4 bytes discarded]");
}

BOOST_AUTO_TEST_CASE(stderr_is_clipped_too) {
  auto s = start("a");
  auto spec = spec_for("sess", "timeout");
  auto r = backend.exec(*s, spec, exec_limits{7});
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(r->stderr_text.starts_with("Command\n... [raw output clipped at 7 bytes, "));
}

BOOST_AUTO_TEST_CASE(held_start_blocks_until_released_from_another_thread) {
  backend.hold_starts("slow");
  auto pending = std::async(std::launch::async,
                            [&] { return backend.start_session(spec_for("ws-slow-1")); });
  BOOST_REQUIRE(backend.wait_blocked(1, patience));
  BOOST_TEST(backend.blocked() == 1u);
  // Starts that do not match the needle go through meanwhile.
  auto other = backend.start_session(spec_for("ws-fast"));
  BOOST_REQUIRE(other.ok());
  BOOST_TEST((pending.wait_for(0s) == std::future_status::timeout));
  backend.release_starts("slow");
  BOOST_REQUIRE((pending.wait_for(patience) == std::future_status::ready));
  auto started = pending.get();
  BOOST_REQUIRE(started.ok());
  BOOST_TEST(backend.blocked() == 0u);
  auto specs = backend.started_specs();
  BOOST_REQUIRE(specs.size() == 2u);
  BOOST_TEST(specs[0].session_id == "ws-fast");
  BOOST_TEST(specs[1].session_id == "ws-slow-1");
}

BOOST_AUTO_TEST_CASE(wait_blocked_times_out_when_nothing_blocks) {
  BOOST_TEST(!backend.wait_blocked(1, 1ms));
  BOOST_TEST(backend.wait_blocked(0, 0ms));
}

BOOST_AUTO_TEST_CASE(gate_blocks_until_released_and_then_exits_zero) {
  auto s = start("a");
  auto pending = std::async(std::launch::async,
                            [&] { return backend.exec(*s, spec_for("sess", "gate g1"), {}); });
  BOOST_REQUIRE(backend.wait_blocked(1, patience));
  BOOST_TEST((pending.wait_for(0s) == std::future_status::timeout));
  backend.release_gate("g1");
  BOOST_REQUIRE((pending.wait_for(patience) == std::future_status::ready));
  auto r = pending.get();
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(r->exit_code == 0);
  BOOST_TEST(backend.blocked() == 0u);
}

BOOST_AUTO_TEST_CASE(open_gate_lets_later_execs_through) {
  backend.release_gate("open");
  auto s = start("a");
  BOOST_TEST(run(*s, "gate open").exit_code == 0);
}

BOOST_AUTO_TEST_CASE(interrupt_wakes_a_gated_exec_with_exit_137) {
  auto s = start("a");
  auto pending = std::async(std::launch::async,
                            [&] { return backend.exec(*s, spec_for("sess", "gate never"), {}); });
  BOOST_REQUIRE(backend.wait_blocked(1, patience));
  s->interrupt();
  BOOST_REQUIRE((pending.wait_for(patience) == std::future_status::ready));
  auto r = pending.get();
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(r->exit_code == 137);
  BOOST_TEST(r->stderr_text == "interrupted");
  BOOST_TEST(s->alive());
}

BOOST_AUTO_TEST_CASE(interrupt_only_wakes_execs_of_its_own_session) {
  auto a = start("a");
  auto b = start("b");
  auto on_a = std::async(std::launch::async,
                         [&] { return backend.exec(*a, spec_for("a", "gate g"), {}); });
  auto on_b = std::async(std::launch::async,
                         [&] { return backend.exec(*b, spec_for("b", "gate g"), {}); });
  BOOST_REQUIRE(backend.wait_blocked(2, patience));
  a->interrupt();
  BOOST_REQUIRE((on_a.wait_for(patience) == std::future_status::ready));
  BOOST_TEST(on_a.get()->exit_code == 137);
  BOOST_TEST((on_b.wait_for(0s) == std::future_status::timeout));
  BOOST_TEST(backend.blocked() == 1u);
  backend.release_gate("g");
  BOOST_REQUIRE((on_b.wait_for(patience) == std::future_status::ready));
  BOOST_TEST(on_b.get()->exit_code == 0);
}

BOOST_AUTO_TEST_CASE(interrupt_also_ends_an_exec_that_starts_after_it) {
  // The session actor interrupts while its exec job may not have reached the backend
  // yet: that exec must not block afterwards.
  auto s = start("a");
  s->interrupt();
  auto r = run(*s, "gate never-opened");
  BOOST_TEST(r.exit_code == 137);
  BOOST_TEST(r.stderr_text == "interrupted");
}

BOOST_AUTO_TEST_CASE(stop_marks_the_session_dead_and_ends_its_gated_exec) {
  auto s = start("a");
  auto pending = std::async(std::launch::async,
                            [&] { return backend.exec(*s, spec_for("sess", "gate g"), {}); });
  BOOST_REQUIRE(backend.wait_blocked(1, patience));
  backend.stop_session(*s);
  BOOST_TEST(!s->alive());
  BOOST_REQUIRE((pending.wait_for(patience) == std::future_status::ready));
  BOOST_TEST(pending.get()->exit_code == 137);
}

BOOST_AUTO_TEST_CASE(fail_next_start_fails_exactly_one_start) {
  backend.fail_next_start(make_box_error(ec::backend_unavailable, "no sandbox"));
  auto first = backend.start_session(spec_for("a"));
  BOOST_REQUIRE(!first.ok());
  BOOST_TEST((first.error() == make_box_error(ec::backend_unavailable, "no sandbox")));
  auto second = backend.start_session(spec_for("a"));
  BOOST_TEST(second.ok());
  BOOST_TEST(backend.start_count() == 1u);
}

BOOST_AUTO_TEST_CASE(records_starts_stops_and_execs) {
  auto spec = spec_for("ws-1");
  spec.memory_mb = 256;
  auto started = backend.start_session(spec);
  BOOST_REQUIRE(started.ok());
  auto s = *started;
  run(*s, "echo one");
  run(*s, "fail 2");
  backend.stop_session(*s);
  BOOST_TEST(backend.start_count() == 1u);
  BOOST_TEST(backend.exec_count() == 2u);
  BOOST_TEST(backend.stop_count() == 1u);
  auto specs = backend.started_specs();
  BOOST_REQUIRE(specs.size() == 1u);
  BOOST_TEST((specs[0] == spec));
  auto stopped = backend.stopped_ids();
  BOOST_REQUIRE(stopped.size() == 1u);
  BOOST_TEST(stopped[0] == "scripted-1");
  BOOST_TEST(!s->alive());
}

BOOST_AUTO_TEST_CASE(readiness_reports_configured_keys_and_availability) {
  scripted_backend ready{scripted_config{true, {"namespace_isolation", "cgroup_v2"}}};
  auto report = ready.probe_readiness("", false);
  BOOST_TEST(report.backend_name == "scripted");
  BOOST_TEST(report.available);
  BOOST_TEST(!report.isolating);
  BOOST_TEST(report.limits_mechanism == "");
  BOOST_TEST(report.details.size() == 9u);
  BOOST_TEST(report.details.at("namespace_isolation"));
  BOOST_TEST(report.details.at("cgroup_v2"));
  for (auto key : {"resource_limits", "mount_isolation", "network_isolation",
                   "hard_workspace_quota", "hard_skill_storage_quota",
                   "bounded_ephemeral_storage", "inode_quota"})
    BOOST_TEST(!report.details.at(key), key);
}

BOOST_AUTO_TEST_CASE(set_config_changes_reported_readiness) {
  backend.set_config(scripted_config{false, {"inode_quota"}});
  auto report = backend.probe_readiness("/tmp", true);
  BOOST_TEST(!report.available);
  BOOST_TEST(report.details.at("inode_quota"));
  BOOST_TEST(!report.details.at("cgroup_v2"));
}

BOOST_AUTO_TEST_SUITE_END()
