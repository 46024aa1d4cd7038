#include <boost/test/unit_test.hpp>

#include "helpers.hpp"

using namespace boxrt;
using namespace boxrt::test;

namespace {

constexpr int64_t jan2_2026 = 1767323045000000; // 2026-01-02T03:04:05Z

using field = std::pair<std::string_view, std::string_view>;

/// A JSON object of `fields` (raw JSON values) in order, with `replace_key`'s value
/// replaced by `replace_value`, or left out when that is empty, and `extra` appended.
template <size_t N>
std::string object_with(const field (&fields)[N], std::string_view replace_key,
                        std::string_view replace_value, std::string_view extra) {
  std::string out = "{";
  for (const auto& [key, value] : fields) {
    if (key == replace_key && replace_value.empty())
      continue;
    if (out.size() > 1)
      out += ",";
    out += "\"" + std::string{key} + "\":";
    out += key == replace_key ? std::string{replace_value} : std::string{value};
  }
  out += extra;
  return out + "}";
}

std::string grant_with(std::string_view replace_key, std::string_view replace_value,
                       std::string_view extra = "") {
  const field fields[] = {
    {"instance_uuid", R"("inst")"},     {"workspace_uuid", R"("ws")"},
    {"execution_generation", "2"},      {"entitlement_revision", "3"},
    {"expires_at", R"("2026-01-02T03:04:05Z")"},
    {"max_sessions", "1"},              {"max_managed_processes", "0"}};
  return object_with(fields, replace_key, replace_value, extra);
}

std::string snapshot_with(std::string_view replace_key, std::string_view replace_value,
                          std::string_view extra = "") {
  const field fields[] = {
    {"instance_uuid", R"("inst")"},  {"workspace_uuid", R"("ws")"},
    {"entitlement_revision", "4"},   {"status", R"("active")"},
    {"not_before", "100"},           {"expires_at", "2000000000"},
    {"features", R"({"managed_sandbox":true})"},
    {"limits", R"({"managed_sandbox_sessions":1})"}};
  return object_with(fields, replace_key, replace_value, extra);
}

void check_grant_error(std::string_view key, std::string_view value, std::string_view message) {
  check_error(grant_from(grant_with(key, value)), ec::validation, message);
}

void check_snapshot_error(std::string_view key, std::string_view value,
                          std::string_view message) {
  check_error(snapshot_from(snapshot_with(key, value)), ec::validation, message);
}

} // namespace

// -- ActionContext ------------------------------------------------------------------------

BOOST_AUTO_TEST_SUITE(action_context_suite)

BOOST_AUTO_TEST_CASE(a_context_is_stripped_and_generation_defaults_to_one) {
  const auto c = check_ok(context_from(R"({"instance_uuid":" i ","workspace_uuid":" w "})"));
  BOOST_CHECK_EQUAL(c.instance_uuid, "i");
  BOOST_CHECK_EQUAL(c.workspace_uuid, "w");
  BOOST_CHECK_EQUAL(c.placement_generation, 1);
  BOOST_CHECK_EQUAL(c.entitlement_revision, -1);
}

BOOST_AUTO_TEST_CASE(context_generation_and_revision_are_read) {
  const auto c = check_ok(context_from(
    R"({"instance_uuid":"i","workspace_uuid":"w","placement_generation":3,"entitlement_revision":0,"installation_uuid":"inst-1"})"));
  BOOST_CHECK_EQUAL(c.placement_generation, 3);
  BOOST_CHECK_EQUAL(c.entitlement_revision, 0);
}

BOOST_AUTO_TEST_CASE(installation_binding_keys_are_accepted) {
  const auto c = check_ok(context_from(
    R"({"instance_uuid":"i","workspace_uuid":"w","installation_uuid":"x","runtime_revision":2,)"
    R"("artifact_digest":"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","execution_generation":5})"));
  BOOST_CHECK_EQUAL(c.placement_generation, 5);
  BOOST_CHECK(check_ok(context_from(
                R"({"instance_uuid":"i","workspace_uuid":"w","placement_generation":5,"execution_generation":5})"))
                .placement_generation
              == 5);
}

BOOST_AUTO_TEST_CASE(context_extra_keys_are_forbidden) {
  check_error(context_from(R"({"instance_uuid":"i","workspace_uuid":"w","bot_uuid":"b"})"),
              ec::envelope, "Extra inputs are not permitted: bot_uuid");
}

