#include <boost/test/unit_test.hpp>

#include "helpers.hpp"

using namespace boxrt;
using namespace boxrt::test;

BOOST_AUTO_TEST_SUITE(runtime_limits_suite)

BOOST_AUTO_TEST_CASE(omitted_limits_keep_the_base_and_unknown_keys_are_ignored) {
  runtime_limits base;
  base.max_sessions = 7;
  const auto l = check_ok(limits_from(R"({"max_managed_processes":3,"nonsense":"x"})", base));
  BOOST_CHECK_EQUAL(l.max_sessions, 7);
  BOOST_CHECK_EQUAL(l.max_managed_processes, 3);
  BOOST_CHECK_EQUAL(l.max_completed_processes, 256);
}

BOOST_AUTO_TEST_CASE(every_limit_accepts_its_bounds) {
  const auto low = check_ok(limits_from(
    R"({"max_sessions":0,"max_managed_processes":0,"max_completed_processes":0,"max_admission_records":1,)"
    R"("max_rpc_file_bytes":1,"completed_process_retention_sec":0,"session_ttl_sec":0,)"
    R"("max_output_bytes":1024,"max_timeout_sec":1,"max_sessions_per_workspace":1})"));
  BOOST_CHECK_EQUAL(low.max_admission_records, 1);
  BOOST_CHECK_EQUAL(low.max_output_bytes, 1024);
  const auto high = check_ok(limits_from(
    R"({"max_sessions":5000,"max_managed_processes":1024,"max_completed_processes":10000,)"
    R"("max_admission_records":250000,"max_rpc_file_bytes":104857600,"completed_process_retention_sec":86400,)"
    R"("session_ttl_sec":86400,"max_output_bytes":16777216,"max_timeout_sec":86400,"max_sessions_per_workspace":5000})"));
  BOOST_CHECK_EQUAL(high.max_sessions, 5000);
  BOOST_CHECK_EQUAL(high.max_rpc_file_bytes, 104857600);
  BOOST_CHECK_EQUAL(high.max_sessions_per_workspace, 5000);
  BOOST_CHECK_EQUAL(runtime_limits{}.warm_pool, 2);
  BOOST_CHECK_EQUAL(check_ok(limits_from(R"({"warm_pool":0})")).warm_pool, 0);
  BOOST_CHECK_EQUAL(check_ok(limits_from(R"({"warm_pool":16})")).warm_pool, 16);
  BOOST_CHECK_EQUAL(runtime_limits{}.action_margin_sec, 300);
  BOOST_CHECK_EQUAL(check_ok(limits_from(R"({"action_margin_sec":1})")).action_margin_sec, 1);
}

BOOST_AUTO_TEST_CASE(every_limit_reports_its_range) {
  const std::pair<std::string_view, std::string_view> cases[] = {
    {R"({"max_sessions":5001})", "box.limits.max_sessions must be between 0 and 5000"},
    {R"({"max_managed_processes":-1})", "box.limits.max_managed_processes must be between 0 and 1024"},
    {R"({"max_completed_processes":10001})", "box.limits.max_completed_processes must be between 0 and 10000"},
    {R"({"max_admission_records":0})", "box.limits.max_admission_records must be between 1 and 250000"},
    {R"({"max_rpc_file_bytes":104857601})", "box.limits.max_rpc_file_bytes must be between 1 and 104857600"},
    {R"({"completed_process_retention_sec":86401})",
     "box.limits.completed_process_retention_sec must be between 0 and 86400"},
    {R"({"session_ttl_sec":-1})", "box.limits.session_ttl_sec must be between 0 and 86400"},
    {R"({"max_output_bytes":1023})", "box.limits.max_output_bytes must be between 1024 and 16777216"},
    {R"({"max_timeout_sec":0})", "box.limits.max_timeout_sec must be between 1 and 86400"},
    {R"({"max_sessions_per_workspace":0})", "box.limits.max_sessions_per_workspace must be between 1 and 5000"},
    {R"({"max_sessions":18446744073709551615})", "box.limits.max_sessions must be between 0 and 5000"},
    {R"({"warm_pool":17})", "box.limits.warm_pool must be between 0 and 16"},
    {R"({"warm_pool":-1})", "box.limits.warm_pool must be between 0 and 16"},
    {R"({"action_margin_sec":0})", "box.limits.action_margin_sec must be between 1 and 86400"},
    {R"({"action_margin_sec":86401})", "box.limits.action_margin_sec must be between 1 and 86400"},
  };
  for (const auto& [text, message] : cases) {
    BOOST_TEST_CONTEXT(text) { check_error(limits_from(text), ec::value, message); }
  }
}

