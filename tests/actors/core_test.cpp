// The actor core end to end in one process: directory -> supervisor -> session ->
// worker pool -> scripted backend. Acceptance scenarios of admission.md §5.1 and §5.4
// mapped to boxd's push model, coalescing, serialisation, interruption and caps.
#include "tests/actors/fixture.hpp"

#include <atomic>
#include <chrono>
#include <limits>
#include <thread>

using namespace boxrt;
using namespace boxrt::test;
using namespace std::chrono_literals;

namespace {

core_fixture::options admission_opts() {
  core_fixture::options o;
  o.admission = true;
  return o;
}

/// Sends `req` without waiting; the reply arrives in `self`'s mailbox.
void send_exec(caf::scoped_actor& self, const directory_actor& dir, exec_request req) {
  self->send(dir, exec_atom_v, std::move(req));
}

/// Receives one exec reply (value or error) from `self`'s mailbox.
result<exec_result> receive_exec(caf::scoped_actor& self) {
  std::optional<result<exec_result>> out;
  self->receive([&](exec_result& r) { out.emplace(std::move(r)); },
                [&](caf::error& err) { out.emplace(from_caf_error(err)); },
                caf::after(std::chrono::seconds{30}) >> [&] {
                  out.emplace(box_error{ec::box_error, "test: no exec reply within 30 s"});
                });
  return std::move(*out);
}

} // namespace

BOOST_AUTO_TEST_SUITE(actor_core)

BOOST_AUTO_TEST_CASE(exec_runs_in_a_new_session_and_reports_the_logical_id) {
  core_fixture f;
  auto r = f.exec("workspace-a", "chat 1/x", "echo hello");
  BOOST_REQUIRE(r.ok());
  BOOST_CHECK_EQUAL(r->session_id, "chat 1/x");
  BOOST_CHECK_EQUAL(r->stdout_text, "hello");
  BOOST_CHECK_EQUAL(r->backend_name, "scripted");
  BOOST_CHECK_EQUAL(f.backend->start_count(), 1u);
  auto started = f.backend->started_specs().front();
  // The backend sees the collision-free physical id.
  BOOST_CHECK(started.session_id.rfind("ws-695136eeae1cb9b6af4a8226-g1-chat-1-x~", 0) == 0);
}

BOOST_AUTO_TEST_CASE(concurrent_first_use_creates_one_session) {
  core_fixture f;
  caf::scoped_actor self{f.sys};
  constexpr int n = 200;
  for (int i = 0; i < n; ++i)
    send_exec(self, f.dir(), exec_req("workspace-a", "shared", "echo " + std::to_string(i)));
  for (int i = 0; i < n; ++i) {
    auto r = receive_exec(self);
    BOOST_REQUIRE(r.ok());
    // One session serialises its command stream in arrival order.
    BOOST_CHECK_EQUAL(r->stdout_text, std::to_string(i));
  }
  BOOST_CHECK_EQUAL(f.backend->start_count(), 1u);
}

BOOST_AUTO_TEST_CASE(slow_start_in_one_workspace_never_delays_another) {
  core_fixture f;
  auto ns_a = box_namespace("instance-a", "workspace-a");
  f.backend->hold_starts(ns_a);
  caf::scoped_actor a{f.sys};
  send_exec(a, f.dir(), exec_req("workspace-a", "global", "echo a1"));
  BOOST_REQUIRE(f.backend->wait_blocked(1, 10s));
  send_exec(a, f.dir(), exec_req("workspace-a", "global", "echo a2"));
  // Workspace B is served while A's start is held.
  auto b = f.exec("workspace-b", "global", "echo b");
  BOOST_REQUIRE(b.ok());
  BOOST_CHECK_EQUAL(b->stdout_text, "b");
  f.backend->release_starts(ns_a);
  auto r1 = receive_exec(a);
  auto r2 = receive_exec(a);
  BOOST_REQUIRE(r1.ok() && r2.ok());
  BOOST_CHECK_EQUAL(r1->stdout_text, "a1");
  BOOST_CHECK_EQUAL(r2->stdout_text, "a2");
  BOOST_CHECK_EQUAL(f.backend->start_count(), 2u);
}

BOOST_AUTO_TEST_CASE(delete_interrupts_a_running_command) {
  core_fixture f;
  caf::scoped_actor self{f.sys};
  send_exec(self, f.dir(), exec_req("workspace-a", "s1", "gate never"));
  BOOST_REQUIRE(f.backend->wait_blocked(1, 10s));
  session_request del;
  del.ctx = ctx("workspace-a");
  del.session_id = "s1";
  auto deleted = f.call<std::string>(caf::delete_atom_v, del);
  BOOST_REQUIRE(deleted.ok());
  BOOST_CHECK_EQUAL(deleted.value(), "s1");
  auto r = receive_exec(self);
  require_error(r, ec::session_not_found, "session s1 is being deleted");
  BOOST_CHECK_EQUAL(f.backend->stop_count(), 1u);
}

BOOST_AUTO_TEST_CASE(delete_right_after_an_exec_never_waits_for_a_command_that_has_not_started) {
  // The stop can reach the session while its exec job is still on the way to the
  // backend; the command must end anyway. Repeated to catch the narrow window.
  core_fixture f;
  caf::scoped_actor self{f.sys};
  for (int i = 0; i < 100; ++i) {
    auto id = "s" + std::to_string(i);
    send_exec(self, f.dir(), exec_req("workspace-a", id, "gate never"));
    session_request del{ctx("workspace-a"), id, {}};
    bool deleted = false;
    self->request(f.dir(), std::chrono::seconds{10}, caf::delete_atom_v, del)
      .receive([&](std::string&) { deleted = true; }, [&](caf::error&) {});
    BOOST_REQUIRE_MESSAGE(deleted, "delete of " + id + " did not finish");
    auto r = receive_exec(self);
    BOOST_REQUIRE(!r.ok());
  }
}

