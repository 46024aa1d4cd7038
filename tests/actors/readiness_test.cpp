// Instance readiness: standard and admission mode checks, the error text and the
// failed-check list of BoxReadinessError.
#include <boost/test/unit_test.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "actors/admission.hpp"
#include "backends/readiness_keys.hpp"

using namespace boxrt;

namespace {

std::string describe(const box_error& e) {
  if (!e)
    return "ok";
  return std::string{wire_class(e.code)} + ": " + e.message;
}

const std::vector<std::string> admission_checks{
  "backend_available",          "bounded_ephemeral_storage", "configuration",
  "hard_read_only_mount_quota", "hard_skill_storage_quota",  "hard_workspace_quota",
  "inode_quota",
  "managed_process_cap",      "mount_isolation",           "namespace_isolation",
  "network_isolation",        "required_backend",          "resource_limits",
  "session_cap",              "workspace_mount",
};

std::vector<std::string> keys(const runtime_readiness& r) {
  std::vector<std::string> out;
  for (const auto& [name, ok] : r.checks)
    out.push_back(name);
  return out;
}

std::vector<std::string> failing(const runtime_readiness& r) {
  std::vector<std::string> out;
  for (const auto& [name, ok] : r.checks)
    if (!ok)
      out.push_back(name);
  return out;
}

box_config admission_config() {
  box_config c;
  c.backend = "bwrap";
  c.admission.required = true;
  c.admission.required_backend = "bwrap";
  c.admission.workspace_quota_mb = 32;
  c.local.default_workspace = "/data/box/default";
  return c;
}

/// A bwrap backend that enforces everything, storage quotas included.
readiness_report strict_backend() {
  readiness_report b;
  b.backend_name = "bwrap";
  b.available = true;
  b.isolating = true;
  b.limits_mechanism = "cgroup_v2";
  for (auto key : {"cgroup_v2", "resource_limits", "namespace_isolation", "mount_isolation",
                   "network_isolation", "hard_workspace_quota", "hard_skill_storage_quota",
                   "bounded_ephemeral_storage", "inode_quota"})
    b.details[key] = true;
  return b;
}

} // namespace

BOOST_AUTO_TEST_SUITE(readiness)

BOOST_AUTO_TEST_CASE(standard_mode_is_ready_when_the_backend_is_available) {
  box_config c;
  readiness_report b;
  b.backend_name = "process";
  b.available = true;
  auto r = compute_readiness(c, b, "", false);
  BOOST_TEST(r.ready);
  BOOST_TEST(!r.admission_mode);
  BOOST_TEST(keys(r) == std::vector<std::string>{"backend_available"});
  BOOST_TEST(r.checks.at("backend_available"));
  BOOST_TEST(r.error == "");
}

BOOST_AUTO_TEST_CASE(standard_mode_is_not_ready_without_a_backend) {
  box_config c;
  readiness_report b;
  b.backend_name = "bwrap";
  b.available = false;
  b.error = "bubblewrap is not installed";
  auto r = compute_readiness(c, b, "default workspace missing", false);
  BOOST_TEST(!r.ready);
  BOOST_TEST(!r.admission_mode);
  BOOST_TEST(!r.checks.at("backend_available"));
  BOOST_TEST(r.error == "bubblewrap is not installed");
  BOOST_TEST(describe(readiness_error(r))
             == "BoxReadinessError: Managed sandbox isolation is not ready (failed checks: "
                "backend_available)");
}

BOOST_AUTO_TEST_CASE(admission_mode_is_ready_when_every_property_is_enforced) {
  auto r = compute_readiness(admission_config(), strict_backend(), "", false);
  BOOST_TEST(r.admission_mode);
  BOOST_TEST(r.ready);
  BOOST_TEST(keys(r) == admission_checks);
  BOOST_TEST(failing(r).empty());
  BOOST_TEST(r.error == "");
}