BOOST_AUTO_TEST_CASE(context_ids_are_required_and_non_empty) {
  check_error(context_from(R"({"workspace_uuid":"w"})"), ec::envelope, "instance_uuid is required");
  check_error(context_from(R"({"instance_uuid":"i"})"), ec::envelope, "workspace_uuid is required");
  check_error(context_from(R"({"instance_uuid":"  ","workspace_uuid":"w"})"), ec::envelope,
              "instance_uuid must not be empty");
  check_error(context_from(R"({"instance_uuid":"i","workspace_uuid":""})"), ec::envelope,
              "workspace_uuid must not be empty");
  check_error(context_from(R"({"instance_uuid":1,"workspace_uuid":"w"})"), ec::envelope,
              "instance_uuid must be a string");
}

// Every action's ids become keys of boxd's state (a cluster's etcd): a 400,000-character
// workspace id once became an 800 KB etcd key that nothing ever removes.
BOOST_AUTO_TEST_CASE(tenant_ids_are_at_most_256_characters_everywhere) {
  const std::string longest(256, 'w'), longer(257, 'w');
  BOOST_CHECK(context_from(R"({"instance_uuid":"i","workspace_uuid":")" + longest + "\"}").ok());
  check_error(context_from(R"({"instance_uuid":"i","workspace_uuid":")" + longer + "\"}"), ec::envelope,
              "workspace_uuid must be between 1 and 256 characters");
  check_error(context_from(R"({"instance_uuid":")" + longer + R"(","workspace_uuid":"w"})"), ec::envelope,
              "instance_uuid must be between 1 and 256 characters");
  check_grant_error("workspace_uuid", "\"" + longer + "\"", "workspace_uuid must be between 1 and 256 characters");
  check_error(revocation_from(R"({"instance_uuid":"i","workspace_uuid":")" + longer
                              + R"(","entitlement_revision":1})"),
              ec::validation, "workspace_uuid must be between 1 and 256 characters");
  // Characters, not bytes: 256 three-byte characters pass.
  std::string euros;
  for (int i = 0; i < 256; ++i)
    euros += "\xe2\x82\xac";
  BOOST_CHECK(context_from(R"({"instance_uuid":"i","workspace_uuid":")" + euros + "\"}").ok());
}

BOOST_AUTO_TEST_CASE(context_generation_is_a_strict_positive_integer) {
  check_error(context_from(R"({"instance_uuid":"i","workspace_uuid":"w","placement_generation":0})"),
              ec::envelope, "placement_generation must be greater than or equal to 1");
  check_error(context_from(R"({"instance_uuid":"i","workspace_uuid":"w","placement_generation":true})"),
              ec::envelope, "placement_generation must be an integer");
  check_error(context_from(R"({"instance_uuid":"i","workspace_uuid":"w","placement_generation":"2"})"),
              ec::envelope, "placement_generation must be an integer");
  check_error(context_from(R"({"instance_uuid":"i","workspace_uuid":"w","placement_generation":2.0})"),
              ec::envelope, "placement_generation must be an integer");
  check_error(context_from(R"({"instance_uuid":"i","workspace_uuid":"w","execution_generation":0})"),
              ec::envelope, "execution_generation must be greater than or equal to 1");
  check_error(context_from(R"({"instance_uuid":"i","workspace_uuid":"w","execution_generation":false})"),
              ec::envelope, "execution_generation must be an integer");
  check_error(context_from(
                R"({"instance_uuid":"i","workspace_uuid":"w","placement_generation":2,"execution_generation":3})"),
              ec::envelope, "execution_generation must equal placement_generation");
}

BOOST_AUTO_TEST_CASE(context_installation_uuid_must_be_a_non_blank_string_or_null) {
  BOOST_CHECK(context_from(R"({"instance_uuid":"i","workspace_uuid":"w","installation_uuid":null})").ok());
  check_error(context_from(R"({"instance_uuid":"i","workspace_uuid":"w","installation_uuid":" "})"),
              ec::envelope, "installation_uuid must not be empty");
  check_error(context_from(R"({"instance_uuid":"i","workspace_uuid":"w","installation_uuid":1})"),
              ec::envelope, "installation_uuid must be a string");
}

BOOST_AUTO_TEST_CASE(context_binding_fields_are_checked_when_present) {
  check_error(context_from(R"({"instance_uuid":"i","workspace_uuid":"w","runtime_revision":0})"),
              ec::envelope, "runtime_revision must be greater than or equal to 1");
  check_error(context_from(R"({"instance_uuid":"i","workspace_uuid":"w","runtime_revision":true})"),
              ec::envelope, "runtime_revision must be an integer");
  check_error(context_from(R"({"instance_uuid":"i","workspace_uuid":"w","artifact_digest":"ABC"})"),
              ec::envelope, "artifact_digest must be 64 lower-case hex characters");
  check_error(context_from(R"({"instance_uuid":"i","workspace_uuid":"w","artifact_digest":1})"),
              ec::envelope, "artifact_digest must be a string");
}

