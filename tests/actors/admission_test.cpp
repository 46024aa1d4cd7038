// The admission plane of one workspace without actors: fence, forged fields, snapshots,
// the entitlement gate, grants, revocations, expiry and spec normalisation.
#include <boost/test/unit_test.hpp>

#include <string>
#include <string_view>

#include "actors/admission.hpp"

using namespace boxrt;

namespace {

constexpr int64_t sec = 1'000'000;

/// "<WireClass>: <text>", or "ok" for an empty error: one comparison checks both.
std::string describe(const box_error& e) {
  if (!e)
    return "ok";
  return std::string{wire_class(e.code)} + ": " + e.message;
}

template <class T>
std::string describe(const result<T>& r) {
  return r.ok() ? std::string{"ok"} : describe(r.error());
}

std::string_view name(session_effect e) {
  switch (e) {
    case session_effect::none:
      return "none";
    case session_effect::stop_all:
      return "stop_all";
    case session_effect::stop_non_canonical:
      return "stop_non_canonical";
  }
  return "?";
}

constexpr const char* instance_a = "instance-a";
constexpr const char* workspace_a = "workspace-a";
constexpr const char* tenant = "/data/box/default/tenants/ws-695136eeae1cb9b6af4a8226";

/// The AC-06/AC-07 Cloud policy: required, global, 1/0, TTL 300, max timeout 60.
admission_policy cloud_policy() {
  admission_policy p;
  p.required = true;
  p.max_grant_ttl_sec = 300;
  p.max_timeout_sec = 60;
  p.cpus = 0.5;
  p.memory_mb = 256;
  p.pids_limit = 64;
  p.read_only_rootfs = true;
  p.workspace_quota_mb = 32;
  p.readiness_cache_sec = 0;
  return p;
}

box_config admission_config() {
  box_config c;
  c.admission = cloud_policy();
  c.local.default_workspace = "/data/box/default";
  return c;
}

/// An eligible snapshot; the fingerprint stands in for the canonical JSON.
entitlement_snapshot snapshot(int64_t revision, int64_t not_before = 1,
                              int64_t expires_at = 2000) {
  entitlement_snapshot s;
  s.instance_uuid = instance_a;
  s.workspace_uuid = workspace_a;
  s.entitlement_revision = revision;
  s.status = entitlement_status::active;
  s.not_before = not_before;
  s.expires_at = expires_at;
  s.features["managed_sandbox"] = true;
  s.limits["managed_sandbox_sessions"] = 1;
  s.fingerprint = "rev=" + std::to_string(revision) + ";eligible";
  return s;
}

entitlement_snapshot with_status(entitlement_snapshot s, entitlement_status status,
                                 std::string tag) {
  s.status = status;
  s.fingerprint += ";" + tag;
  return s;
}

action_context context(int64_t generation, int64_t revision = -1) {
  action_context ctx;
  ctx.instance_uuid = instance_a;
  ctx.workspace_uuid = workspace_a;
  ctx.placement_generation = generation;
  ctx.entitlement_revision = revision;
  return ctx;
}

admission_grant grant(int64_t revision, int64_t generation, int64_t expires_us,
                      int64_t sessions = 1, int64_t processes = 0) {
  admission_grant g;
  g.instance_uuid = instance_a;
  g.workspace_uuid = workspace_a;
  g.execution_generation = generation;
  g.entitlement_revision = revision;
  g.expires_at = expires_us;
  g.max_sessions = sessions;
  g.max_managed_processes = processes;
  return g;
}

admission_revocation revocation(int64_t revision) {
  admission_revocation r;
  r.instance_uuid = instance_a;
  r.workspace_uuid = workspace_a;
  r.entitlement_revision = revision;
  return r;
}

struct admission_fixture {
  workspace_admission adm{instance_a, workspace_a};
  box_config config = admission_config();
  admission_policy policy = cloud_policy();
  int64_t now = 1000 * sec;

  /// Runs the entitlement gate and returns "<error>/<effect>".
  std::string gate(const action_context& ctx, int64_t at) {
    session_effect effect = session_effect::stop_non_canonical;
    auto err = adm.check_entitlement(ctx, policy, at, effect);
    return describe(err) + " / " + std::string{name(effect)};
  }

  grant_receipt install(const admission_grant& g) {
    auto r = adm.upsert_grant(g, config, now);
    BOOST_REQUIRE_MESSAGE(r.ok(), describe(r));
    return r->receipt;
  }
};

} // namespace

// -- identity and paths ---------------------------------------------------------------

BOOST_AUTO_TEST_SUITE(admission_identity)

BOOST_AUTO_TEST_CASE(workspace_namespace_matches_the_reference_example) {
  workspace_admission adm{instance_a, workspace_a};
  BOOST_TEST(adm.instance_uuid() == instance_a);
  BOOST_TEST(adm.workspace_uuid() == workspace_a);
  BOOST_TEST(adm.box_ns() == "ws-695136eeae1cb9b6af4a8226");
}

BOOST_AUTO_TEST_CASE(normalize_path_collapses_slashes_dots_and_parents) {
  BOOST_TEST(normalize_path("/data//box/./default/") == "/data/box/default");
  BOOST_TEST(normalize_path("/data/box/../other") == "/data/other");
  BOOST_TEST(normalize_path("/../..") == "/");
  BOOST_TEST(normalize_path("/") == "/");
  BOOST_TEST(normalize_path("//") == "/");
  BOOST_TEST(normalize_path("/workspace/../etc") == "/etc");
  BOOST_TEST(normalize_path("a/./b/../../..") == "..");
  BOOST_TEST(normalize_path("") == "");
}

BOOST_AUTO_TEST_CASE(tenant_path_is_default_workspace_tenants_namespace) {
  box_config c;
  c.local.default_workspace = "/data/box//default/";
  BOOST_TEST(tenant_workspace_path(c, "ws-695136eeae1cb9b6af4a8226") == tenant);
}

BOOST_AUTO_TEST_CASE(tenant_path_is_empty_without_default_workspace) {
  box_config c;
  BOOST_TEST(tenant_workspace_path(c, "ws-695136eeae1cb9b6af4a8226") == "");
}

BOOST_AUTO_TEST_SUITE_END()

// -- generation fence -----------------------------------------------------------------

BOOST_FIXTURE_TEST_SUITE(admission_fence, admission_fixture)

BOOST_AUTO_TEST_CASE(first_observation_sets_the_fence_without_advancing) {
  BOOST_TEST(adm.generation() == 0);
  BOOST_TEST(!adm.observe_generation(3));
  BOOST_TEST(adm.generation() == 3);
}

BOOST_AUTO_TEST_CASE(higher_generation_advances_the_fence) {
  adm.observe_generation(1);
  BOOST_TEST(adm.observe_generation(2));
  BOOST_TEST(adm.generation() == 2);
}

BOOST_AUTO_TEST_CASE(equal_or_lower_generation_leaves_the_fence) {
  adm.observe_generation(4);
  BOOST_TEST(!adm.observe_generation(4));
  BOOST_TEST(!adm.observe_generation(2));
  BOOST_TEST(adm.generation() == 4);
}

BOOST_AUTO_TEST_CASE(older_generation_is_stale_and_changes_nothing) {
  adm.observe_generation(4);
  BOOST_TEST(describe(adm.check_generation(3))
             == "PermissionError: Stale Box placement generation");
  BOOST_TEST(describe(adm.check_generation(4)) == "ok");
  BOOST_TEST(describe(adm.check_generation(5)) == "ok");
  BOOST_TEST(adm.generation() == 4);
}