BOOST_AUTO_TEST_CASE(the_scripted_backend_makes_admission_ready_only_in_a_declared_test) {
  // A backend that reports every key yet isolates nothing.
  auto fake = strict_backend();
  fake.backend_name = "scripted";
  fake.isolating = false;
  auto c = admission_config();
  c.admission.required_backend = "scripted";
  auto r = compute_readiness(c, fake, "", false);
  BOOST_TEST(!r.ready);
  BOOST_TEST(!r.checks.at("configuration"));
  BOOST_TEST(!r.checks.at("required_backend"));
  BOOST_TEST(r.error == "Cloud Box sandbox backend must be bwrap or nsjail");
  BOOST_TEST(describe(validate_required_policy(c.admission)) == "BoxAdmissionError: Cloud Box sandbox backend must be bwrap or nsjail");
  // Even named "bwrap", a report that isolates nothing does not pass.
  fake.backend_name = "bwrap";
  BOOST_TEST(!compute_readiness(admission_config(), fake, "", false).ready);
  // server.testing: the test suites drive admission logic against it.
  fake.backend_name = "scripted";
  BOOST_TEST(compute_readiness(c, fake, "", false, true).ready);
}

BOOST_AUTO_TEST_CASE(soft_storage_limits_fail_the_four_storage_checks_in_order) {
  auto b = strict_backend();
  for (auto key : {"hard_workspace_quota", "hard_skill_storage_quota",
                   "bounded_ephemeral_storage", "inode_quota"})
    b.details[key] = false;
  auto r = compute_readiness(admission_config(), b, "", false);
  BOOST_TEST(!r.ready);
  BOOST_TEST(describe(readiness_error(r))
             == "BoxReadinessError: Managed sandbox isolation is not ready (failed checks: "
                "hard_workspace_quota, hard_skill_storage_quota, bounded_ephemeral_storage, "
                "inode_quota)");
}

BOOST_AUTO_TEST_CASE(the_read_only_mount_quota_answers_under_both_names) {
  // langbot-plugin 0.7.13 calls hard_skill_storage_quota hard_read_only_mount_quota; both
  // are answered, with one value, and a failure is named once, by the older key.
  auto b = strict_backend();
  b.details["hard_skill_storage_quota"] = false;
  auto r = compute_readiness(admission_config(), b, "", false);
  BOOST_TEST(!r.checks.at("hard_read_only_mount_quota"));
  BOOST_TEST(describe(readiness_error(r))
             == "BoxReadinessError: Managed sandbox isolation is not ready (failed checks: "
                "hard_skill_storage_quota)");
  b.details["hard_skill_storage_quota"] = true;
  BOOST_TEST(compute_readiness(admission_config(), b, "", false).checks.at("hard_read_only_mount_quota"));
  with_aliases(b);
  BOOST_TEST(b.details.at("hard_read_only_mount_quota"));
}

BOOST_AUTO_TEST_CASE(unsafe_soft_override_forces_the_storage_checks) {
  auto b = strict_backend();
  b.details.erase("hard_workspace_quota");
  b.details["hard_skill_storage_quota"] = false;
  b.details["bounded_ephemeral_storage"] = false;
  b.details["inode_quota"] = false;
  auto r = compute_readiness(admission_config(), b, "", true);
  BOOST_TEST(r.ready);
  BOOST_TEST(r.checks.at("hard_workspace_quota"));
  BOOST_TEST(r.checks.at("inode_quota"));
}

BOOST_AUTO_TEST_CASE(unsafe_soft_override_does_not_force_isolation) {
  auto b = strict_backend();
  b.details["network_isolation"] = false;
  b.details.erase("resource_limits");
  auto r = compute_readiness(admission_config(), b, "", true);
  BOOST_TEST(!r.ready);
  BOOST_TEST(describe(readiness_error(r))
             == "BoxReadinessError: Managed sandbox isolation is not ready (failed checks: "
                "resource_limits, network_isolation)");
}

BOOST_AUTO_TEST_CASE(cgroup_v2_is_not_required_when_limits_are_enforced) {
  auto b = strict_backend();
  b.details["cgroup_v2"] = false;
  b.limits_mechanism = "cgroup_v1";
  auto r = compute_readiness(admission_config(), b, "", false);
  BOOST_TEST(r.ready);
  BOOST_TEST(r.checks.count("cgroup_v2") == 0u);
}

BOOST_AUTO_TEST_CASE(other_backend_fails_and_its_details_do_not_count) {
  auto c = admission_config();
  c.admission.required_backend = "nsjail";
  auto r = compute_readiness(c, strict_backend(), "", true);
  BOOST_TEST(!r.ready);
  BOOST_TEST(describe(readiness_error(r))
             == "BoxReadinessError: Managed sandbox isolation is not ready (failed checks: "
                "required_backend, backend_available, resource_limits, namespace_isolation, "
                "mount_isolation, network_isolation)");
}