BOOST_AUTO_TEST_CASE(context_entitlement_revision_is_a_non_negative_integer) {
  check_error(context_from(R"({"instance_uuid":"i","workspace_uuid":"w","entitlement_revision":-1})"),
              ec::envelope, "entitlement_revision must be greater than or equal to 0");
  check_error(context_from(R"({"instance_uuid":"i","workspace_uuid":"w","entitlement_revision":true})"),
              ec::envelope, "entitlement_revision must be an integer");
  BOOST_CHECK_EQUAL(
    check_ok(context_from(R"({"instance_uuid":"i","workspace_uuid":"w","entitlement_revision":null})"))
      .entitlement_revision,
    -1);
}

BOOST_AUTO_TEST_CASE(a_non_object_context_is_refused) {
  check_error(context_from(R"(["i","w"])"), ec::envelope, "context must be an object");
}

BOOST_AUTO_TEST_SUITE_END()

// -- SandboxAdmissionGrant / Revocation ---------------------------------------------------

BOOST_AUTO_TEST_SUITE(admission_grant_suite)

BOOST_AUTO_TEST_CASE(a_valid_grant_is_decoded) {
  const auto g = check_ok(grant_from(grant_with("instance_uuid", R"(" inst ")")));
  BOOST_CHECK_EQUAL(g.instance_uuid, "inst");
  BOOST_CHECK_EQUAL(g.workspace_uuid, "ws");
  BOOST_CHECK_EQUAL(g.execution_generation, 2);
  BOOST_CHECK_EQUAL(g.entitlement_revision, 3);
  BOOST_CHECK_EQUAL(g.expires_at, jan2_2026);
  BOOST_CHECK_EQUAL(g.max_sessions, 1);
  BOOST_CHECK_EQUAL(g.max_managed_processes, 0);
}

BOOST_AUTO_TEST_CASE(grant_expiry_is_converted_to_utc) {
  BOOST_CHECK_EQUAL(
    check_ok(grant_from(grant_with("expires_at", R"("2026-01-02T05:04:05.25+02:00")"))).expires_at,
    jan2_2026 + 250000);
}

BOOST_AUTO_TEST_CASE(grant_expiry_accepts_unix_seconds) {
  BOOST_CHECK_EQUAL(check_ok(grant_from(grant_with("expires_at", "1767323045"))).expires_at,
                    jan2_2026);
  BOOST_CHECK_EQUAL(check_ok(grant_from(grant_with("expires_at", "1767323045.5"))).expires_at,
                    jan2_2026 + 500000);
}

BOOST_AUTO_TEST_CASE(grant_expiry_must_include_a_timezone) {
  check_grant_error("expires_at", R"("2026-01-02T03:04:05")", "expires_at must include a timezone");
}

BOOST_AUTO_TEST_CASE(grant_expiry_must_be_a_datetime) {
  check_grant_error("expires_at", R"("tomorrow")", "expires_at must be a valid datetime");
  check_grant_error("expires_at", "true", "expires_at must be a valid datetime");
  check_grant_error("expires_at", "null", "expires_at must be a valid datetime");
  check_grant_error("expires_at", "1e300", "expires_at must be a valid datetime");
}

BOOST_AUTO_TEST_CASE(grant_fields_are_required) {
  for (auto key : {"instance_uuid", "workspace_uuid", "execution_generation",
                   "entitlement_revision", "expires_at", "max_sessions", "max_managed_processes"})
    check_grant_error(key, "", std::string{key} + " is required");
}

BOOST_AUTO_TEST_CASE(grant_ids_must_not_be_empty) {
  check_grant_error("instance_uuid", R"("  ")", "instance_uuid must not be empty");
  check_grant_error("workspace_uuid", R"("")", "workspace_uuid must not be empty");
  check_grant_error("workspace_uuid", "7", "workspace_uuid must be a string");
}

BOOST_AUTO_TEST_CASE(grant_integers_refuse_bool_string_float_and_null) {
  for (auto key : {"execution_generation", "entitlement_revision", "max_sessions",
                   "max_managed_processes"})
    for (auto bad : {"true", R"("1")", "1.0", "null"})
      check_grant_error(key, bad, std::string{key} + " must be an integer");
}