BOOST_AUTO_TEST_CASE(any_generation_passes_an_unset_fence) {
  BOOST_TEST(describe(adm.check_generation(1)) == "ok");
}

BOOST_AUTO_TEST_SUITE_END()

// -- forged fields --------------------------------------------------------------------

BOOST_AUTO_TEST_SUITE(admission_forged_fields)

BOOST_AUTO_TEST_CASE(clean_payload_passes) {
  payload_facts f;
  BOOST_TEST(describe(workspace_admission::check_forged_fields(f, tenant)) == "ok");
}

BOOST_AUTO_TEST_CASE(host_controlled_keys_are_listed_sorted) {
  payload_facts f;
  f.host_controlled_keys = {"plan", "backend", "max_sessions"};
  f.network_not_off = true;
  BOOST_TEST(describe(workspace_admission::check_forged_fields(f, tenant))
             == "BoxAdmissionError: Managed sandbox policy fields are host-controlled: "
                "backend, max_sessions, plan");
}

BOOST_AUTO_TEST_CASE(foreign_session_id_is_runtime_owned) {
  payload_facts f;
  f.has_session_id = true;
  f.session_id = "attacker";
  f.network_not_off = true;
  BOOST_TEST(describe(workspace_admission::check_forged_fields(f, tenant))
             == "BoxAdmissionError: Managed sandbox session_id is runtime-owned");
}

BOOST_AUTO_TEST_CASE(global_or_blank_session_id_is_allowed) {
  payload_facts f;
  f.has_session_id = true;
  f.session_id = "global";
  BOOST_TEST(describe(workspace_admission::check_forged_fields(f, tenant)) == "ok");
  f.session_id = "  ";
  BOOST_TEST(describe(workspace_admission::check_forged_fields(f, tenant)) == "ok");
}

BOOST_AUTO_TEST_CASE(network_other_than_off_is_disabled) {
  payload_facts f;
  f.network_not_off = true;
  BOOST_TEST(describe(workspace_admission::check_forged_fields(f, tenant))
             == "BoxAdmissionError: Managed sandbox network access is disabled");
}

BOOST_AUTO_TEST_CASE(extra_mounts_are_left_to_the_read_only_rules) {
  // langbot-plugin 0.7.13 admits read-only mounts: the raw payload check leaves them
  // to normalize, which reports the rules' outcome after host_path.
  payload_facts f;
  BOOST_TEST(describe(workspace_admission::check_forged_fields(f, tenant)) == "ok");
}

BOOST_AUTO_TEST_CASE(mount_path_other_than_workspace_is_runtime_owned) {
  payload_facts f;
  f.mount_path = "/mnt";
  f.host_path = "/etc";
  BOOST_TEST(describe(workspace_admission::check_forged_fields(f, tenant))
             == "BoxAdmissionError: Managed sandbox mount_path is runtime-owned");
  f = {};
  f.mount_path = "/workspace";
  BOOST_TEST(describe(workspace_admission::check_forged_fields(f, tenant)) == "ok");
}

BOOST_AUTO_TEST_CASE(foreign_host_path_is_runtime_owned) {
  payload_facts f;
  f.host_path = "/etc";
  f.timeout_not_int = true;
  BOOST_TEST(describe(workspace_admission::check_forged_fields(f, tenant))
             == "BoxAdmissionError: Managed sandbox host_path is runtime-owned");
}

BOOST_AUTO_TEST_CASE(host_path_without_tenant_path_is_runtime_owned) {
  payload_facts f;
  f.host_path = tenant;
  BOOST_TEST(describe(workspace_admission::check_forged_fields(f, ""))
             == "BoxAdmissionError: Managed sandbox host_path is runtime-owned");
}

BOOST_AUTO_TEST_CASE(own_tenant_path_is_accepted_after_normalisation) {
  payload_facts f;
  f.host_path = "/data/box//default/./tenants/ws-695136eeae1cb9b6af4a8226/";
  BOOST_TEST(describe(workspace_admission::check_forged_fields(f, tenant)) == "ok");
}

BOOST_AUTO_TEST_CASE(non_integer_timeout_is_a_validation_error) {
  payload_facts f;
  f.timeout_not_int = true;
  BOOST_TEST(describe(workspace_admission::check_forged_fields(f, tenant))
             == "BoxValidationError: timeout_sec must be an integer");
}

BOOST_AUTO_TEST_CASE(logical_session_must_be_the_policy_global) {
  auto p = cloud_policy();
  BOOST_TEST(describe(workspace_admission::check_logical_session(" global ", p)) == "ok");
  BOOST_TEST(describe(workspace_admission::check_logical_session("other", p))
             == "BoxAdmissionError: Managed sandbox session_id is runtime-owned");
  BOOST_TEST(describe(workspace_admission::check_logical_session("", p))
             == "BoxAdmissionError: Managed sandbox session_id is runtime-owned");
}

BOOST_AUTO_TEST_SUITE_END()

// -- Cloud policy ---------------------------------------------------------------------

BOOST_AUTO_TEST_SUITE(admission_cloud_policy)

BOOST_AUTO_TEST_CASE(ac06_zero_quota_is_refused_and_32_is_valid) {
  auto p = cloud_policy();
  p.workspace_quota_mb = 0;
  BOOST_TEST(describe(validate_required_policy(p))
             == "BoxAdmissionError: Cloud Box sandbox workspace quota must be a positive "
                "integer");
  p.workspace_quota_mb = 32;
  BOOST_TEST(describe(validate_required_policy(p)) == "ok");
  BOOST_TEST(p.workspace_quota_mb == 32);
}

BOOST_AUTO_TEST_CASE(policy_must_be_required_first) {
  admission_policy p;  // defaults: not required, quota 0
  BOOST_TEST(describe(validate_required_policy(p))
             == "BoxAdmissionError: Cloud Box sandbox admission must be required");
}

BOOST_AUTO_TEST_CASE(policy_session_must_be_global) {
  auto p = cloud_policy();
  p.logical_session_id = "shared";
  p.required_backend = "docker";
  BOOST_TEST(describe(validate_required_policy(p))
             == "BoxAdmissionError: Cloud Box sandbox session ID must be global");
}

BOOST_AUTO_TEST_CASE(policy_backend_must_be_bwrap_or_nsjail) {
  auto p = cloud_policy();
  p.required_backend = "docker";
  p.max_sessions = 2;
  BOOST_TEST(describe(validate_required_policy(p))
             == "BoxAdmissionError: Cloud Box sandbox backend must be bwrap or nsjail");
  p = cloud_policy();
  p.required_backend = "nsjail";
  BOOST_TEST(describe(validate_required_policy(p)) == "ok");
  p.required_backend = "bwrap";
  BOOST_TEST(describe(validate_required_policy(p)) == "ok");
}

BOOST_AUTO_TEST_CASE(policy_must_allow_one_session_and_no_processes) {
  auto expected = std::string{"BoxAdmissionError: Cloud Box sandbox policy must allow one "
                              "session and zero managed processes"};
  auto p = cloud_policy();
  p.max_sessions = 0;
  p.max_grant_ttl_sec = 301;
  BOOST_TEST(describe(validate_required_policy(p)) == expected);
  p = cloud_policy();
  p.max_managed_processes = 1;
  BOOST_TEST(describe(validate_required_policy(p)) == expected);
}

