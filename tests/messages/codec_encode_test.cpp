#include <boost/test/unit_test.hpp>

#include "helpers.hpp"

using namespace boxrt;
using namespace boxrt::test;

namespace {

constexpr int64_t jan2_2026 = 1767323045000000; // 2026-01-02T03:04:05Z

} // namespace

BOOST_AUTO_TEST_SUITE(encoder_suite)

BOOST_AUTO_TEST_CASE(session_info_renders_all_sixteen_fields) {
  session_info s;
  s.session_id = "global";
  s.backend_name = "bwrap";
  s.backend_session_id = "ws-1-g1-global";
  s.created_at = jan2_2026;
  s.last_used_at = jan2_2026 + 5;
  BOOST_CHECK_EQUAL(to_json(s),
                    R"({"session_id":"global","backend_name":"bwrap","backend_session_id":"ws-1-g1-global",)"
                    R"("image":"rockchin/langbot-sandbox:latest","network":"off","host_path":null,)"
                    R"("host_path_mode":"rw","mount_path":"/workspace","persistent":false,"cpus":1.0,)"
                    R"("memory_mb":512,"pids_limit":128,"read_only_rootfs":true,"workspace_quota_mb":0,)"
                    R"("created_at":"2026-01-02T03:04:05Z","last_used_at":"2026-01-02T03:04:05.000005Z"})");
  s.host_path = "/srv/t";
  s.network = network_mode::on;
  s.cpus = 0.5;
  BOOST_CHECK(to_json(s).find(R"("network":"on","host_path":"/srv/t")") != std::string::npos);
  BOOST_CHECK(to_json(s).find(R"("cpus":0.5,)") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(exec_result_renders_null_exit_code_when_timed_out) {
  exec_result r{"global", "bwrap", exec_status::completed, 3, "out \"q\"", "err\n", 12};
  BOOST_CHECK_EQUAL(to_json(r),
                    R"({"session_id":"global","backend_name":"bwrap","status":"completed","exit_code":3,)"
                    R"("stdout":"out \"q\"","stderr":"err\n","duration_ms":12})");
  r.status = exec_status::timed_out;
  r.exit_code = -9;
  BOOST_CHECK_EQUAL(to_json(r),
                    R"({"session_id":"global","backend_name":"bwrap","status":"timed_out","exit_code":null,)"
                    R"("stdout":"out \"q\"","stderr":"err\n","duration_ms":12})");
}

BOOST_AUTO_TEST_CASE(process_info_renders_nulls_while_running_and_sorted_env_keys) {
  process_info p;
  p.session_id = "s";
  p.command = "python3";
  p.args = {"-m", "http.server"};
  p.env_keys = {"Z", "A"};
  p.started_at = jan2_2026;
  BOOST_CHECK_EQUAL(to_json(p),
                    R"({"session_id":"s","process_id":"default","status":"running","command":"python3",)"
                    R"("args":["-m","http.server"],"cwd":"/workspace","env_keys":["A","Z"],"attached":false,)"
                    R"("started_at":"2026-01-02T03:04:05Z","exited_at":null,"exit_code":null,"stderr_preview":""})");
  p.status = process_status::exited;
  p.exited_at = jan2_2026 + 1000000;
  p.exit_code = 0;
  p.attached = true;
  BOOST_CHECK(to_json(p).find(R"("attached":true,"started_at":"2026-01-02T03:04:05Z","exited_at":"2026-01-02T03:04:06Z","exit_code":0,)")
              != std::string::npos);
}

BOOST_AUTO_TEST_CASE(grant_receipt_uses_python_isoformat) {
  grant_receipt g{"ws", 2, 3, 1, 0, jan2_2026};
  BOOST_CHECK_EQUAL(to_json(g),
                    R"({"installed":true,"workspace_uuid":"ws","execution_generation":2,)"
                    R"("entitlement_revision":3,"max_sessions":1,"max_managed_processes":0,)"
                    R"("expires_at":"2026-01-02T03:04:05+00:00"})");
}

BOOST_AUTO_TEST_CASE(revocation_and_entitlement_receipts_render_their_shapes) {
  BOOST_CHECK_EQUAL(to_json(revocation_receipt{"ws", 4}),
                    R"({"revoked":true,"workspace_uuid":"ws","entitlement_revision":4})");
  BOOST_CHECK_EQUAL(to_json(entitlement_receipt{"ws", 5, 2}),
                    R"({"accepted":true,"workspace_uuid":"ws","entitlement_revision":5,"revoked_sessions":2})");
}

BOOST_AUTO_TEST_CASE(box_spec_renders_like_model_dump_json) {
  box_spec s;
  s.cmd = "ls";
  s.session_id = "global";
  s.env = {{"B", "2"}, {"A", "1"}};
  s.extra_mounts = {{"/h", "/m", mount_mode::ro}};
  BOOST_CHECK_EQUAL(to_json(s),
                    R"({"cmd":"ls","workdir":"/workspace","timeout_sec":30,"network":"off","session_id":"global",)"
                    R"("env":{"A":"1","B":"2"},"image":"rockchin/langbot-sandbox:latest","host_path":null,)"
                    R"("host_path_mode":"rw","mount_path":"/workspace","extra_mounts":[{"host_path":"/h",)"
                    R"("mount_path":"/m","mode":"ro","content_digest":null,"manifest_path":null}],"skill_name":null,"persistent":false,"cpus":1.0,)"
                    R"("memory_mb":512,"pids_limit":128,"read_only_rootfs":true,"workspace_quota_mb":0})");
}

BOOST_AUTO_TEST_CASE(an_encoded_box_spec_decodes_to_the_same_spec) {
  box_spec s;
  s.cmd = "echo";
  s.session_id = "x";
  s.host_path = "/srv";
  s.mount_path = "/data";
  s.workdir = "/data/sub";
  s.skill_name = "sk";
  s.cpus = 1.5;
  s.network = network_mode::on;
  s.extra_mounts = {{"/a", "/b", mount_mode::none}};
  BOOST_CHECK(check_ok(spec_from(to_json(s))) == s);
}

BOOST_AUTO_TEST_CASE(entitlement_snapshot_renders_every_field) {
  entitlement_snapshot s;
  s.instance_uuid = "i";
  s.workspace_uuid = "w";
  s.entitlement_revision = 2;
  s.status = entitlement_status::suspended;
  s.not_before = 1;
  s.expires_at = 9;
  s.features = {{"managed_sandbox", true}};
  s.limits = {{"managed_sandbox_sessions", 1}};
  BOOST_CHECK_EQUAL(to_json(s),
                    R"({"instance_uuid":"i","workspace_uuid":"w","entitlement_revision":2,"status":"suspended",)"
                    R"("not_before":1,"expires_at":9,"features":{"managed_sandbox":true},)"
                    R"("limits":{"managed_sandbox_sessions":1},"plan_name":null,"subscription_started_at":null,)"
                    R"("plan_revision":null,"monthly_bonus_credits":null})");
  auto back = check_ok(snapshot_from(to_json(s)));
  BOOST_CHECK_EQUAL(back.fingerprint, canonical_json(s));
  back.fingerprint.clear();
  BOOST_CHECK(back == s);
}

BOOST_AUTO_TEST_CASE(encoders_replace_invalid_utf8_in_output) {
  exec_result r;
  r.stdout_text = "a\xFFz";
  BOOST_CHECK(to_json(r).find("\"stdout\":\"a\xEF\xBF\xBDz\"") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