BOOST_AUTO_TEST_CASE(grant_integer_bounds_use_the_reference_messages) {
  check_grant_error("execution_generation", "0",
                    "execution_generation must be greater than or equal to 1");
  check_grant_error("entitlement_revision", "0",
                    "entitlement_revision must be greater than or equal to 1");
  check_grant_error("max_sessions", "-1", "max_sessions must be greater than or equal to 0");
  check_grant_error("max_managed_processes", "-1",
                    "max_managed_processes must be greater than or equal to 0");
}

BOOST_AUTO_TEST_CASE(grant_extra_keys_are_forbidden) {
  check_error(grant_from(grant_with("", "", R"(,"plan":"pro")")), ec::validation,
              "Extra inputs are not permitted: plan");
}

BOOST_AUTO_TEST_CASE(a_non_object_grant_is_refused) {
  check_error(grant_from("1"), ec::validation, "grant must be an object");
}

BOOST_AUTO_TEST_CASE(a_valid_revocation_is_decoded) {
  const auto& r =
    check_ok(revocation_from(R"({"instance_uuid":" i ","workspace_uuid":"w","entitlement_revision":9})"));
  BOOST_CHECK_EQUAL(r.instance_uuid, "i");
  BOOST_CHECK_EQUAL(r.workspace_uuid, "w");
  BOOST_CHECK_EQUAL(r.entitlement_revision, 9);
}

BOOST_AUTO_TEST_CASE(revocation_fields_are_validated) {
  check_error(revocation_from(R"({"instance_uuid":"i","workspace_uuid":"w","entitlement_revision":0})"),
              ec::validation, "entitlement_revision must be greater than or equal to 1");
  check_error(revocation_from(R"({"instance_uuid":"i","workspace_uuid":"w","entitlement_revision":true})"),
              ec::validation, "entitlement_revision must be an integer");
  check_error(revocation_from(R"({"instance_uuid":"i","workspace_uuid":"w","entitlement_revision":"2"})"),
              ec::validation, "entitlement_revision must be an integer");
  check_error(revocation_from(R"({"instance_uuid":"","workspace_uuid":"w","entitlement_revision":1})"),
              ec::validation, "instance_uuid must not be empty");
  check_error(revocation_from(R"({"instance_uuid":"i","workspace_uuid":" ","entitlement_revision":1})"),
              ec::validation, "workspace_uuid must not be empty");
  check_error(revocation_from(R"({"instance_uuid":"i","workspace_uuid":"w"})"), ec::validation,
              "entitlement_revision is required");
  check_error(revocation_from(R"({"instance_uuid":"i","workspace_uuid":"w","entitlement_revision":1,"x":1})"),
              ec::validation, "Extra inputs are not permitted: x");
  check_error(revocation_from("[]"), ec::validation, "revocation must be an object");
}

BOOST_AUTO_TEST_SUITE_END()

// -- Entitlement snapshot -----------------------------------------------------------------

BOOST_AUTO_TEST_SUITE(entitlement_snapshot_suite)

BOOST_AUTO_TEST_CASE(a_valid_snapshot_is_decoded_with_its_fingerprint) {
  const auto s = check_ok(snapshot_from(snapshot_with("", "", R"(,"plan_name":"Pro")")));
  BOOST_CHECK_EQUAL(s.instance_uuid, "inst");
  BOOST_CHECK_EQUAL(s.workspace_uuid, "ws");
  BOOST_CHECK_EQUAL(s.entitlement_revision, 4);
  BOOST_CHECK(s.status == entitlement_status::active);
  BOOST_CHECK_EQUAL(s.not_before, 100);
  BOOST_CHECK_EQUAL(s.expires_at, 2000000000);
  BOOST_CHECK(s.features.at("managed_sandbox"));
  BOOST_CHECK_EQUAL(s.limits.at("managed_sandbox_sessions"), 1);
  BOOST_CHECK_EQUAL(s.plan_name, "Pro");
  BOOST_CHECK_EQUAL(s.fingerprint,
                    R"({"entitlement_revision":4,"expires_at":2000000000,"features":{"managed_sandbox":true},)"
                    R"("instance_uuid":"inst","limits":{"managed_sandbox_sessions":1},"not_before":100,)"
                    R"("plan_name":"Pro","status":"active","workspace_uuid":"ws"})");
}

BOOST_AUTO_TEST_CASE(snapshot_fingerprint_ignores_key_order_and_omits_absent_plan) {
  const auto a = check_ok(snapshot_from(
    R"({"status":"suspended","workspace_uuid":"w","instance_uuid":"i","expires_at":5,"not_before":0,)"
    R"("entitlement_revision":1,"limits":{"b":2,"a":1},"features":{"y":false,"x":true}})"));
  BOOST_CHECK_EQUAL(a.fingerprint,
                    R"({"entitlement_revision":1,"expires_at":5,"features":{"x":true,"y":false},)"
                    R"("instance_uuid":"i","limits":{"a":1,"b":2},"not_before":0,"status":"suspended",)"
                    R"("workspace_uuid":"w"})");
  BOOST_CHECK_EQUAL(a.fingerprint, canonical_json(a));
}