BOOST_AUTO_TEST_CASE(policy_grant_ttl_must_not_exceed_300_seconds) {
  auto p = cloud_policy();
  p.max_grant_ttl_sec = 301;
  p.workspace_quota_mb = 0;
  BOOST_TEST(describe(validate_required_policy(p))
             == "BoxAdmissionError: Cloud Box sandbox admission grant TTL must not exceed "
                "300 seconds");
  p.max_grant_ttl_sec = 300;
  p.workspace_quota_mb = 1;
  BOOST_TEST(describe(validate_required_policy(p)) == "ok");
}

BOOST_AUTO_TEST_SUITE_END()

// -- entitlement snapshots ------------------------------------------------------------

BOOST_FIXTURE_TEST_SUITE(admission_snapshots, admission_fixture)

BOOST_AUTO_TEST_CASE(ac13_active_snapshot_is_accepted_and_grants) {
  auto r = adm.put_snapshot(snapshot(7, 100, 200), 150);
  BOOST_REQUIRE_MESSAGE(r.ok(), describe(r));
  BOOST_TEST(r->receipt.workspace_uuid == workspace_a);
  BOOST_TEST(r->receipt.entitlement_revision == 7);
  BOOST_TEST(r->receipt.revoked_sessions == 0);
  BOOST_TEST(name(r->effect) == "none");
  BOOST_TEST(adm.has_snapshot());
  BOOST_TEST(adm.snapshot()->entitlement_revision == 7);
  BOOST_TEST(adm.tombstone() == 0);
  BOOST_TEST(gate(context(1), 150 * sec) == "ok / none");
}

BOOST_AUTO_TEST_CASE(ac14_suspended_snapshot_is_stored_and_revokes) {
  auto r = adm.put_snapshot(
    with_status(snapshot(7, 100, 200), entitlement_status::suspended, "suspended"), 150);
  BOOST_REQUIRE_MESSAGE(r.ok(), describe(r));
  BOOST_TEST(name(r->effect) == "stop_all");
  BOOST_TEST(adm.tombstone() == 7);
  BOOST_TEST(adm.highest_revision() == 7);
  BOOST_TEST(adm.has_snapshot());
  BOOST_TEST(gate(context(1), 150 * sec)
             == "EntitlementUnavailableError: Workspace entitlement is not active / stop_all");
}

BOOST_AUTO_TEST_CASE(ac14_snapshot_before_not_before_revokes) {
  auto r = adm.put_snapshot(snapshot(7, 100, 200), 99);
  BOOST_REQUIRE_MESSAGE(r.ok(), describe(r));
  BOOST_TEST(name(r->effect) == "stop_all");
  BOOST_TEST(adm.tombstone() == 7);
  BOOST_TEST(gate(context(1), 99 * sec)
             == "EntitlementUnavailableError: Workspace entitlement is not currently valid "
                "/ stop_all");
}

BOOST_AUTO_TEST_CASE(ac14_snapshot_expiry_is_exclusive) {
  auto r = adm.put_snapshot(snapshot(7, 100, 200), 200);
  BOOST_REQUIRE_MESSAGE(r.ok(), describe(r));
  BOOST_TEST(name(r->effect) == "stop_all");
  BOOST_TEST(adm.tombstone() == 7);
  // One second earlier it still grants.
  workspace_admission fresh{instance_a, workspace_a};
  auto ok = fresh.put_snapshot(snapshot(7, 100, 200), 199);
  BOOST_REQUIRE(ok.ok());
  BOOST_TEST(name(ok->effect) == "none");
  BOOST_TEST(fresh.tombstone() == 0);
}

BOOST_AUTO_TEST_CASE(ac15_workspace_mismatch_is_a_scope_error) {
  auto s = snapshot(7);
  s.workspace_uuid = "workspace-b";
  auto r = adm.put_snapshot(s, 1000);
  BOOST_TEST(describe(r)
             == "EntitlementUnavailableError: Entitlement scope does not match the Workspace "
                "execution context");
  BOOST_TEST(r.error().message.find("scope") != std::string::npos);
  BOOST_TEST(!adm.has_snapshot());
}

BOOST_AUTO_TEST_CASE(instance_mismatch_is_a_scope_error) {
  auto s = with_status(snapshot(7), entitlement_status::cancelled, "cancelled");
  s.instance_uuid = "instance-b";
  auto r = adm.put_snapshot(s, 1000);
  BOOST_TEST(describe(r)
             == "EntitlementUnavailableError: Entitlement scope does not match the Workspace "
                "execution context");
  BOOST_TEST(!adm.has_snapshot());
  BOOST_TEST(adm.tombstone() == 0);
}

BOOST_AUTO_TEST_CASE(ac16_lower_revision_is_rolled_back) {
  BOOST_REQUIRE(adm.put_snapshot(snapshot(7), 1000).ok());
  auto r = adm.put_snapshot(snapshot(6), 1000);
  BOOST_TEST(describe(r)
             == "EntitlementUnavailableError: Workspace entitlement revision rolled back");
  BOOST_TEST(adm.snapshot()->entitlement_revision == 7);
}

BOOST_AUTO_TEST_CASE(ac17_same_revision_other_contents_conflicts) {
  BOOST_REQUIRE(adm.put_snapshot(snapshot(7), 1000).ok());
  auto other = snapshot(7);
  other.features["web_search"] = true;
  other.fingerprint += ";web_search";
  auto r = adm.put_snapshot(other, 1000);
  BOOST_TEST(describe(r)
             == "EntitlementUnavailableError: Workspace entitlement revision has conflicting "
                "contents");
  BOOST_TEST(adm.snapshot()->features.count("web_search") == 0u);
}

BOOST_AUTO_TEST_CASE(same_snapshot_again_is_accepted_idempotently) {
  BOOST_REQUIRE(adm.put_snapshot(snapshot(7), 1000).ok());
  BOOST_TEST(gate(context(1), now) == "ok / none");
  auto before = *adm.grant();
  auto r = adm.put_snapshot(snapshot(7), 1000);
  BOOST_REQUIRE_MESSAGE(r.ok(), describe(r));
  BOOST_TEST(name(r->effect) == "none");
  BOOST_TEST(r->receipt.entitlement_revision == 7);
  BOOST_TEST((*adm.grant() == before));
}

BOOST_AUTO_TEST_CASE(newer_revision_without_the_feature_revokes_the_grant) {
  BOOST_REQUIRE(adm.put_snapshot(snapshot(1), 1000).ok());
  BOOST_TEST(gate(context(1), now) == "ok / none");
  BOOST_REQUIRE(adm.grant().has_value());
  auto lost = snapshot(2);
  lost.features["managed_sandbox"] = false;
  lost.limits["managed_sandbox_sessions"] = 0;
  lost.fingerprint += ";lost";
  auto r = adm.put_snapshot(lost, 1000);
  BOOST_REQUIRE_MESSAGE(r.ok(), describe(r));
  BOOST_TEST(name(r->effect) == "stop_all");
  BOOST_TEST(r->receipt.entitlement_revision == 2);
  BOOST_TEST(!adm.grant().has_value());
  BOOST_TEST(adm.tombstone() == 2);
  BOOST_TEST(adm.highest_revision() == 2);
}

BOOST_AUTO_TEST_CASE(first_snapshot_that_does_not_grant_is_accepted_and_revokes) {
  auto s = snapshot(3);
  s.limits.clear();
  s.fingerprint += ";nolimit";
  auto r = adm.put_snapshot(s, 1000);
  BOOST_REQUIRE_MESSAGE(r.ok(), describe(r));
  BOOST_TEST(name(r->effect) == "stop_all");
  BOOST_TEST(adm.tombstone() == 3);
}