// Found by the soak (benchmarks/soak.cpp): a client that queued commands and left had
// them all run later, so reconnecting could pile up work without bound.
BOOST_AUTO_TEST_CASE(commands_queued_by_a_requester_that_is_gone_never_start) {
  core_fixture f;
  caf::scoped_actor self{f.sys};
  send_exec(self, f.dir(), exec_req("workspace-a", "s1", "gate first"));
  BOOST_REQUIRE(f.backend->wait_blocked(1, 10s));
  {
    caf::scoped_actor gone{f.sys};
    for (int i = 0; i < 5; ++i)
      send_exec(gone, f.dir(), exec_req("workspace-a", "s1", "echo late"));
    // Queued behind the blocked command: the session answers a get only after it has
    // taken every earlier message of this requester's path.
    session_request get{ctx("workspace-a"), "s1", {}};
    gone->request(f.dir(), 10s, caf::get_atom_v, get).receive([](session_info&) {}, [](caf::error&) {});
  }
  // A live requester's command queued after them still runs.
  send_exec(self, f.dir(), exec_req("workspace-a", "s1", "echo kept"));
  f.backend->release_gate("first");
  BOOST_REQUIRE(receive_exec(self).ok());
  auto kept = receive_exec(self);
  BOOST_REQUIRE(kept.ok());
  BOOST_CHECK_EQUAL(kept.value().stdout_text, "kept");
  BOOST_CHECK_EQUAL(f.backend->exec_count(), 2u);
}

BOOST_AUTO_TEST_CASE(timed_out_exec_ends_its_session) {
  core_fixture f;
  auto r = f.exec("workspace-a", "s1", "timeout");
  BOOST_REQUIRE(r.ok());
  BOOST_CHECK(r->status == exec_status::timed_out);
  BOOST_CHECK_EQUAL(f.backend->stop_count(), 1u);
  auto again = f.exec("workspace-a", "s1", "echo fresh");
  BOOST_REQUIRE(again.ok());
  BOOST_CHECK_EQUAL(f.backend->start_count(), 2u);
}

BOOST_AUTO_TEST_CASE(the_timeout_ceiling_clamps_in_standard_mode_too) {
  core_fixture::options o;
  o.limits.max_timeout_sec = 2;
  core_fixture f{o};
  // First use (the slow path) and a warm session (the fast path), and a deadline far
  // beyond any clock.
  for (int64_t asked : {int64_t{5}, int64_t{5}, std::numeric_limits<int64_t>::max()}) {
    auto req = exec_req("workspace-a", "s1", "timeout_sec");
    req.spec.timeout_sec = asked;
    auto r = f.call<exec_result>(exec_atom_v, req);
    BOOST_REQUIRE(r.ok());
    BOOST_TEST(r->stdout_text == "2");
  }
  BOOST_TEST(f.backend->start_count() == 1u);
}

BOOST_AUTO_TEST_CASE(dead_sandbox_is_replaced_before_the_next_command) {
  core_fixture f;
  BOOST_REQUIRE(f.exec("workspace-a", "s1", "die").ok());
  auto r = f.exec("workspace-a", "s1", "echo after");
  BOOST_REQUIRE(r.ok());
  BOOST_CHECK_EQUAL(r->stdout_text, "after");
  BOOST_CHECK_EQUAL(f.backend->start_count(), 2u);
}

BOOST_AUTO_TEST_CASE(rpc_semantics_create_exec_list_delete_conflict) {
  // AC-45.
  core_fixture f;
  exec_request create = exec_req("workspace-a", "shared", "");
  auto info = f.call<session_info>(create_atom_v, create);
  BOOST_REQUIRE(info.ok());
  BOOST_CHECK_EQUAL(info->session_id, "shared");
  BOOST_CHECK(!info->backend_session_id.empty());
  BOOST_REQUIRE(f.exec("workspace-a", "shared", "echo x").ok());
  auto list = f.call<std::vector<session_info>>(list_atom_v, ctx("workspace-a"));
  BOOST_REQUIRE(list.ok());
  BOOST_REQUIRE_EQUAL(list->size(), 1u);
  BOOST_CHECK_EQUAL(list->front().session_id, "shared");
  auto conflict = exec_req("workspace-a", "shared", "echo y");
  conflict.spec.network = network_mode::on;
  require_error(f.call<exec_result>(exec_atom_v, conflict), ec::session_conflict,
                "Box session shared already exists with network=off");
  auto cpus = exec_req("workspace-a", "shared", "echo y");
  cpus.spec.cpus = 2.0;
  require_error(f.call<exec_result>(exec_atom_v, cpus), ec::session_conflict,
                "Box session shared already exists with cpus=1.0");
  session_request del{ctx("workspace-a"), "shared", {}};
  BOOST_REQUIRE(f.call<std::string>(caf::delete_atom_v, del).ok());
  session_request missing{ctx("workspace-a"), "nope", {}};
  require_error(f.call<std::string>(caf::delete_atom_v, missing), ec::session_not_found,
                "session nope not found");
  require_error(f.call<session_info>(caf::get_atom_v, missing), ec::session_not_found,
                "session nope not found");
  auto empty = f.call<std::vector<session_info>>(list_atom_v, ctx("workspace-a"));
  BOOST_REQUIRE(empty.ok());
  BOOST_CHECK(empty->empty());
}