BOOST_AUTO_TEST_CASE(snapshot_features_and_limits_default_to_empty) {
  const auto s = check_ok(snapshot_from(snapshot_with("features", "null", "")));
  BOOST_CHECK(s.features.empty());
  const auto t = check_ok(snapshot_from(snapshot_with("limits", "", "")));
  BOOST_CHECK(t.limits.empty());
}

BOOST_AUTO_TEST_CASE(snapshot_unknown_keys_are_rejected) {
  check_error(snapshot_from(snapshot_with("", "", R"(,"fingerprint":"x")")), ec::validation,
              "Extra inputs are not permitted: fingerprint");
}

BOOST_AUTO_TEST_CASE(snapshot_ids_must_be_1_to_256_characters) {
  check_snapshot_error("instance_uuid", R"("")", "instance_uuid must be between 1 and 256 characters");
  check_snapshot_error("workspace_uuid", "\"" + std::string(257, 'w') + "\"",
                       "workspace_uuid must be between 1 and 256 characters");
  BOOST_CHECK(snapshot_from(snapshot_with("workspace_uuid", "\"" + std::string(256, 'w') + "\"")).ok());
  check_snapshot_error("instance_uuid", "1", "instance_uuid must be a string");
  check_snapshot_error("instance_uuid", "", "instance_uuid is required");
}

BOOST_AUTO_TEST_CASE(snapshot_revision_is_a_strict_positive_integer) {
  check_snapshot_error("entitlement_revision", "0",
                       "entitlement_revision must be greater than or equal to 1");
  check_snapshot_error("entitlement_revision", "true", "entitlement_revision must be an integer");
  check_snapshot_error("entitlement_revision", R"("5")", "entitlement_revision must be an integer");
  check_snapshot_error("entitlement_revision", "5.0", "entitlement_revision must be an integer");
}

BOOST_AUTO_TEST_CASE(snapshot_status_must_match_a_whole_value) {
  const std::string message = "status must be one of: active, suspended, cancelled";
  check_snapshot_error("status", R"("Active")", message);
  check_snapshot_error("status", R"("active ")", message);
  check_snapshot_error("status", "1", message);
  check_snapshot_error("status", "", "status is required");
  BOOST_CHECK(check_ok(snapshot_from(snapshot_with("status", R"("cancelled")"))).status
              == entitlement_status::cancelled);
}

BOOST_AUTO_TEST_CASE(snapshot_window_bounds_are_checked) {
  check_snapshot_error("not_before", "-1", "not_before must be greater than or equal to 0");
  check_snapshot_error("not_before", "false", "not_before must be an integer");
  check_snapshot_error("expires_at", "0", "expires_at must be greater than 0");
  check_snapshot_error("expires_at", "1.5", "expires_at must be an integer");
}

BOOST_AUTO_TEST_CASE(snapshot_features_must_be_booleans) {
  check_snapshot_error("features", R"({"managed_sandbox":"true"})",
                       "Entitlement feature 'managed_sandbox' must be a boolean");
  check_snapshot_error("features", R"({"managed_sandbox":1})",
                       "Entitlement feature 'managed_sandbox' must be a boolean");
  check_snapshot_error("features", R"({"it's":null})",
                       "Entitlement feature \"it's\" must be a boolean");
  check_snapshot_error("features", R"({"  ":true})", "Entitlement feature names must be non-empty");
  check_snapshot_error("features", R"([])", "features must be an object");
}

BOOST_AUTO_TEST_CASE(bool_is_never_accepted_as_an_entitlement_limit) {
  check_snapshot_error("limits", R"({"managed_sandbox_sessions":true})",
                       "Entitlement limit 'managed_sandbox_sessions' must be a non-negative integer");
}

BOOST_AUTO_TEST_CASE(snapshot_limits_must_be_non_negative_integers) {
  const std::string message = "Entitlement limit 'n' must be a non-negative integer";
  check_snapshot_error("limits", R"({"n":"5"})", message);
  check_snapshot_error("limits", R"({"n":1.5})", message);
  check_snapshot_error("limits", R"({"n":1.0})", message);
  check_snapshot_error("limits", R"({"n":-1})", message);
  check_snapshot_error("limits", R"({"n":null})", message);
  check_snapshot_error("limits", R"({"":1})", "Entitlement limit names must be non-empty");
  check_snapshot_error("limits", R"("x")", "limits must be an object");
}