BOOST_AUTO_TEST_CASE(replayed_revoking_snapshot_stops_only_a_live_grant) {
  auto cancelled = with_status(snapshot(7), entitlement_status::cancelled, "cancelled");
  BOOST_REQUIRE(adm.put_snapshot(cancelled, 1000).ok());
  auto again = adm.put_snapshot(cancelled, 1000);
  BOOST_REQUIRE(again.ok());
  BOOST_TEST(name(again->effect) == "none");
  // A host-pushed grant at a newer revision, then the same cancelled snapshot again.
  install(grant(8, 1, now + 100 * sec));
  auto replay = adm.put_snapshot(cancelled, 1000);
  BOOST_REQUIRE(replay.ok());
  BOOST_TEST(name(replay->effect) == "stop_all");
  BOOST_TEST(!adm.grant().has_value());
  BOOST_TEST(adm.tombstone() == 7);
  BOOST_TEST(adm.highest_revision() == 8);
}

BOOST_AUTO_TEST_CASE(weakness9_old_cancelled_snapshot_replay_is_refused) {
  BOOST_REQUIRE(adm.put_snapshot(snapshot(8), 1000).ok());
  BOOST_TEST(gate(context(1), now) == "ok / none");
  auto held = *adm.grant();
  auto old = with_status(snapshot(7), entitlement_status::cancelled, "cancelled");
  auto r = adm.put_snapshot(old, 1000);
  BOOST_TEST(describe(r)
             == "EntitlementUnavailableError: Workspace entitlement revision rolled back");
  BOOST_TEST(adm.tombstone() == 0);
  BOOST_TEST(adm.highest_revision() == 8);
  BOOST_TEST(adm.snapshot()->entitlement_revision == 8);
  BOOST_TEST((*adm.grant() == held));
  BOOST_TEST(describe(adm.check_grant(context(1), policy, now)) == "ok");
  BOOST_TEST(gate(context(1, 8), now + sec) == "ok / none");
}

BOOST_AUTO_TEST_SUITE_END()

// -- the entitlement gate -------------------------------------------------------------

BOOST_FIXTURE_TEST_SUITE(admission_entitlement_gate, admission_fixture)