BOOST_AUTO_TEST_CASE(generation_advance_retires_old_sessions_and_fences_old_contexts) {
  // AC-44.
  core_fixture f;
  BOOST_REQUIRE(f.exec("workspace-a", "shared", "echo g1", 1).ok());
  BOOST_REQUIRE(f.exec("workspace-a", "shared", "echo g2", 2).ok());
  BOOST_CHECK_EQUAL(f.backend->start_count(), 2u);
  BOOST_CHECK_EQUAL(f.backend->stop_count(), 1u);
  auto started = f.backend->started_specs();
  BOOST_CHECK(started[0].session_id != started[1].session_id);
  auto list = f.call<std::vector<session_info>>(list_atom_v, ctx("workspace-a", 2));
  BOOST_REQUIRE(list.ok());
  BOOST_REQUIRE_EQUAL(list->size(), 1u);
  BOOST_CHECK_EQUAL(list->front().session_id, "shared");
  require_error(f.exec("workspace-a", "shared", "echo old", 1), ec::permission,
                "Stale Box placement generation");
}

BOOST_AUTO_TEST_CASE(fence_advance_answers_requests_of_the_old_generation) {
  core_fixture f;
  caf::scoped_actor self{f.sys};
  send_exec(self, f.dir(), exec_req("workspace-a", "s", "gate hold", 1));
  BOOST_REQUIRE(f.backend->wait_blocked(1, 10s));
  send_exec(self, f.dir(), exec_req("workspace-a", "s", "echo queued", 1));
  BOOST_REQUIRE(f.exec("workspace-a", "s", "echo new", 2).ok());
  require_error(receive_exec(self), ec::permission, "Stale Box placement generation");
  require_error(receive_exec(self), ec::permission, "Stale Box placement generation");
}

BOOST_AUTO_TEST_CASE(invalid_request_changes_no_state) {
  core_fixture f;
  auto bad = exec_req("workspace-a", "s", "echo x", 5);
  bad.decode_error = box_error{ec::validation, "memory_mb must be at least 32"};
  require_error(f.call<exec_result>(exec_atom_v, bad), ec::validation, "memory_mb must be at least 32");
  // The fence did not move to 5: generation 1 still works.
  BOOST_REQUIRE(f.exec("workspace-a", "s", "echo ok", 1).ok());
  BOOST_CHECK_EQUAL(f.backend->start_count(), 1u);
}

BOOST_AUTO_TEST_CASE(foreign_instance_is_refused) {
  core_fixture f;
  auto req = exec_req("workspace-a", "s", "echo x");
  req.ctx.instance_uuid = "instance-b";
  require_error(f.call<exec_result>(exec_atom_v, req), ec::permission,
                "Box action context does not match the trusted instance");
}

BOOST_AUTO_TEST_CASE(exec_without_backend_is_refused_as_unavailable) {
  core_fixture::options o;
  o.backend = false;
  core_fixture f{o};
  require_error(f.exec("workspace-a", "s", "echo x"), ec::backend_unavailable,
                "LangBot Box backend unavailable. Install and start Docker or nsjail before using exec.");
}

BOOST_AUTO_TEST_CASE(global_session_cap_is_enforced_and_freed) {
  core_fixture::options o;
  o.limits.max_sessions = 1;
  core_fixture f{o};
  BOOST_REQUIRE(f.exec("workspace-a", "s1", "echo x").ok());
  require_error(f.exec("workspace-b", "s2", "echo y"), ec::capacity_exceeded,
                "Box session capacity reached (1)");
  session_request del{ctx("workspace-a"), "s1", {}};
  BOOST_REQUIRE(f.call<std::string>(caf::delete_atom_v, del).ok());
  // The slot is released once the session actor is gone; a health round trip after
  // the delete reply orders us behind that release.
  auto h = f.call<health_info>(health_atom_v);
  BOOST_REQUIRE(h.ok());
  BOOST_CHECK_EQUAL(h->sessions, 0);
  BOOST_REQUIRE(f.exec("workspace-b", "s2", "echo y").ok());
}

BOOST_AUTO_TEST_CASE(per_workspace_session_cap_is_enforced) {
  core_fixture::options o;
  o.limits.max_sessions_per_workspace = 2;
  core_fixture f{o};
  BOOST_REQUIRE(f.exec("workspace-a", "s1", "echo x").ok());
  BOOST_REQUIRE(f.exec("workspace-a", "s2", "echo x").ok());
  require_error(f.exec("workspace-a", "s3", "echo x"), ec::capacity_exceeded,
                "Box workspace session capacity reached (2)");
  BOOST_REQUIRE(f.exec("workspace-b", "s3", "echo x").ok());
}

BOOST_AUTO_TEST_CASE(idle_workspace_records_are_evicted_when_the_table_is_full) {
  core_fixture::options o;
  o.limits.max_admission_records = 2;
  core_fixture f{o};
  BOOST_REQUIRE((f.call<status_info>(status_atom_v, ctx("ws-1")).ok()));
  BOOST_REQUIRE((f.call<status_info>(status_atom_v, ctx("ws-2")).ok()));
  // Both records are idle (generation 1, nothing held): a third workspace gets in.
  BOOST_REQUIRE((f.call<status_info>(status_atom_v, ctx("ws-3")).ok()));
  auto h = f.call<health_info>(health_atom_v);
  BOOST_REQUIRE(h.ok());
  BOOST_CHECK_EQUAL(h->workspaces, 2);
}