BOOST_AUTO_TEST_CASE(snapshot_plan_name_is_1_to_128_characters) {
  check_error(snapshot_from(snapshot_with("", "", R"(,"plan_name":"")")), ec::validation,
              "plan_name must be between 1 and 128 characters");
  check_error(snapshot_from(snapshot_with("", "", ",\"plan_name\":\"" + std::string(129, 'p') + "\"")),
              ec::validation, "plan_name must be between 1 and 128 characters");
  check_error(snapshot_from(snapshot_with("", "", R"(,"plan_name":5)")), ec::validation,
              "plan_name must be a string");
  BOOST_CHECK(check_ok(snapshot_from(snapshot_with("", "", R"(,"plan_name":null)"))).plan_name.empty());
}

BOOST_AUTO_TEST_CASE(langbot_4_11_billing_fields_are_optional_bounded_integers) {
  // LangBot 4.11.2's snapshot model: subscription_started_at >= 0, plan_revision >= 1,
  // monthly_bonus_credits >= 0, each absent or null by default.
  const auto s = check_ok(snapshot_from(snapshot_with(
    "", "", R"(,"subscription_started_at":0,"plan_revision":3,"monthly_bonus_credits":500)")));
  BOOST_CHECK_EQUAL(s.subscription_started_at, 0);
  BOOST_CHECK_EQUAL(s.plan_revision, 3);
  BOOST_CHECK_EQUAL(s.monthly_bonus_credits, 500);
  // They count for the equivocation check, in sorted key order.
  BOOST_CHECK_EQUAL(s.fingerprint,
                    R"({"entitlement_revision":4,"expires_at":2000000000,"features":{"managed_sandbox":true},)"
                    R"("instance_uuid":"inst","limits":{"managed_sandbox_sessions":1},"monthly_bonus_credits":500,)"
                    R"("not_before":100,"plan_revision":3,"status":"active","subscription_started_at":0,)"
                    R"("workspace_uuid":"ws"})");
  const auto none = check_ok(snapshot_from(snapshot_with(
    "", "", R"(,"subscription_started_at":null,"plan_revision":null,"monthly_bonus_credits":null)")));
  BOOST_CHECK_EQUAL(none.plan_revision, -1);
  BOOST_CHECK_EQUAL(none.fingerprint, check_ok(snapshot_from(snapshot_with("", "", ""))).fingerprint);
  check_error(snapshot_from(snapshot_with("", "", R"(,"subscription_started_at":-1)")), ec::validation,
              "subscription_started_at must be greater than or equal to 0");
  check_error(snapshot_from(snapshot_with("", "", R"(,"plan_revision":0)")), ec::validation,
              "plan_revision must be greater than or equal to 1");
  check_error(snapshot_from(snapshot_with("", "", R"(,"monthly_bonus_credits":-5)")), ec::validation,
              "monthly_bonus_credits must be greater than or equal to 0");
  check_error(snapshot_from(snapshot_with("", "", R"(,"plan_revision":"2")")), ec::validation,
              "plan_revision must be an integer");
  check_error(snapshot_from(snapshot_with("", "", R"(,"plan_revision":2.5)")), ec::validation,
              "plan_revision must be an integer");
  // Anything else is still refused.
  BOOST_CHECK(!snapshot_from(snapshot_with("", "", R"(,"bonus":1)")).ok());
}

BOOST_AUTO_TEST_CASE(a_non_object_snapshot_is_refused) {
  check_error(snapshot_from("\"x\""), ec::validation, "entitlement snapshot must be an object");
}

BOOST_AUTO_TEST_SUITE_END()

// -- SandboxAdmissionPolicy ---------------------------------------------------------------

BOOST_AUTO_TEST_SUITE(admission_policy_suite)

BOOST_AUTO_TEST_CASE(an_empty_policy_has_boxrt_defaults) {
  const auto p = check_ok(policy_from("{}"));
  BOOST_CHECK(p == admission_policy{});
  BOOST_CHECK_EQUAL(p.required_backend, "bwrap");
}