BOOST_AUTO_TEST_CASE(ac07_eligible_snapshot_derives_a_bounded_grant) {
  BOOST_REQUIRE(adm.put_snapshot(snapshot(7, 1, 2000), 1000).ok());
  BOOST_TEST(gate(context(3, 7), 1000 * sec + 250'000) == "ok / none");
  BOOST_REQUIRE(adm.grant().has_value());
  auto expected = grant(7, 3, 1300 * sec, 1, 0);
  BOOST_TEST((*adm.grant() == expected));
  BOOST_TEST(adm.grant()->expires_at == 1300 * sec);
  BOOST_TEST(adm.next_expiry_us() == 1300 * sec);
  BOOST_TEST(adm.highest_revision() == 7);
  BOOST_TEST(adm.tombstone() == 0);
  BOOST_TEST(describe(adm.check_grant(context(3), policy, 1000 * sec + 250'000)) == "ok");
}

BOOST_AUTO_TEST_CASE(derived_grant_lifetime_follows_a_shorter_policy_ttl) {
  policy.max_grant_ttl_sec = 60;
  BOOST_REQUIRE(adm.put_snapshot(snapshot(7), 1000).ok());
  BOOST_TEST(gate(context(1), now) == "ok / none");
  BOOST_TEST(adm.grant()->expires_at == 1060 * sec);
}

BOOST_AUTO_TEST_CASE(derived_grant_lifetime_never_exceeds_300_seconds) {
  policy.max_grant_ttl_sec = 900;
  BOOST_REQUIRE(adm.put_snapshot(snapshot(7), 1000).ok());
  BOOST_TEST(gate(context(1), now) == "ok / none");
  BOOST_TEST(adm.grant()->expires_at == 1300 * sec);
}

BOOST_AUTO_TEST_CASE(derived_grant_ends_with_the_snapshot) {
  BOOST_REQUIRE(adm.put_snapshot(snapshot(7, 1, 1100), 1000).ok());
  BOOST_TEST(gate(context(1), now) == "ok / none");
  BOOST_TEST(adm.grant()->expires_at == 1100 * sec);
}

BOOST_AUTO_TEST_CASE(each_admission_renews_the_derived_grant) {
  BOOST_REQUIRE(adm.put_snapshot(snapshot(7, 1, 5000), 1000).ok());
  BOOST_TEST(gate(context(1), now) == "ok / none");
  BOOST_TEST(gate(context(1), now + 100 * sec) == "ok / none");
  BOOST_TEST(adm.grant()->expires_at == 1400 * sec);
}

BOOST_AUTO_TEST_CASE(ac08_snapshot_without_the_feature_is_refused_and_revokes) {
  auto s = snapshot(7);
  s.features["managed_sandbox"] = false;
  s.fingerprint += ";nofeature";
  BOOST_REQUIRE(adm.put_snapshot(s, 1000).ok());
  BOOST_TEST(gate(context(3, 7), now)
             == "EntitlementUnavailableError: Workspace entitlement does not grant "
                "managed_sandbox / stop_all");
  BOOST_TEST(!adm.grant().has_value());
  BOOST_TEST(adm.tombstone() == 7);
}

BOOST_AUTO_TEST_CASE(ac08_zero_or_two_sessions_are_refused_and_revoke) {
  for (int64_t sessions : {0, 2}) {
    workspace_admission fresh{instance_a, workspace_a};
    auto s = snapshot(7);
    s.limits["managed_sandbox_sessions"] = sessions;
    s.fingerprint += ";sessions=" + std::to_string(sessions);
    BOOST_REQUIRE(fresh.put_snapshot(s, 1000).ok());
    session_effect effect = session_effect::none;
    auto err = fresh.check_entitlement(context(3, 7), policy, now, effect);
    BOOST_TEST(describe(err)
               == "EntitlementUnavailableError: Workspace entitlement must grant exactly one "
                  "managed sandbox session");
    BOOST_TEST(name(effect) == "stop_all");
    BOOST_TEST(!fresh.grant().has_value());
    BOOST_TEST(fresh.tombstone() == 7);
  }
}

BOOST_AUTO_TEST_CASE(snapshot_without_the_session_limit_is_refused) {
  auto s = snapshot(7);
  s.limits.clear();
  s.fingerprint += ";nolimit";
  BOOST_REQUIRE(adm.put_snapshot(s, 1000).ok());
  BOOST_TEST(gate(context(1), now)
             == "EntitlementUnavailableError: Workspace entitlement does not define limit "
                "managed_sandbox_sessions / stop_all");
}

BOOST_AUTO_TEST_CASE(ac11_cancelled_snapshot_revokes_at_its_revision) {
  BOOST_REQUIRE(adm.put_snapshot(snapshot(7), 1000).ok());
  BOOST_TEST(gate(context(1), now) == "ok / none");
  BOOST_REQUIRE(
    adm.put_snapshot(with_status(snapshot(8), entitlement_status::cancelled, "c"), 1000).ok());
  BOOST_TEST(gate(context(1), now)
             == "EntitlementUnavailableError: Workspace entitlement is not active / stop_all");
  BOOST_TEST(adm.tombstone() == 8);
  BOOST_TEST(!adm.grant().has_value());
}

BOOST_AUTO_TEST_CASE(window_closing_after_put_is_refused_and_revokes) {
  BOOST_REQUIRE(adm.put_snapshot(snapshot(7, 1, 2000), 1000).ok());
  BOOST_TEST(gate(context(1), now) == "ok / none");
  BOOST_TEST(gate(context(1), 2000 * sec)
             == "EntitlementUnavailableError: Workspace entitlement is not currently valid "
                "/ stop_all");
  BOOST_TEST(!adm.grant().has_value());
  BOOST_TEST(adm.tombstone() == 7);
}

BOOST_AUTO_TEST_CASE(context_floor_above_the_snapshot_is_rolled_back_without_revoking) {
  BOOST_REQUIRE(adm.put_snapshot(snapshot(7), 1000).ok());
  BOOST_TEST(gate(context(1), now) == "ok / none");
  auto held = *adm.grant();
  BOOST_TEST(gate(context(1, 8), now + sec)
             == "EntitlementUnavailableError: Workspace entitlement revision rolled back / "
                "none");
  BOOST_TEST((*adm.grant() == held));
  BOOST_TEST(adm.tombstone() == 0);
  BOOST_TEST(gate(context(1, 7), now + sec) == "ok / none");
  BOOST_TEST(gate(context(1, 0), now + sec) == "ok / none");
}

BOOST_AUTO_TEST_CASE(grant_that_would_expire_at_once_is_refused_without_revoking) {
  policy.max_grant_ttl_sec = 0;
  BOOST_REQUIRE(adm.put_snapshot(snapshot(7), 1000).ok());
  BOOST_TEST(gate(context(1), now)
             == "EntitlementUnavailableError: Workspace entitlement expired before sandbox "
                "admission / none");
  BOOST_TEST(!adm.grant().has_value());
  BOOST_TEST(adm.tombstone() == 0);
}

// A revocation at revision R holds against the grant a snapshot at or below R derives
// (admission.md §3.4); only a newer revision admits again. Before, the derived grant
// ignored the tombstone and the revoked workspace was admitted at once.
BOOST_AUTO_TEST_CASE(host_tombstone_blocks_a_snapshot_grant_at_or_below_it) {
  BOOST_REQUIRE(adm.revoke(revocation(9), config).ok());
  BOOST_REQUIRE(adm.put_snapshot(snapshot(7), 1000).ok());
  BOOST_TEST(gate(context(2), now)
             == "BoxAdmissionError: Sandbox admission grant revision was revoked / none");
  BOOST_TEST(!adm.grant().has_value());
  BOOST_REQUIRE(adm.put_snapshot(snapshot(9), 1000).ok());
  BOOST_TEST(gate(context(2), now)
             == "BoxAdmissionError: Sandbox admission grant revision was revoked / none");
  BOOST_TEST(!adm.grant().has_value());
  BOOST_TEST(adm.tombstone() == 9);
  // A newer revision brings access back.
  BOOST_REQUIRE(adm.put_snapshot(snapshot(10), 1000).ok());
  BOOST_TEST(gate(context(2), now) == "ok / none");
  BOOST_REQUIRE(adm.grant().has_value());
  BOOST_TEST(adm.grant()->entitlement_revision == 10);
}

// The order the adversarial round used: entitle at 1, revoke at 1, exec again.
BOOST_AUTO_TEST_CASE(a_revoke_at_the_snapshot_revision_holds) {
  BOOST_REQUIRE(adm.put_snapshot(snapshot(1), 1000).ok());
  BOOST_TEST(gate(context(2), now) == "ok / none");
  BOOST_REQUIRE(adm.revoke(revocation(1), config).ok());
  BOOST_TEST(!adm.grant().has_value());
  BOOST_TEST(gate(context(2), now)
             == "BoxAdmissionError: Sandbox admission grant revision was revoked / none");
  // The stored revision replayed with the same contents is accepted and admits nothing.
  BOOST_REQUIRE(adm.put_snapshot(snapshot(1), 1000).ok());
  BOOST_TEST(gate(context(2), now)
             == "BoxAdmissionError: Sandbox admission grant revision was revoked / none");
  BOOST_REQUIRE(adm.put_snapshot(snapshot(2), 1000).ok());
  BOOST_TEST(gate(context(2), now) == "ok / none");
}

BOOST_AUTO_TEST_CASE(without_snapshot_no_floor_passes) {
  BOOST_TEST(gate(context(1), now) == "ok / none");
  BOOST_TEST(gate(context(1, 0), now) == "ok / none");
  BOOST_TEST(!adm.grant().has_value());
}

BOOST_AUTO_TEST_CASE(without_snapshot_the_floor_needs_a_grant_at_that_revision) {
  BOOST_TEST(gate(context(1, 5), now)
             == "EntitlementUnavailableError: Workspace entitlement revision rolled back / "
                "none");
  install(grant(5, 1, now + 100 * sec));
  BOOST_TEST(gate(context(1, 5), now) == "ok / none");
  BOOST_TEST(gate(context(1, 4), now) == "ok / none");
  BOOST_TEST(gate(context(1, 6), now)
             == "EntitlementUnavailableError: Workspace entitlement revision rolled back / "
                "none");
  BOOST_TEST(adm.grant().has_value());
}

BOOST_AUTO_TEST_SUITE_END()

// -- the grant gate -------------------------------------------------------------------

BOOST_FIXTURE_TEST_SUITE(admission_grant_gate, admission_fixture)

BOOST_AUTO_TEST_CASE(missing_grant_is_refused) {
  BOOST_TEST(describe(adm.check_grant(context(1), policy, now))
             == "BoxAdmissionError: Sandbox admission grant is missing");
}

BOOST_AUTO_TEST_CASE(grant_expires_at_its_expiry) {
  install(grant(1, 1, now + 100 * sec));
  BOOST_TEST(describe(adm.check_grant(context(1), policy, now + 100 * sec - 1)) == "ok");
  BOOST_TEST(describe(adm.check_grant(context(1), policy, now + 100 * sec))
             == "BoxAdmissionError: Sandbox admission grant has expired");
}

BOOST_AUTO_TEST_CASE(grant_of_another_generation_is_refused) {
  install(grant(1, 2, now + 100 * sec));
  BOOST_TEST(describe(adm.check_grant(context(3), policy, now))
             == "BoxAdmissionError: Sandbox admission grant belongs to another execution "
                "generation");
}

BOOST_AUTO_TEST_CASE(grant_without_sessions_is_refused) {
  install(grant(1, 1, now + 100 * sec, 0, 0));
  policy.max_sessions = 0;
  BOOST_TEST(describe(adm.check_grant(context(1), policy, now))
             == "BoxAdmissionError: Sandbox admission grant does not permit sessions");
}

BOOST_AUTO_TEST_CASE(grant_over_the_active_policy_is_refused) {
  install(grant(1, 1, now + 100 * sec));
  auto tighter = policy;
  tighter.max_sessions = 0;
  BOOST_TEST(describe(adm.check_grant(context(1), tighter, now))
             == "BoxAdmissionError: Sandbox admission grant exceeds the active runtime policy");
}

BOOST_AUTO_TEST_CASE(grant_with_processes_over_the_active_policy_is_refused) {
  config.admission.max_managed_processes = 1;
  install(grant(1, 1, now + 100 * sec, 1, 1));
  BOOST_TEST(describe(adm.check_grant(context(1), policy, now))
             == "BoxAdmissionError: Sandbox admission grant exceeds the active runtime policy");
}

BOOST_AUTO_TEST_SUITE_END()

// -- host-pushed grants ---------------------------------------------------------------

BOOST_FIXTURE_TEST_SUITE(admission_grant_upsert, admission_fixture)

BOOST_AUTO_TEST_CASE(first_grant_installs_and_stops_all) {
  auto r = adm.upsert_grant(grant(7, 3, now + 300 * sec), config, now);
  BOOST_REQUIRE_MESSAGE(r.ok(), describe(r));
  BOOST_TEST(name(r->effect) == "stop_all");
  BOOST_TEST(!r->fence_advanced);
  BOOST_TEST(r->receipt.workspace_uuid == workspace_a);
  BOOST_TEST(r->receipt.execution_generation == 3);
  BOOST_TEST(r->receipt.entitlement_revision == 7);
  BOOST_TEST(r->receipt.max_sessions == 1);
  BOOST_TEST(r->receipt.max_managed_processes == 0);
  BOOST_TEST(r->receipt.expires_at == now + 300 * sec);
  BOOST_TEST(adm.generation() == 3);
  BOOST_TEST(adm.highest_revision() == 7);
  BOOST_TEST(adm.next_expiry_us() == now + 300 * sec);
}

BOOST_AUTO_TEST_CASE(grant_needs_admission_mode) {
  config.admission.required = false;
  BOOST_TEST(describe(adm.upsert_grant(grant(1, 1, now + sec), config, now))
             == "BoxAdmissionError: Sandbox admission enforcement is not enabled");
}

BOOST_AUTO_TEST_CASE(grant_needs_a_valid_configuration) {
  config.admission_error = "max_sessions must be between 0 and 1";
  BOOST_TEST(describe(adm.upsert_grant(grant(1, 1, now - sec), config, now))
             == "BoxReadinessError: Invalid sandbox admission configuration: max_sessions "
                "must be between 0 and 1");
}

BOOST_AUTO_TEST_CASE(grant_for_another_instance_is_refused) {
  auto g = grant(1, 1, now - sec);
  g.instance_uuid = "instance-b";
  BOOST_TEST(describe(adm.upsert_grant(g, config, now))
             == "PermissionError: Sandbox admission grant does not match the trusted instance");
  BOOST_TEST(!adm.grant().has_value());
}

BOOST_AUTO_TEST_CASE(expired_grant_cannot_be_installed) {
  BOOST_TEST(describe(adm.upsert_grant(grant(1, 1, now, 2), config, now))
             == "BoxAdmissionError: Cannot install an expired sandbox admission grant");
}

BOOST_AUTO_TEST_CASE(grant_lifetime_is_bounded_by_the_policy_ttl) {
  BOOST_TEST(describe(adm.upsert_grant(grant(1, 1, now + 300 * sec + 1, 2), config, now))
             == "BoxAdmissionError: Sandbox admission grant lifetime exceeds the configured "
                "maximum");
  BOOST_TEST(describe(adm.upsert_grant(grant(1, 1, now + 300 * sec), config, now)) == "ok");
}

BOOST_AUTO_TEST_CASE(grant_over_the_session_cap_is_refused) {
  BOOST_TEST(describe(adm.upsert_grant(grant(1, 1, now + sec, 2, 1), config, now))
             == "BoxAdmissionError: Sandbox admission grant exceeds the session cap");
}

BOOST_AUTO_TEST_CASE(grant_over_the_process_cap_is_refused) {
  BOOST_TEST(describe(adm.upsert_grant(grant(1, 1, now + sec, 1, 1), config, now))
             == "BoxAdmissionError: Sandbox admission grant exceeds the managed-process cap");
}

BOOST_AUTO_TEST_CASE(tombstone_blocks_grants_at_or_below_its_revision) {
  BOOST_REQUIRE(adm.revoke(revocation(5), config).ok());
  BOOST_TEST(describe(adm.upsert_grant(grant(5, 1, now + sec), config, now))
             == "BoxAdmissionError: Sandbox admission grant revision was revoked");
  BOOST_TEST(describe(adm.upsert_grant(grant(4, 1, now + sec), config, now))
             == "BoxAdmissionError: Sandbox admission grant revision was revoked");
  BOOST_TEST(!adm.grant().has_value());
  BOOST_TEST(describe(adm.upsert_grant(grant(6, 1, now + sec), config, now)) == "ok");
}

BOOST_AUTO_TEST_CASE(older_revision_is_stale) {
  install(grant(7, 1, now + sec));
  BOOST_TEST(describe(adm.upsert_grant(grant(6, 2, now + sec), config, now))
             == "BoxAdmissionError: Sandbox admission grant revision is stale");
  BOOST_TEST(adm.grant()->entitlement_revision == 7);
}

BOOST_AUTO_TEST_CASE(older_execution_generation_is_stale) {
  install(grant(7, 3, now + sec));
  BOOST_TEST(describe(adm.upsert_grant(grant(8, 2, now + sec), config, now))
             == "BoxAdmissionError: Sandbox admission execution generation is stale");
  BOOST_TEST(adm.grant()->execution_generation == 3);
}

BOOST_AUTO_TEST_CASE(grant_behind_the_fence_is_refused_before_install) {
  adm.observe_generation(5);
  BOOST_TEST(describe(adm.upsert_grant(grant(7, 4, now + sec), config, now))
             == "PermissionError: Stale Box placement generation");
  BOOST_TEST(!adm.grant().has_value());
  BOOST_TEST(adm.highest_revision() == 0);
  BOOST_TEST(adm.generation() == 5);
}

BOOST_AUTO_TEST_CASE(same_revision_with_other_limits_is_refused) {
  install(grant(7, 1, now + sec, 1, 0));
  BOOST_TEST(describe(adm.upsert_grant(grant(7, 1, now + 2 * sec, 0, 0), config, now))
             == "BoxAdmissionError: Sandbox admission limits changed without a new "
                "entitlement revision");
  BOOST_TEST(adm.grant()->max_sessions == 1);
}

BOOST_AUTO_TEST_CASE(shorter_renewal_keeps_the_current_grant) {
  install(grant(7, 3, now + 300 * sec));
  auto r = adm.upsert_grant(grant(7, 3, now + 200 * sec), config, now);
  BOOST_REQUIRE_MESSAGE(r.ok(), describe(r));
  BOOST_TEST(name(r->effect) == "none");
  BOOST_TEST(!r->fence_advanced);
  BOOST_TEST(r->receipt.expires_at == now + 300 * sec);
  BOOST_TEST(adm.grant()->expires_at == now + 300 * sec);
}

BOOST_AUTO_TEST_CASE(longer_renewal_keeps_the_canonical_session) {
  install(grant(7, 3, now + 100 * sec));
  auto r = adm.upsert_grant(grant(7, 3, now + 200 * sec), config, now);
  BOOST_REQUIRE_MESSAGE(r.ok(), describe(r));
  BOOST_TEST(name(r->effect) == "stop_non_canonical");
  BOOST_TEST(r->receipt.expires_at == now + 200 * sec);
  BOOST_TEST(adm.grant()->expires_at == now + 200 * sec);
}

BOOST_AUTO_TEST_CASE(new_revision_same_generation_keeps_the_canonical_session) {
  install(grant(7, 3, now + 100 * sec));
  auto r = adm.upsert_grant(grant(8, 3, now + 100 * sec), config, now);
  BOOST_REQUIRE_MESSAGE(r.ok(), describe(r));
  BOOST_TEST(name(r->effect) == "stop_non_canonical");
  BOOST_TEST(adm.highest_revision() == 8);
}

BOOST_AUTO_TEST_CASE(generation_change_stops_all_and_advances_the_fence) {
  install(grant(7, 3, now + 100 * sec));
  auto r = adm.upsert_grant(grant(7, 4, now + 100 * sec), config, now);
  BOOST_REQUIRE_MESSAGE(r.ok(), describe(r));
  BOOST_TEST(name(r->effect) == "stop_all");
  BOOST_TEST(r->fence_advanced);
  BOOST_TEST(adm.generation() == 4);
}

BOOST_AUTO_TEST_CASE(grant_without_sessions_stops_all) {
  config.admission.max_sessions = 1;
  install(grant(7, 3, now + 100 * sec));
  auto r = adm.upsert_grant(grant(8, 3, now + 100 * sec, 0, 0), config, now);
  BOOST_REQUIRE_MESSAGE(r.ok(), describe(r));
  BOOST_TEST(name(r->effect) == "stop_all");
}

BOOST_AUTO_TEST_CASE(grant_after_an_unreaped_expiry_counts_as_new) {
  install(grant(7, 3, now + 10 * sec));
  auto later = now + 20 * sec;
  auto r = adm.upsert_grant(grant(7, 3, later + 5 * sec), config, later);
  BOOST_REQUIRE_MESSAGE(r.ok(), describe(r));
  BOOST_TEST(name(r->effect) == "stop_all");
  BOOST_TEST(adm.grant()->expires_at == later + 5 * sec);
}

BOOST_AUTO_TEST_CASE(host_grant_replaces_a_derived_grant_and_expires_plainly) {
  BOOST_REQUIRE(adm.put_snapshot(snapshot(7, 1, 5000), 1000).ok());
  BOOST_TEST(gate(context(1), now) == "ok / none");
  install(grant(8, 1, now + 50 * sec));
  // The host grant is not renewed from the snapshot when it falls due.
  BOOST_TEST(name(adm.on_expiry(now + 50 * sec, policy)) == "stop_all");
  BOOST_TEST(!adm.grant().has_value());
}

BOOST_AUTO_TEST_SUITE_END()

// -- revocations ----------------------------------------------------------------------

BOOST_FIXTURE_TEST_SUITE(admission_revocation, admission_fixture)

BOOST_AUTO_TEST_CASE(revocation_drops_the_grant_and_leaves_a_tombstone) {
  install(grant(7, 1, now + sec));
  auto r = adm.revoke(revocation(7), config);
  BOOST_REQUIRE_MESSAGE(r.ok(), describe(r));
  BOOST_TEST(name(r->effect) == "stop_all");
  BOOST_TEST(r->receipt.workspace_uuid == workspace_a);
  BOOST_TEST(r->receipt.entitlement_revision == 7);
  BOOST_TEST(!adm.grant().has_value());
  BOOST_TEST(adm.tombstone() == 7);
  BOOST_TEST(adm.highest_revision() == 7);
  BOOST_TEST(adm.next_expiry_us() == 0);
}

BOOST_AUTO_TEST_CASE(revocation_needs_admission_mode) {
  config.admission.required = false;
  BOOST_TEST(describe(adm.revoke(revocation(1), config))
             == "BoxAdmissionError: Sandbox admission enforcement is not enabled");
}

BOOST_AUTO_TEST_CASE(revocation_ignores_a_configuration_error) {
  config.admission_error = "broken";
  BOOST_TEST(describe(adm.revoke(revocation(1), config)) == "ok");
}

BOOST_AUTO_TEST_CASE(revocation_for_another_instance_is_refused) {
  auto r = revocation(1);
  r.instance_uuid = "instance-b";
  BOOST_TEST(describe(adm.revoke(r, config))
             == "PermissionError: Sandbox admission revocation does not match the trusted "
                "instance");
  BOOST_TEST(adm.tombstone() == 0);
}

BOOST_AUTO_TEST_CASE(revocation_below_the_highest_revision_is_stale) {
  install(grant(7, 1, now + sec));
  BOOST_TEST(describe(adm.revoke(revocation(6), config))
             == "BoxAdmissionError: Sandbox admission revocation is stale");
  BOOST_TEST(adm.grant().has_value());
  BOOST_TEST(adm.tombstone() == 0);
}

BOOST_AUTO_TEST_CASE(revocation_below_the_tombstone_is_stale_and_equal_is_allowed) {
  BOOST_REQUIRE(adm.revoke(revocation(9), config).ok());
  BOOST_TEST(describe(adm.revoke(revocation(8), config))
             == "BoxAdmissionError: Sandbox admission revocation is stale");
  BOOST_TEST(describe(adm.revoke(revocation(9), config)) == "ok");
  BOOST_TEST(adm.tombstone() == 9);
}

BOOST_AUTO_TEST_CASE(revocation_does_not_move_the_fence) {
  install(grant(7, 3, now + sec));
  BOOST_REQUIRE(adm.revoke(revocation(8), config).ok());
  BOOST_TEST(adm.generation() == 3);
}

BOOST_AUTO_TEST_SUITE_END()

// -- expiry ---------------------------------------------------------------------------

BOOST_FIXTURE_TEST_SUITE(admission_expiry, admission_fixture)

BOOST_AUTO_TEST_CASE(no_grant_means_no_expiry) {
  BOOST_TEST(adm.next_expiry_us() == 0);
  BOOST_TEST(name(adm.on_expiry(now, policy)) == "none");
}

BOOST_AUTO_TEST_CASE(grant_is_kept_until_due) {
  install(grant(7, 1, now + 10 * sec));
  BOOST_TEST(name(adm.on_expiry(now + 10 * sec - 1, policy)) == "none");
  BOOST_TEST(adm.grant().has_value());
}

BOOST_AUTO_TEST_CASE(due_host_grant_is_dropped_without_a_tombstone) {
  install(grant(7, 1, now + 10 * sec));
  BOOST_TEST(name(adm.on_expiry(now + 10 * sec, policy)) == "stop_all");
  BOOST_TEST(!adm.grant().has_value());
  BOOST_TEST(adm.tombstone() == 0);
  BOOST_TEST(adm.next_expiry_us() == 0);
  // A fresh grant at the same revision may follow.
  auto later = now + 11 * sec;
  BOOST_TEST(describe(adm.upsert_grant(grant(7, 1, later + sec), config, later)) == "ok");
}

BOOST_AUTO_TEST_CASE(due_derived_grant_is_renewed_while_the_snapshot_grants) {
  BOOST_REQUIRE(adm.put_snapshot(snapshot(7, 1, 5000), 1000).ok());
  BOOST_TEST(gate(context(4), now) == "ok / none");
  BOOST_TEST(adm.next_expiry_us() == 1300 * sec);
  BOOST_TEST(name(adm.on_expiry(1300 * sec + 500'000, policy)) == "none");
  BOOST_REQUIRE(adm.grant().has_value());
  BOOST_TEST((*adm.grant() == grant(7, 4, 1600 * sec)));
}

BOOST_AUTO_TEST_CASE(due_derived_grant_is_dropped_when_the_snapshot_has_ended) {
  BOOST_REQUIRE(adm.put_snapshot(snapshot(7, 1, 1100), 1000).ok());
  BOOST_TEST(gate(context(1), now) == "ok / none");
  BOOST_TEST(adm.next_expiry_us() == 1100 * sec);
  BOOST_TEST(name(adm.on_expiry(1100 * sec, policy)) == "stop_all");
  BOOST_TEST(!adm.grant().has_value());
}

BOOST_AUTO_TEST_SUITE_END()

// -- spec normalisation ---------------------------------------------------------------

BOOST_FIXTURE_TEST_SUITE(admission_normalize, admission_fixture)

BOOST_AUTO_TEST_CASE(network_must_be_off) {
  box_spec s;
  s.network = network_mode::on;
  s.extra_mounts.push_back({"/etc", "/mnt", mount_mode::ro});
  BOOST_TEST(describe(adm.normalize(s, policy, tenant, true))
             == "BoxAdmissionError: Managed sandbox network access is disabled");
}

BOOST_AUTO_TEST_CASE(extra_mounts_outcome_comes_after_host_path) {
  box_spec s;
  s.extra_mounts.push_back({"/etc", "/mnt", mount_mode::ro});
  mounts_outcome refused;
  refused.error = box_error{ec::admission, "Managed sandbox additional mounts must be read-only"};
  s.host_path = "/elsewhere";
  BOOST_TEST(describe(adm.normalize(s, policy, tenant, true, refused))
             == "BoxAdmissionError: Managed sandbox host_path is runtime-owned");
  s.host_path.clear();
  BOOST_TEST(describe(adm.normalize(s, policy, tenant, true, refused))
             == "BoxAdmissionError: Managed sandbox additional mounts must be read-only");
  // Admitted mounts replace what the caller sent; nothing else survives.
  mounts_outcome admitted;
  admitted.mounts.push_back({"/srv/a", "/workspace/a", mount_mode::ro});
  auto out = adm.normalize(s, policy, tenant, true, admitted);
  BOOST_REQUIRE(out);
  BOOST_CHECK(out->extra_mounts == admitted.mounts);
  // Without an outcome (no mounts were checked) no caller mount survives.
  BOOST_CHECK(adm.normalize(s, policy, tenant, true)->extra_mounts.empty());
}

BOOST_AUTO_TEST_CASE(mount_path_must_be_workspace) {
  box_spec s;
  s.mount_path = "/mnt";
  s.workdir = "/mnt";
  BOOST_TEST(describe(adm.normalize(s, policy, tenant, true))
             == "BoxAdmissionError: Managed sandbox mount_path is runtime-owned");
}

BOOST_AUTO_TEST_CASE(workdir_must_stay_under_workspace) {
  auto expected = std::string{
    "BoxAdmissionError: Managed sandbox workdir must stay under /workspace"};
  for (auto workdir : {"/tmp", "/workspacefoo", "/workspace/../etc", "/"}) {
    box_spec s;
    s.workdir = workdir;
    BOOST_TEST(describe(adm.normalize(s, policy, "", true)) == expected, workdir);
  }
  for (auto workdir : {"/workspace", "/workspace/sub/dir", "/workspace/"}) {
    box_spec s;
    s.workdir = workdir;
    BOOST_TEST(describe(adm.normalize(s, policy, tenant, true)) == "ok", workdir);
  }
}

BOOST_AUTO_TEST_CASE(missing_tenant_path_is_a_readiness_error) {
  box_spec s;
  s.host_path = "/etc";
  BOOST_TEST(describe(adm.normalize(s, policy, "", true))
             == "BoxReadinessError: Managed sandbox admission requires "
                "box.local.default_workspace");
}

BOOST_AUTO_TEST_CASE(foreign_host_path_is_refused) {
  box_spec s;
  s.host_path = "/data/box/default/tenants/ws-000000000000000000000000";
  s.skill_name = "missing";
  BOOST_TEST(describe(adm.normalize(s, policy, tenant, false))
             == "BoxAdmissionError: Managed sandbox host_path is runtime-owned");
}

BOOST_AUTO_TEST_CASE(own_host_path_is_accepted) {
  box_spec s;
  s.host_path = std::string{tenant} + "/";
  auto r = adm.normalize(s, policy, tenant, true);
  BOOST_REQUIRE_MESSAGE(r.ok(), describe(r));
  BOOST_TEST(r->host_path == tenant);
}

BOOST_AUTO_TEST_CASE(unknown_skill_is_unavailable) {
  box_spec s;
  s.skill_name = "runner";
  BOOST_TEST(describe(adm.normalize(s, policy, tenant, false))
             == "BoxAdmissionError: Managed sandbox skill is unavailable in this Workspace");
  BOOST_TEST(describe(adm.normalize(s, policy, tenant, true)) == "ok");
}

BOOST_AUTO_TEST_CASE(normalised_spec_takes_the_policy_and_runtime_owned_values) {
  box_spec s;
  s.cmd = "echo hi";
  s.workdir = "/workspace/src";
  s.env["A"] = "1";
  s.session_id = "attacker";
  s.image = "evil:latest";
  s.host_path_mode = mount_mode::ro;
  s.skill_name = "runner";
  s.persistent = false;
  s.timeout_sec = 999;
  s.cpus = 8;
  s.memory_mb = 4096;
  s.pids_limit = 4096;
  s.read_only_rootfs = false;
  s.workspace_quota_mb = 0;
  auto r = adm.normalize(s, policy, tenant, true);
  BOOST_REQUIRE_MESSAGE(r.ok(), describe(r));
  const auto& n = *r;
  BOOST_TEST(n.cmd == "echo hi");
  BOOST_TEST(n.workdir == "/workspace/src");
  BOOST_TEST(n.env.at("A") == "1");
  BOOST_TEST(n.session_id == "global");
  BOOST_TEST((n.network == network_mode::off));
  BOOST_TEST(n.image == default_box_image);
  BOOST_TEST(n.host_path == tenant);
  BOOST_TEST((n.host_path_mode == mount_mode::rw));
  BOOST_TEST(n.mount_path == "/workspace");
  BOOST_TEST(n.extra_mounts.empty());
  BOOST_TEST(n.skill_name == "runner");
  BOOST_TEST(n.persistent);
  BOOST_TEST(n.timeout_sec == 60);
  BOOST_TEST(n.cpus == 0.5);
  BOOST_TEST(n.memory_mb == 256);
  BOOST_TEST(n.pids_limit == 64);
  BOOST_TEST(n.read_only_rootfs);
  BOOST_TEST(n.workspace_quota_mb == 32);
}

BOOST_AUTO_TEST_CASE(shorter_timeout_is_kept) {
  box_spec s;
  s.timeout_sec = 10;
  auto r = adm.normalize(s, policy, tenant, true);
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(r->timeout_sec == 10);
}

BOOST_AUTO_TEST_SUITE_END()

// -- eviction -------------------------------------------------------------------------

BOOST_FIXTURE_TEST_SUITE(admission_eviction, admission_fixture)

BOOST_AUTO_TEST_CASE(fresh_record_is_evictable) {
  BOOST_TEST(adm.evictable());
  adm.observe_generation(1);
  BOOST_TEST(adm.evictable());
}

BOOST_AUTO_TEST_CASE(fence_above_one_is_kept) {
  adm.observe_generation(2);
  BOOST_TEST(!adm.evictable());
}

BOOST_AUTO_TEST_CASE(snapshot_is_kept) {
  BOOST_REQUIRE(adm.put_snapshot(snapshot(1), 1000).ok());
  BOOST_TEST(!adm.evictable());
}

BOOST_AUTO_TEST_CASE(grant_is_kept_and_its_revision_outlives_it) {
  install(grant(1, 1, now + sec));
  BOOST_TEST(!adm.evictable());
  adm.on_expiry(now + sec, policy);
  BOOST_TEST(!adm.grant().has_value());
  BOOST_TEST(!adm.evictable());
}

BOOST_AUTO_TEST_CASE(tombstone_is_kept) {
  BOOST_REQUIRE(adm.revoke(revocation(1), config).ok());
  BOOST_TEST(!adm.evictable());
}

BOOST_AUTO_TEST_SUITE_END()