BOOST_AUTO_TEST_CASE(limits_must_be_real_integers) {
  check_error(limits_from(R"({"max_sessions":true})"), ec::value, "box.limits.max_sessions must be an integer");
  check_error(limits_from(R"({"max_sessions":"5"})"), ec::value, "box.limits.max_sessions must be an integer");
  check_error(limits_from(R"({"max_sessions":5.0})"), ec::value, "box.limits.max_sessions must be an integer");
  check_error(limits_from(R"({"max_sessions":null})"), ec::value, "box.limits.max_sessions must be an integer");
}

BOOST_AUTO_TEST_CASE(limits_must_be_an_object) {
  check_error(limits_from("[]"), ec::value, "box.limits must be an object");
  check_error(config_from(R"({"limits":5})"), ec::value, "box.limits must be an object");
}

BOOST_AUTO_TEST_CASE(a_limit_update_is_all_or_nothing) {
  box_config base;
  auto r = config_from(R"({"limits":{"max_sessions":10,"max_managed_processes":99999}})", base);
  check_error(r, ec::value, "box.limits.max_managed_processes must be between 0 and 1024");
  BOOST_CHECK_EQUAL(base.limits.max_sessions, 64);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(box_config_suite)

BOOST_AUTO_TEST_CASE(an_empty_config_keeps_the_base) {
  box_config base;
  base.backend = "bwrap";
  base.local.host_root = "/srv";
  BOOST_CHECK(check_ok(config_from("{}", base)) == base);
}

BOOST_AUTO_TEST_CASE(a_full_config_is_decoded_and_unknown_keys_ignored) {
  const auto c = check_ok(config_from(R"({
    "enabled": true, "backend": "scripted",
    "limits": {"max_sessions": 3, "session_ttl_sec": 0},
    "local": {"host_root": "/srv/box", "default_workspace": "ws", "skills_root": "skills",
              "allowed_mount_roots": ["/srv/box", " ", " /data "], "skills_quota_mb": 8, "profile": "x"},
    "admission": {"required": true, "required_backend": "nsjail", "workspace_quota_mb": 10},
    "scripted": {"available": false, "ready_keys": ["namespace_isolation", "resource_limits"]},
    "nsjail": {"anything": 1}})"));
  BOOST_CHECK_EQUAL(c.backend, "scripted");
  BOOST_CHECK_EQUAL(c.limits.max_sessions, 3);
  BOOST_CHECK_EQUAL(c.limits.session_ttl_sec, 0);
  BOOST_CHECK_EQUAL(c.local.host_root, "/srv/box");
  BOOST_CHECK_EQUAL(c.local.default_workspace, "ws");
  BOOST_CHECK_EQUAL(c.local.skills_root, "skills");
  BOOST_CHECK((c.local.allowed_mount_roots == std::vector<std::string>{"/srv/box", "/data"}));
  BOOST_CHECK_EQUAL(c.local.skills_quota_mb, 8);
  BOOST_CHECK(c.admission.required);
  BOOST_CHECK_EQUAL(c.admission.required_backend, "nsjail");
  BOOST_CHECK_EQUAL(c.admission.workspace_quota_mb, 10);
  BOOST_CHECK(c.admission_error.empty());
  BOOST_CHECK(!c.scripted.available);
  BOOST_CHECK((c.scripted.ready_keys
               == std::vector<std::string>{"namespace_isolation", "resource_limits"}));
}

BOOST_AUTO_TEST_CASE(allowed_mount_roots_accept_a_comma_separated_string) {
  const auto c = check_ok(config_from(R"({"local":{"allowed_mount_roots":" /a, ,/b ,"}})"));
  BOOST_CHECK((c.local.allowed_mount_roots == std::vector<std::string>{"/a", "/b"}));
}

BOOST_AUTO_TEST_CASE(each_top_level_key_replaces_the_old_section) {
  box_config base;
  base.local.host_root = "/old";
  base.local.skills_root = "/old/skills";
  base.limits.max_sessions = 9;
  const auto c = check_ok(config_from(R"({"local":{"host_root":"/new"},"limits":{"max_completed_processes":1}})", base));
  BOOST_CHECK_EQUAL(c.local.host_root, "/new");
  BOOST_CHECK(c.local.skills_root.empty());
  // limits merge key by key: omitted ones keep their value.
  BOOST_CHECK_EQUAL(c.limits.max_sessions, 9);
  BOOST_CHECK_EQUAL(c.limits.max_completed_processes, 1);
}

BOOST_AUTO_TEST_CASE(the_nsjail_path_is_kept_unless_named_again) {
  box_config base;
  base.local.host_root = "/old";
  base.local.nsjail_path = "/opt/nsjail";
  // LangBot's box_init sends its whole `local` without boxrt's key: the operator's stays.
  auto c = check_ok(config_from(R"({"local":{"host_root":"/new"}})", base));
  BOOST_CHECK_EQUAL(c.local.host_root, "/new");
  BOOST_CHECK_EQUAL(c.local.nsjail_path, "/opt/nsjail");
  c = check_ok(config_from(R"({"local":null})", base));
  BOOST_CHECK_EQUAL(c.local.nsjail_path, "/opt/nsjail");
  c = check_ok(config_from(R"({"local":{"nsjail_path":"/usr/local/bin/nsjail"}})", base));
  BOOST_CHECK_EQUAL(c.local.nsjail_path, "/usr/local/bin/nsjail");
  BOOST_CHECK(check_ok(config_from(R"({"backend":"nsjail"})")).local.nsjail_path.empty());
}

BOOST_AUTO_TEST_CASE(backend_accepts_only_known_names) {
  for (auto name : {"", "auto", "local", "bwrap", "nsjail", "process", "scripted"}) {
    auto text = std::string{R"({"backend":")"} + name + "\"}";
    BOOST_CHECK_EQUAL(check_ok(config_from(text)).backend, name);
  }
  check_error(config_from(R"({"backend":"docker"})"), ec::value,
              "box.backend must be one of: \"\", auto, local, bwrap, nsjail, process, scripted");
  check_error(config_from(R"({"backend":1})"), ec::value, "box.backend must be a string");
}

BOOST_AUTO_TEST_CASE(local_keys_have_strict_types) {
  const std::pair<std::string_view, std::string_view> cases[] = {
    {R"({"local":[]})", "box.local must be an object"},
    {R"({"local":{"host_root":1}})", "box.local.host_root must be a string"},
    {R"({"local":{"default_workspace":true}})", "box.local.default_workspace must be a string"},
    {R"({"local":{"skills_root":{}}})", "box.local.skills_root must be a string"},
    {R"({"local":{"nsjail_path":7}})", "box.local.nsjail_path must be a string"},
    {R"({"local":{"allowed_mount_roots":5}})",
     "box.local.allowed_mount_roots must be a list or a comma-separated string"},
    {R"({"local":{"allowed_mount_roots":["/a",2]}})", "box.local.allowed_mount_roots[1] must be a string"},
    {R"({"local":{"skills_quota_mb":"64"}})", "box.local.skills_quota_mb must be an integer"},
    {R"({"local":{"skills_quota_mb":-1}})", "box.local.skills_quota_mb must be greater than or equal to 0"},
  };
  for (const auto& [text, message] : cases) {
    BOOST_TEST_CONTEXT(text) { check_error(config_from(text), ec::value, message); }
  }
}

BOOST_AUTO_TEST_CASE(scripted_keys_have_strict_types) {
  check_error(config_from(R"({"scripted":1})"), ec::value, "box.scripted must be an object");
  check_error(config_from(R"({"scripted":{"available":"yes"}})"), ec::value,
              "box.scripted.available must be a boolean");
  check_error(config_from(R"({"scripted":{"ready_keys":"cgroup_v2"}})"), ec::value,
              "box.scripted.ready_keys must be a list");
  check_error(config_from(R"({"scripted":{"ready_keys":[true]}})"), ec::value,
              "box.scripted.ready_keys[0] must be a string");
}

BOOST_AUTO_TEST_CASE(a_malformed_admission_section_fails_closed_without_failing_the_config) {
  const auto c = check_ok(config_from(R"({"admission":{"required":false,"max_sessions":2}})"));
  BOOST_CHECK(c.admission.required);
  BOOST_CHECK_EQUAL(c.admission.max_sessions, 1);
  BOOST_CHECK_EQUAL(c.admission_error, "max_sessions must be between 0 and 1");
  const auto d = check_ok(config_from(R"({"admission":"on"})"));
  BOOST_CHECK(d.admission.required);
  BOOST_CHECK_EQUAL(d.admission_error, "box.admission must be an object");
}

BOOST_AUTO_TEST_CASE(a_null_admission_section_gives_the_default_policy) {
  box_config base;
  base.admission.required = true;
  base.admission_error = "old";
  const auto c = check_ok(config_from(R"({"admission":null})", base));
  BOOST_CHECK(c.admission == admission_policy{});
  BOOST_CHECK(c.admission_error.empty());
  // Absent keeps whatever was there.
  BOOST_CHECK(check_ok(config_from("{}", base)).admission_error == "old");
}

BOOST_AUTO_TEST_CASE(a_non_object_config_is_refused) {
  check_error(config_from("[]"), ec::value, "box config must be an object");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(network_config_suite)

// box.network_policy, box.network_profiles, box.network_egress (docs/network.md).
BOOST_AUTO_TEST_CASE(egress_settings_read_strictly_and_keep_what_is_not_named) {
  auto c = check_ok(config_from(R"({"network_policy": {"allow_domains": ["PyPI.org"]},
    "network_profiles": {"gh": {"allow_domains": ["*.github.com"]}},
    "network_egress": {"resolvers": ["10.0.0.2", "fd00::53"], "max_lookups": 9}})"));
  BOOST_TEST(c.network.default_policy.find(R"("allow_domains":["pypi.org"])") != std::string::npos);
  BOOST_TEST(c.network.profiles.at("gh").find(R"("profile":"gh")") != std::string::npos);
  BOOST_TEST(c.network.resolvers == (std::vector<std::string>{"10.0.0.2", "fd00::53"}));
  BOOST_TEST(c.network.max_lookups == 9);
  BOOST_TEST(c.network.max_connections == 256);
  // A later block without them keeps them; null clears the default.
  auto kept = check_ok(config_from(R"({"backend": "bwrap"})", c));
  BOOST_TEST((kept.network == c.network));
  BOOST_TEST(check_ok(config_from(R"({"network_policy": null})", c)).network.default_policy.empty());
  check_error(config_from(R"({"network_policy": {"allow_cidrs": ["10.0.0.0/40"]}})"), ec::value,
              "box.network_policy.allow_cidrs[0]: must be an IPv4 or IPv6 address or CIDR (got \"10.0.0.0/40\")");
  check_error(config_from(R"({"network_profiles": {"x": {"allow_ports": [53]}}})"), ec::value,
              "box.network_profiles.x.allow_ports[0]: 53 is DNS, which goes to boxd's resolver only");
  check_error(config_from(R"({"network_egress": {"max_connections": 0}})"), ec::value,
              "box.network_egress.max_connections must be an integer between 1 and 65536");
  check_error(config_from(R"({"network_egress": {"resolvers": ["10.0.0.0/8"]}})"), ec::value,
              "box.network_egress.resolvers must be a list of at most 8 IP addresses");
}

BOOST_AUTO_TEST_CASE(unknown_egress_keys_are_reported) {
  simdjson::dom::parser p;
  auto ignored = ignored_box_keys(p.parse(std::string{R"({"network_egress": {"max_conections": 3}, "network_polcy": {}})"}));
  BOOST_TEST(ignored == (std::vector<std::string>{"box.network_polcy", "box.network_egress.max_conections"}));
}

BOOST_AUTO_TEST_SUITE_END()