BOOST_AUTO_TEST_CASE(every_policy_field_is_decoded) {
  const auto p = check_ok(policy_from(
    R"({"required":true,"logical_session_id":"global","required_backend":"nsjail","max_sessions":0,)"
    R"("max_managed_processes":0,"max_grant_ttl_sec":60,"max_timeout_sec":30,"cpus":1,"memory_mb":256,)"
    R"("pids_limit":64,"read_only_rootfs":false,"workspace_quota_mb":100,"readiness_cache_sec":0})"));
  BOOST_CHECK(p.required);
  BOOST_CHECK_EQUAL(p.required_backend, "nsjail");
  BOOST_CHECK_EQUAL(p.max_sessions, 0);
  BOOST_CHECK_EQUAL(p.max_grant_ttl_sec, 60);
  BOOST_CHECK_EQUAL(p.max_timeout_sec, 30);
  BOOST_CHECK_EQUAL(p.cpus, 1.0);
  BOOST_CHECK_EQUAL(p.memory_mb, 256);
  BOOST_CHECK_EQUAL(p.pids_limit, 64);
  BOOST_CHECK(!p.read_only_rootfs);
  BOOST_CHECK_EQUAL(p.workspace_quota_mb, 100);
  BOOST_CHECK_EQUAL(p.readiness_cache_sec, 0);
  BOOST_CHECK(p.entitlements_file.empty());
}

BOOST_AUTO_TEST_CASE(policy_accepts_boxrts_entitlements_file) {
  BOOST_CHECK_EQUAL(check_ok(policy_from(R"({"entitlements_file":" /etc/boxrt/ents.json "})")).entitlements_file,
                    "/etc/boxrt/ents.json");
}

BOOST_AUTO_TEST_CASE(policy_messages_follow_the_reference) {
  const std::pair<std::string_view, std::string_view> cases[] = {
    {R"({"required":"yes"})", "required must be a boolean"},
    {R"({"logical_session_id":"other"})", "logical_session_id must be global"},
    {R"({"required_backend":"docker"})", "required_backend must be one of: bwrap, nsjail"},
    {R"({"max_sessions":2})", "max_sessions must be between 0 and 1"},
    {R"({"max_sessions":-1})", "max_sessions must be between 0 and 1"},
    {R"({"max_sessions":true})", "max_sessions must be an integer"},
    {R"({"max_managed_processes":1})", "max_managed_processes must be 0"},
    {R"({"max_managed_processes":false})", "max_managed_processes must be an integer"},
    {R"({"max_grant_ttl_sec":0})", "max_grant_ttl_sec must be greater than 0"},
    {R"({"max_grant_ttl_sec":"300"})", "max_grant_ttl_sec must be an integer"},
    {R"({"max_timeout_sec":0})", "max_timeout_sec must be greater than 0"},
    {R"({"max_timeout_sec":1.5})", "max_timeout_sec must be an integer"},
    {R"({"cpus":true})", "cpus must be a number"},
    {R"({"cpus":"1"})", "cpus must be a number"},
    {R"({"cpus":0})", "cpus must be greater than 0"},
    {R"({"memory_mb":31})", "memory_mb must be at least 32"},
    {R"({"memory_mb":17592186044416})", "memory_mb must be less than or equal to 1048576"},
    {R"({"pids_limit":4194305})", "pids_limit must be less than or equal to 4194304"},
    {R"({"workspace_quota_mb":16777217})", "workspace_quota_mb must be less than or equal to 16777216"},
    {R"({"memory_mb":true})", "memory_mb must be an integer"},
    {R"({"pids_limit":0})", "pids_limit must be greater than 0"},
    {R"({"pids_limit":"1"})", "pids_limit must be an integer"},
    {R"({"read_only_rootfs":1})", "read_only_rootfs must be a boolean"},
    {R"({"workspace_quota_mb":-1})", "workspace_quota_mb must be greater than or equal to 0"},
    {R"({"workspace_quota_mb":true})", "workspace_quota_mb must be an integer"},
    {R"({"readiness_cache_sec":-1})", "readiness_cache_sec must be greater than or equal to 0"},
    {R"({"readiness_cache_sec":false})", "readiness_cache_sec must be an integer"},
    {R"({"entitlements_file":5})", "entitlements_file must be a string"},
    {R"({"plan":"pro"})", "Extra inputs are not permitted: plan"},
    {R"([])", "box.admission must be an object"},
  };
  for (const auto& [text, message] : cases) {
    BOOST_TEST_CONTEXT(text) { check_error(policy_from(text), ec::validation, message); }
  }
  check_error(policy_from(R"({"cpus":1e300})"), ec::validation,
              "cpus must be less than or equal to " + std::to_string(resource_bounds::cpus()));
}

BOOST_AUTO_TEST_SUITE_END()

// -- payload facts --------------------------------------------------------------------------

BOOST_AUTO_TEST_SUITE(payload_facts_suite)