BOOST_AUTO_TEST_CASE(nsjail_backend_satisfies_an_nsjail_policy) {
  auto c = admission_config();
  c.admission.required_backend = "nsjail";
  auto b = strict_backend();
  b.backend_name = "nsjail";
  auto r = compute_readiness(c, b, "", false);
  BOOST_TEST(r.ready);
}

BOOST_AUTO_TEST_CASE(unavailable_backend_fails_and_reports_its_error_first) {
  auto b = strict_backend();
  b.available = false;
  b.error = "bwrap probe failed: no user namespaces";
  auto r = compute_readiness(admission_config(), b, "default_workspace is not a directory",
                             false);
  BOOST_TEST(!r.ready);
  BOOST_TEST(failing(r) == (std::vector<std::string>{"backend_available", "workspace_mount"}));
  BOOST_TEST(r.error == "bwrap probe failed: no user namespaces");
  BOOST_TEST(describe(readiness_error(r))
             == "BoxReadinessError: Managed sandbox isolation is not ready (failed checks: "
                "workspace_mount, backend_available)");
}

BOOST_AUTO_TEST_CASE(workspace_mount_error_fails_and_is_the_error) {
  auto r = compute_readiness(admission_config(), strict_backend(),
                             "Managed sandbox workspace path is not writable", false);
  BOOST_TEST(!r.ready);
  BOOST_TEST(failing(r) == std::vector<std::string>{"workspace_mount"});
  BOOST_TEST(r.error == "Managed sandbox workspace path is not writable");
}

BOOST_AUTO_TEST_CASE(malformed_admission_section_fails_configuration) {
  auto c = admission_config();
  c.admission_error = "max_sessions must be between 0 and 1";
  auto r = compute_readiness(c, strict_backend(), "", false);
  BOOST_TEST(r.admission_mode);
  BOOST_TEST(!r.ready);
  BOOST_TEST(failing(r) == std::vector<std::string>{"configuration"});
  BOOST_TEST(r.error == "box.admission: max_sessions must be between 0 and 1");
}

BOOST_AUTO_TEST_CASE(a_refused_policy_is_named_alone_with_the_validators_text) {
  // The policy that replaced the refused one makes every check fail; the error names the
  // one value that did it, even when the backend has its own complaint.
  box_config c;
  c.admission_error = "memory_mb must be at least 32";
  auto b = strict_backend();
  b.error = "bubblewrap is not installed";
  auto r = compute_readiness(c, b, "", false);
  BOOST_TEST(!r.ready);
  BOOST_TEST(r.error == "box.admission: memory_mb must be at least 32");
  BOOST_TEST(describe(readiness_error(r))
             == "BoxReadinessError: Managed sandbox isolation is not ready (failed checks: "
                "configuration; box.admission: memory_mb must be at least 32)");
}

BOOST_AUTO_TEST_CASE(admission_error_alone_selects_admission_mode) {
  box_config c;
  c.admission_error = "required must be a boolean";
  auto r = compute_readiness(c, strict_backend(), "", false);
  BOOST_TEST(r.admission_mode);
  BOOST_TEST(!r.ready);
}

BOOST_AUTO_TEST_CASE(invalid_cloud_policy_fails_configuration_with_its_message) {
  auto c = admission_config();
  c.admission.workspace_quota_mb = 0;
  auto r = compute_readiness(c, strict_backend(), "", false);
  BOOST_TEST(!r.ready);
  BOOST_TEST(failing(r) == std::vector<std::string>{"configuration"});
  BOOST_TEST(r.error == "Cloud Box sandbox workspace quota must be a positive integer");
}

BOOST_AUTO_TEST_CASE(caps_above_the_cloud_policy_fail_their_checks) {
  auto c = admission_config();
  c.admission.max_sessions = 2;
  c.admission.max_managed_processes = 1;
  auto r = compute_readiness(c, strict_backend(), "", false);
  BOOST_TEST(!r.ready);
  BOOST_TEST(describe(readiness_error(r))
             == "BoxReadinessError: Managed sandbox isolation is not ready (failed checks: "
                "configuration, session_cap, managed_process_cap)");
}

BOOST_AUTO_TEST_CASE(not_ready_without_failing_checks_names_unknown) {
  runtime_readiness r;
  r.admission_mode = true;
  r.ready = false;
  BOOST_TEST(describe(readiness_error(r))
             == "BoxReadinessError: Managed sandbox isolation is not ready (failed checks: "
                "unknown)");
}

BOOST_AUTO_TEST_SUITE_END()