/// Polls the directory until `n` supervisors are alive (idle ones leave asynchronously,
/// after their idle report); false after 10 s.
bool wait_for_workspaces(core_fixture& f, int64_t n) {
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    auto h = f.call<health_info>(health_atom_v);
    if (h.ok() && h->workspaces == n)
      return true;
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

BOOST_AUTO_TEST_CASE(at_most_max_idle_workspaces_stateless_supervisors_stay) {
  core_fixture::options o;
  o.limits.max_idle_workspaces = 2;
  o.limits.max_sessions = 1;
  core_fixture f{o};
  BOOST_REQUIRE(f.exec("ws-busy", "s", "echo x").ok());
  // First uses refused at the session cap, in new workspaces: what they leave is bounded.
  for (int i = 0; i < 6; ++i)
    require_error(f.exec("ws-refused-" + std::to_string(i), "s", "echo x"),
                  ec::capacity_exceeded, "Box session capacity reached (1)");
  // The workspace with a session, and the two most recently idle.
  BOOST_REQUIRE(wait_for_workspaces(f, 3));
  // A workspace that left comes back as new on its next use.
  require_error(f.exec("ws-refused-0", "s", "echo x"), ec::capacity_exceeded,
                "Box session capacity reached (1)");
  BOOST_REQUIRE(wait_for_workspaces(f, 3));
  BOOST_REQUIRE(f.exec("ws-busy", "s", "echo y").ok());
}

BOOST_AUTO_TEST_CASE(no_stateless_supervisor_stays_with_an_idle_cache_of_zero) {
  core_fixture::options o;
  o.limits.max_idle_workspaces = 0;
  core_fixture f{o};
  for (int i = 0; i < 4; ++i)
    BOOST_REQUIRE((f.call<status_info>(status_atom_v, ctx("ws-" + std::to_string(i))).ok()));
  BOOST_REQUIRE(wait_for_workspaces(f, 0));
  // A fence above 1 is state: that supervisor stays.
  BOOST_REQUIRE((f.call<status_info>(status_atom_v, ctx("ws-fenced", 7)).ok()));
  BOOST_REQUIRE(wait_for_workspaces(f, 1));
  require_error(f.call<status_info>(status_atom_v, ctx("ws-fenced", 6)), ec::permission,
                "Stale Box placement generation");
}

BOOST_AUTO_TEST_CASE(first_uses_refused_at_the_admission_gate_leave_nothing_behind) {
  core_fixture::options o;
  o.admission = true;
  o.limits.max_idle_workspaces = 0;
  core_fixture f{o};
  for (int i = 0; i < 5; ++i)
    require_error(f.exec("ws-ungranted-" + std::to_string(i), "global", "echo x"), ec::admission,
                  "Sandbox admission grant is missing");
  BOOST_REQUIRE(wait_for_workspaces(f, 0));
}

BOOST_AUTO_TEST_CASE(a_workspace_leaves_after_its_skill_requests_not_during_them) {
  core_fixture::options o;
  o.limits.max_idle_workspaces = 0;
  core_fixture f{o};
  skill_request req;
  req.ctx = ctx("ws-skills");
  req.action = "box_list_skills";
  req.data_json = "{}";
  // Each answered: the store is not taken down under a request by an eviction.
  for (int i = 0; i < 3; ++i)
    BOOST_REQUIRE((f.call<std::string>(skill_atom_v, req).ok()));
  BOOST_REQUIRE(wait_for_workspaces(f, 0));
}

BOOST_AUTO_TEST_CASE(records_with_safety_meaning_are_kept_and_new_workspaces_refused) {
  core_fixture::options o;
  o.limits.max_admission_records = 2;
  core_fixture f{o};
  // A session, and a fence generation above 1: neither record may be dropped.
  BOOST_REQUIRE(f.exec("ws-1", "s", "echo x").ok());
  BOOST_REQUIRE((f.call<status_info>(status_atom_v, ctx("ws-2", 7)).ok()));
  require_error(f.call<status_info>(status_atom_v, ctx("ws-3")), ec::capacity_exceeded,
                "Box generation fence capacity reached; refusing an unbounded Workspace allocation");
  // ws-2's fence survived: generation 6 is still stale.
  require_error(f.call<status_info>(status_atom_v, ctx("ws-2", 6)), ec::permission,
                "Stale Box placement generation");
}

BOOST_AUTO_TEST_CASE(idle_non_persistent_sessions_are_reaped_after_their_ttl) {
  core_fixture::options o;
  o.limits.session_ttl_sec = 1;
  core_fixture f{o};
  auto keep = exec_req("workspace-a", "keep", "echo x");
  keep.spec.persistent = true;
  BOOST_REQUIRE(f.call<exec_result>(exec_atom_v, keep).ok());
  BOOST_REQUIRE(f.exec("workspace-a", "temp", "echo x").ok());
  // The session's own timer fires after the TTL; the test waits on the backend's record.
  BOOST_REQUIRE(f.backend->wait_stops(1, 30s));
  auto started = f.backend->started_specs();
  auto stopped = f.backend->stopped_ids();
  BOOST_REQUIRE_EQUAL(stopped.size(), 1u);
  auto list = f.call<std::vector<session_info>>(list_atom_v, ctx("workspace-a"));
  BOOST_REQUIRE(list.ok());
  BOOST_REQUIRE_EQUAL(list->size(), 1u);
  BOOST_CHECK_EQUAL(list->front().session_id, "keep");
  BOOST_CHECK(list->front().backend_session_id != stopped.front());
  // The persistent session is still the warm one.
  BOOST_REQUIRE(f.call<exec_result>(exec_atom_v, keep).ok());
  BOOST_CHECK_EQUAL(f.backend->start_count(), 2u);
}

BOOST_AUTO_TEST_CASE(a_storage_analysis_is_no_use_of_a_session) {
  // Its probe runs in the idle session but does not renew the TTL, nor count as a
  // command the supervisor forwarded: the session is still reaped on time.
  core_fixture::options o;
  o.limits.session_ttl_sec = 1;
  core_fixture f{o};
  BOOST_REQUIRE(f.exec("workspace-a", "temp", "echo x").ok());
  auto report = f.call<storage_report>(storage_atom_v, ctx("workspace-a"));
  BOOST_REQUIRE(report.ok());
  BOOST_CHECK_EQUAL(report->active_sessions, 1);
  auto keys = std::vector<std::string>{};
  for (auto& d : report->directories)
    if (d.scope == "sandbox_sessions")
      keys.push_back(d.key);
  BOOST_CHECK((keys == std::vector<std::string>{"session_workspaces", "session_caches", "session_temp"}));
  BOOST_REQUIRE(f.backend->wait_stops(1, 30s));
  BOOST_CHECK_EQUAL(f.backend->start_count(), 1u);
}

BOOST_AUTO_TEST_CASE(shutdown_stops_every_session) {
  core_fixture f;
  BOOST_REQUIRE(f.exec("workspace-a", "s1", "echo x").ok());
  BOOST_REQUIRE(f.exec("workspace-b", "s1", "echo x").ok());
  auto n = f.call<int64_t>(shutdown_atom_v);
  BOOST_REQUIRE(n.ok());
  BOOST_CHECK_EQUAL(n.value(), 2);
  BOOST_CHECK_EQUAL(f.backend->stop_count(), 2u);
}

BOOST_AUTO_TEST_CASE(changing_skill_mounts_keeps_the_warm_session) {
  core_fixture f;
  std::filesystem::create_directories(f.root / "skills" / "a");
  std::filesystem::create_directories(f.root / "skills" / "b");
  auto with = [&](const char* name) {
    auto req = exec_req("workspace-a", "s", "echo x");
    req.spec.extra_mounts.push_back(
      {(f.root / "skills" / name).string(), std::string{"/workspace/.skills/"} + name, mount_mode::rw});
    return req;
  };
  BOOST_REQUIRE(f.call<exec_result>(exec_atom_v, with("a")).ok());
  BOOST_REQUIRE(f.call<exec_result>(exec_atom_v, with("b")).ok());
  BOOST_REQUIRE(f.exec("workspace-a", "s", "echo x").ok());
  // The reference recreates the session each time (session churn); one start here.
  BOOST_CHECK_EQUAL(f.backend->start_count(), 1u);
  // Any other mount still cannot be added to a running sandbox.
  auto other = exec_req("workspace-a", "s", "echo x");
  other.spec.extra_mounts.push_back({(f.root / "skills" / "a").string(), "/data", mount_mode::ro});
  BOOST_REQUIRE(f.call<exec_result>(exec_atom_v, other).ok());
  BOOST_CHECK_EQUAL(f.backend->start_count(), 2u);
}

BOOST_AUTO_TEST_CASE(a_skill_mount_on_a_warm_session_passes_the_mount_policy) {
  // Skill mounts change per exec without a new session, so each exec checks them.
  core_fixture f;
  BOOST_REQUIRE(f.exec("workspace-a", "s", "echo x").ok());
  auto evil = exec_req("workspace-a", "s", "echo x");
  evil.spec.extra_mounts.push_back({"/etc", "/workspace/.skills/etc", mount_mode::rw});
  require_error(f.call<exec_result>(exec_atom_v, evil), ec::validation,
                "extra_mounts[0].host_path /etc is blocked for security");
  auto outside = exec_req("workspace-a", "s", "echo x");
  outside.spec.extra_mounts.push_back({"/var/tmp", "/workspace/.skills/t", mount_mode::ro});
  require_error(f.call<exec_result>(exec_atom_v, outside), ec::validation,
                "extra_mounts[0].host_path is outside allowed_mount_roots: " + f.root.string());
  BOOST_CHECK_EQUAL(f.backend->start_count(), 1u);
}

BOOST_AUTO_TEST_CASE(mounts_outside_allowed_roots_are_refused) {
  core_fixture f;
  auto req = exec_req("workspace-a", "s", "echo x");
  req.spec.host_path = "/var/tmp";
  req.spec.workdir = "/workspace";
  require_error(f.call<exec_result>(exec_atom_v, req), ec::validation,
                "host_path is outside allowed_mount_roots: " + f.root.string());
  auto extra = exec_req("workspace-a", "s2", "echo x");
  extra.spec.extra_mounts.push_back({"/etc", "/host-etc", mount_mode::ro});
  require_error(f.call<exec_result>(exec_atom_v, extra), ec::validation,
                "extra_mounts[0].host_path /etc is blocked for security");
  auto inside = exec_req("workspace-a", "s3", "echo x");
  inside.spec.host_path = (f.root / "default").string();
  BOOST_REQUIRE(f.call<exec_result>(exec_atom_v, inside).ok());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(admission_scenarios)

BOOST_AUTO_TEST_CASE(ac01_concurrent_first_use_gives_one_global_session) {
  core_fixture f{admission_opts()};
  BOOST_REQUIRE(f.call<entitlement_receipt>(entitle_atom_v, snapshot("workspace-a", 1, true)).ok());
  caf::scoped_actor self{f.sys};
  send_exec(self, f.dir(), exec_req("workspace-a", "global", "echo first"));
  send_exec(self, f.dir(), exec_req("workspace-a", "global", "echo second"));
  auto r1 = receive_exec(self);
  auto r2 = receive_exec(self);
  BOOST_REQUIRE(r1.ok() && r2.ok());
  BOOST_CHECK_EQUAL(r1->session_id, "global");
  BOOST_CHECK_EQUAL(r2->session_id, "global");
  BOOST_REQUIRE_EQUAL(f.backend->start_count(), 1u);
  auto spec = f.backend->started_specs().front();
  BOOST_CHECK(spec.persistent);
  BOOST_CHECK(spec.network == network_mode::off);
  BOOST_CHECK_EQUAL(spec.cpus, 0.5);
  BOOST_CHECK_EQUAL(spec.memory_mb, 256);
  BOOST_CHECK_EQUAL(spec.pids_limit, 64);
  BOOST_CHECK_EQUAL(spec.workspace_quota_mb, 32);
  BOOST_CHECK_EQUAL(spec.host_path, (f.root / "default" / "tenants"
                                     / box_namespace("instance-a", "workspace-a")).string());
}

BOOST_AUTO_TEST_CASE(ac02_entitlement_loss_revokes_and_closes) {
  core_fixture f{admission_opts()};
  BOOST_REQUIRE(f.call<entitlement_receipt>(entitle_atom_v, snapshot("workspace-a", 1, true)).ok());
  BOOST_REQUIRE(f.exec("workspace-a", "global", "echo x").ok());
  auto receipt = f.call<entitlement_receipt>(entitle_atom_v, snapshot("workspace-a", 2, false));
  BOOST_REQUIRE(receipt.ok());
  BOOST_CHECK_EQUAL(receipt->entitlement_revision, 2);
  // Stopped before the reply was sent.
  BOOST_CHECK_EQUAL(receipt->revoked_sessions, 1);
  BOOST_CHECK_EQUAL(f.backend->stop_count(), 1u);
  require_error(f.exec("workspace-a", "global", "echo y"), ec::entitlement_unavailable,
                "Workspace entitlement does not grant managed_sandbox");
  auto h = f.call<health_info>(health_atom_v);
  BOOST_REQUIRE(h.ok());
  BOOST_CHECK_EQUAL(h->sessions, 0);
  BOOST_CHECK_EQUAL(f.backend->start_count(), 1u);
  // A host-pushed grant at or below the tombstone can never come back.
  admission_grant g{"instance-a", "workspace-a", 1, 2, wall_now_us() + 60'000'000, 1, 0};
  require_error(f.call<grant_receipt>(grant_atom_v, g), ec::admission,
                "Sandbox admission grant revision was revoked");
}

BOOST_AUTO_TEST_CASE(ac03_two_workspaces_are_isolated) {
  core_fixture f{admission_opts()};
  BOOST_REQUIRE(f.call<entitlement_receipt>(entitle_atom_v, snapshot("workspace-a", 1, true)).ok());
  BOOST_REQUIRE(f.call<entitlement_receipt>(entitle_atom_v, snapshot("workspace-b", 1, true)).ok());
  auto a = f.exec("workspace-a", "global", "echo a");
  auto b = f.exec("workspace-b", "global", "echo b");
  BOOST_REQUIRE(a.ok() && b.ok());
  BOOST_CHECK_EQUAL(a->session_id, "global");
  BOOST_CHECK_EQUAL(b->session_id, "global");
  auto specs = f.backend->started_specs();
  BOOST_REQUIRE_EQUAL(specs.size(), 2u);
  BOOST_CHECK(specs[0].session_id != specs[1].session_id);
  BOOST_CHECK(specs[0].host_path != specs[1].host_path);
  auto h = f.call<health_info>(health_atom_v);
  BOOST_CHECK_EQUAL(h->sessions, 2);
}

BOOST_AUTO_TEST_CASE(ac05_forged_fields_never_reach_the_backend) {
  core_fixture f{admission_opts()};
  BOOST_REQUIRE(f.call<entitlement_receipt>(entitle_atom_v, snapshot("workspace-a", 1, true)).ok());
  auto plan = exec_req("workspace-a", "global", "echo x");
  plan.facts.host_controlled_keys = {"plan"};
  require_error(f.call<exec_result>(exec_atom_v, plan), ec::admission,
                "Managed sandbox policy fields are host-controlled: plan");
  auto net = exec_req("workspace-a", "global", "echo x");
  net.facts.network_not_off = true;
  net.spec.network = network_mode::on;
  require_error(f.call<exec_result>(exec_atom_v, net), ec::admission,
                "Managed sandbox network access is disabled");
  auto sid = exec_req("workspace-a", "attacker", "echo x");
  require_error(f.call<exec_result>(exec_atom_v, sid), ec::admission,
                "Managed sandbox session_id is runtime-owned");
  // A forged key wins over a validation error the decoder found.
  auto both = exec_req("workspace-a", "global", "echo x");
  both.facts.host_controlled_keys = {"backend", "max_sessions"};
  both.decode_error = box_error{ec::validation, "memory_mb must be at least 32"};
  require_error(f.call<exec_result>(exec_atom_v, both), ec::admission,
                "Managed sandbox policy fields are host-controlled: backend, max_sessions");
  BOOST_CHECK_EQUAL(f.backend->start_count(), 0u);
  auto h = f.call<health_info>(health_atom_v);
  BOOST_CHECK_EQUAL(h->sessions, 0);
}

BOOST_AUTO_TEST_CASE(ac08_ineligible_snapshot_refuses_and_revokes) {
  for (auto [feature, sessions] : {std::pair{false, 1}, std::pair{true, 0}, std::pair{true, 2}}) {
    core_fixture f{admission_opts()};
    auto s = snapshot("workspace-a", 7, true);
    s.features["managed_sandbox"] = feature;
    s.limits["managed_sandbox_sessions"] = sessions;
    s.fingerprint = canonical_json(s);
    auto receipt = f.call<entitlement_receipt>(entitle_atom_v, s);
    BOOST_REQUIRE(receipt.ok());
    auto r = f.exec("workspace-a", "global", "echo x");
    BOOST_REQUIRE(!r.ok());
    BOOST_CHECK(r.error().code == ec::entitlement_unavailable);
    admission_grant g{"instance-a", "workspace-a", 1, 7, wall_now_us() + 60'000'000, 1, 0};
    require_error(f.call<grant_receipt>(grant_atom_v, g), ec::admission,
                  "Sandbox admission grant revision was revoked");
    BOOST_CHECK_EQUAL(f.backend->start_count(), 0u);
  }
}

BOOST_AUTO_TEST_CASE(ac11_cancelled_snapshot_refuses_and_revokes_at_its_revision) {
  core_fixture f{admission_opts()};
  BOOST_REQUIRE(f.call<entitlement_receipt>(entitle_atom_v, snapshot("workspace-a", 7, true)).ok());
  BOOST_REQUIRE(f.exec("workspace-a", "global", "echo x").ok());
  auto receipt = f.call<entitlement_receipt>(
    entitle_atom_v, snapshot("workspace-a", 8, true, entitlement_status::cancelled));
  BOOST_REQUIRE(receipt.ok());
  BOOST_CHECK_EQUAL(receipt->revoked_sessions, 1);
  require_error(f.exec("workspace-a", "global", "echo x"), ec::entitlement_unavailable,
                "Workspace entitlement is not active");
  admission_grant g{"instance-a", "workspace-a", 1, 8, wall_now_us() + 60'000'000, 1, 0};
  require_error(f.call<grant_receipt>(grant_atom_v, g), ec::admission,
                "Sandbox admission grant revision was revoked");
}

BOOST_AUTO_TEST_CASE(resolver_rules_refuse_rollback_equivocation_and_scope) {
  // AC-15 .. AC-17 through the actors.
  core_fixture f{admission_opts()};
  BOOST_REQUIRE(f.call<entitlement_receipt>(entitle_atom_v, snapshot("workspace-a", 7, true)).ok());
  require_error(f.call<entitlement_receipt>(entitle_atom_v, snapshot("workspace-a", 6, true)),
                ec::entitlement_unavailable, "Workspace entitlement revision rolled back");
  auto other = snapshot("workspace-a", 7, true);
  other.features["extra"] = true;
  other.fingerprint = canonical_json(other);
  require_error(f.call<entitlement_receipt>(entitle_atom_v, other), ec::entitlement_unavailable,
                "Workspace entitlement revision has conflicting contents");
  auto foreign = snapshot("workspace-a", 8, true);
  foreign.instance_uuid = "instance-b";
  require_error(f.call<entitlement_receipt>(entitle_atom_v, foreign), ec::entitlement_unavailable,
                "Entitlement scope does not match the Workspace execution context");
  // Weakness 9: an old cancelled snapshot replayed cannot lock out the current one.
  require_error(f.call<entitlement_receipt>(
                  entitle_atom_v, snapshot("workspace-a", 5, true, entitlement_status::cancelled)),
                ec::entitlement_unavailable, "Workspace entitlement revision rolled back");
  BOOST_REQUIRE(f.exec("workspace-a", "global", "echo still-admitted").ok());
}

BOOST_AUTO_TEST_CASE(revision_floor_of_the_context_is_enforced) {
  core_fixture f{admission_opts()};
  BOOST_REQUIRE(f.call<entitlement_receipt>(entitle_atom_v, snapshot("workspace-a", 7, true)).ok());
  auto req = exec_req("workspace-a", "global", "echo x");
  req.ctx.entitlement_revision = 8;
  require_error(f.call<exec_result>(exec_atom_v, req), ec::entitlement_unavailable,
                "Workspace entitlement revision rolled back");
  req.ctx.entitlement_revision = 7;
  BOOST_REQUIRE(f.call<exec_result>(exec_atom_v, req).ok());
}

BOOST_AUTO_TEST_CASE(host_pushed_grants_admit_a_workspace_without_snapshot) {
  core_fixture f{admission_opts()};
  require_error(f.exec("workspace-a", "global", "echo x"), ec::admission,
                "Sandbox admission grant is missing");
  admission_grant g{"instance-a", "workspace-a", 1, 3, wall_now_us() + 60'000'000, 1, 0};
  auto receipt = f.call<grant_receipt>(grant_atom_v, g);
  BOOST_REQUIRE(receipt.ok());
  BOOST_CHECK_EQUAL(receipt->entitlement_revision, 3);
  BOOST_REQUIRE(f.exec("workspace-a", "global", "echo x").ok());
  admission_revocation rev{"instance-a", "workspace-a", 3};
  auto revoked = f.call<revocation_receipt>(revoke_atom_v, rev);
  BOOST_REQUIRE(revoked.ok());
  BOOST_CHECK_EQUAL(f.backend->stop_count(), 1u);
  require_error(f.exec("workspace-a", "global", "echo x"), ec::admission,
                "Sandbox admission grant is missing");
}

BOOST_AUTO_TEST_CASE(readiness_failure_refuses_admitted_execs) {
  core_fixture::options o = admission_opts();
  o.ready_keys = std::vector<std::string>{"resource_limits", "namespace_isolation",
                                          "mount_isolation", "network_isolation"};
  core_fixture f{o};
  BOOST_REQUIRE(f.call<entitlement_receipt>(entitle_atom_v, snapshot("workspace-a", 1, true)).ok());
  // Requests wait for the first background probe, so its verdict is already known.
  require_error(f.exec("workspace-a", "global", "echo x"), ec::readiness,
                "Managed sandbox isolation is not ready (failed checks: hard_workspace_quota, "
                "hard_skill_storage_quota, bounded_ephemeral_storage, inode_quota)");
  BOOST_CHECK_EQUAL(f.backend->start_count(), 0u);
  // box_status is never admission-gated.
  BOOST_REQUIRE((f.call<status_info>(status_atom_v, ctx("workspace-a")).ok()));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(settings_snapshot_suite)

BOOST_AUTO_TEST_CASE(the_directory_publishes_its_settings_after_the_first_probe_and_each_init) {
  core_fixture f;
  // A health answer comes only after the first probe, which published the settings.
  auto h = f.call<health_info>(health_atom_v);
  BOOST_REQUIRE(h.ok());
  auto s = f.snapshot->get();
  BOOST_REQUIRE(s != nullptr);
  BOOST_TEST(s->probed);
  BOOST_TEST((s->config == h->settings.config));
  BOOST_TEST(s->backend_name == "scripted");
  // box_init changes the config: the snapshot has it before the init is answered.
  auto next = f.config;
  next.limits.max_rpc_file_bytes = 4096;
  BOOST_REQUIRE(f.call<bool>(init_atom_v, next).ok());
  BOOST_CHECK_EQUAL(f.snapshot->get()->config.limits.max_rpc_file_bytes, 4096);
}

BOOST_AUTO_TEST_SUITE_END()

// box_init names a backend (protocol.md §4.10.1): selected again while no session exists,
// with the readiness of the new one before the reply.
BOOST_AUTO_TEST_SUITE(backend_selection)

namespace {

struct selection_fixture {
  std::shared_ptr<std::atomic<int>> calls = std::make_shared<std::atomic<int>>(0);
  core_fixture f{[this] {
    core_fixture::options o;
    o.backend = false;  // unavailable at start, as a missing bwrap is
    o.select = [calls = calls](const box_config& c, const backend_ptr&) {
      ++*calls;
      if (c.backend != "scripted")
        return backend_pick{nullptr, c.backend, "no " + c.backend + " in this test"};
      return backend_pick{std::make_shared<scripted_backend>(c.scripted), "scripted", ""};
    };
    return o;
  }()};
};

} // namespace

BOOST_FIXTURE_TEST_CASE(box_init_selects_the_named_backend_before_it_replies, selection_fixture) {
  auto h = f.call<health_info>(health_atom_v);
  BOOST_REQUIRE(h.ok());
  BOOST_TEST(!h->settings.backend_available);
  BOOST_REQUIRE(!f.exec("workspace-a", "s1", "echo x").ok());
  auto next = f.config;
  next.backend = "scripted";
  BOOST_REQUIRE(f.call<bool>(init_atom_v, next).ok());
  BOOST_TEST(calls->load() == 1);
  // The reply came after the new backend's readiness: no wait for a background probe.
  auto s = f.snapshot->get();
  BOOST_TEST(s->backend_name == "scripted");
  BOOST_TEST(s->backend_available);
  auto r = f.exec("workspace-a", "s1", "echo x");
  BOOST_REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string{} : r.error().message));
  BOOST_TEST(r->backend_name == "scripted");
}

BOOST_FIXTURE_TEST_CASE(a_session_keeps_its_backend_through_box_init, selection_fixture) {
  auto next = f.config;
  next.backend = "scripted";
  BOOST_REQUIRE(f.call<bool>(init_atom_v, next).ok());
  BOOST_REQUIRE(f.exec("workspace-a", "s1", "echo x").ok());
  // A session exists: naming another backend selects nothing.
  auto other = next;
  other.backend = "process";
  BOOST_REQUIRE(f.call<bool>(init_atom_v, other).ok());
  BOOST_TEST(calls->load() == 1);
  BOOST_TEST(f.snapshot->get()->backend_name == "scripted");
  auto r = f.exec("workspace-a", "s1", "echo y");
  BOOST_REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string{} : r.error().message));
  BOOST_TEST(r->backend_name == "scripted");
}

BOOST_FIXTURE_TEST_CASE(the_same_backend_named_again_is_kept, selection_fixture) {
  auto next = f.config;
  next.backend = "scripted";
  BOOST_REQUIRE(f.call<bool>(init_atom_v, next).ok());
  next.limits.max_rpc_file_bytes = 4096;
  BOOST_REQUIRE(f.call<bool>(init_atom_v, next).ok());
  BOOST_TEST(calls->load() == 1);
}

BOOST_AUTO_TEST_SUITE_END()