BOOST_AUTO_TEST_CASE(host_controlled_keys_are_reported_sorted_whatever_their_value) {
  auto f = facts_from(
    R"({"subscription":null,"plan":"x","backend":"nsjail","max_sessions":1,"managed_sandbox":false,)"
    R"("entitlement":{},"entitlement_revision":0,"max_managed_processes":0,"cmd":"ls"})");
  const std::vector<std::string> expected = {"backend", "entitlement", "entitlement_revision",
                                             "managed_sandbox", "max_managed_processes",
                                             "max_sessions", "plan", "subscription"};
  BOOST_CHECK(f.host_controlled_keys == expected);
}

BOOST_AUTO_TEST_CASE(a_plain_payload_has_no_facts) {
  auto f = facts_from(R"({"cmd":"ls"})");
  BOOST_CHECK(f == payload_facts{});
  BOOST_CHECK(facts_from("[1]") == payload_facts{});
  BOOST_CHECK(facts_from("null") == payload_facts{});
}

BOOST_AUTO_TEST_CASE(session_id_and_paths_are_kept_raw_and_stripped) {
  auto f = facts_from(R"({"session_id":" other ","mount_path":" /data ","host_path":" /h "})");
  BOOST_CHECK(f.has_session_id);
  BOOST_CHECK_EQUAL(f.session_id, "other");
  BOOST_CHECK_EQUAL(f.mount_path, "/data");
  BOOST_CHECK_EQUAL(f.host_path, "/h");
  auto n = facts_from(R"({"session_id":null,"mount_path":null,"host_path":null})");
  BOOST_CHECK(!n.has_session_id);
  BOOST_CHECK(n.mount_path.empty());
  BOOST_CHECK(n.host_path.empty());
}

BOOST_AUTO_TEST_CASE(non_string_values_never_look_blank) {
  auto f = facts_from(R"({"session_id":5,"mount_path":false,"host_path":[]})");
  BOOST_CHECK_EQUAL(f.session_id, "5");
  BOOST_CHECK_EQUAL(f.mount_path, "false");
  BOOST_CHECK_EQUAL(f.host_path, "[]");
}

BOOST_AUTO_TEST_CASE(network_counts_as_off_only_when_missing_null_empty_or_off) {
  BOOST_CHECK(!facts_from(R"({"network":null})").network_not_off);
  BOOST_CHECK(!facts_from(R"({"network":""})").network_not_off);
  BOOST_CHECK(!facts_from(R"({"network":"off"})").network_not_off);
  BOOST_CHECK(facts_from(R"({"network":"on"})").network_not_off);
  BOOST_CHECK(facts_from(R"({"network":"OFF"})").network_not_off);
  BOOST_CHECK(facts_from(R"({"network":false})").network_not_off);
}

BOOST_AUTO_TEST_CASE(timeout_not_int_flags_bool_string_and_float) {
  BOOST_CHECK(!facts_from(R"({"timeout_sec":30})").timeout_not_int);
  BOOST_CHECK(!facts_from(R"({"timeout_sec":null})").timeout_not_int);
  BOOST_CHECK(!facts_from(R"({})").timeout_not_int);
  BOOST_CHECK(facts_from(R"({"timeout_sec":true})").timeout_not_int);
  BOOST_CHECK(facts_from(R"({"timeout_sec":"30"})").timeout_not_int);
  BOOST_CHECK(facts_from(R"({"timeout_sec":30.0})").timeout_not_int);
}

BOOST_AUTO_TEST_SUITE_END()

// -- forged fields with duplicate keys --------------------------------------------------

BOOST_AUTO_TEST_SUITE(payload_facts_suite)

// Python's json keeps the last of duplicate keys; the forged-field check reads the
// same value the reference checks, so a forged field cannot hide behind a duplicate.
BOOST_AUTO_TEST_CASE(the_last_duplicate_is_the_one_checked) {
  auto facts = [](std::string_view text) {
    simdjson::dom::parser parser;
    simdjson::dom::element e;
    BOOST_REQUIRE(parser.parse(text).get(e) == simdjson::SUCCESS);
    return extract_payload_facts(e);
  };
  BOOST_CHECK(facts(R"({"network":"off","network":"on"})").network_not_off);
  BOOST_CHECK(!facts(R"({"network":"on","network":"off"})").network_not_off);
  BOOST_CHECK_EQUAL(facts(R"({"host_path":"/a","host_path":"/etc"})").host_path, "/etc");
  BOOST_CHECK_EQUAL(facts(R"({"session_id":"a","session_id":"b"})").session_id, "b");
  BOOST_CHECK(facts(R"({"timeout_sec":1,"timeout_sec":"1"})").timeout_not_int);
  BOOST_CHECK(!facts(R"({"timeout_sec":"1","timeout_sec":1})").timeout_not_int);
}

BOOST_AUTO_TEST_SUITE_END()
