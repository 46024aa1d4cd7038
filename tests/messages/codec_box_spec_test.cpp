#include <boost/test/unit_test.hpp>

#include "helpers.hpp"

using namespace boxrt;
using boxrt::test::check_error;
using boxrt::test::check_ok;
using boxrt::test::spec_from;

namespace {

/// A spec with session "s" and cmd "ls" plus `extra` members (",..." or "").
std::string spec_with(std::string_view extra) {
  return std::string{R"({"session_id":"s","cmd":"ls")"} + std::string{extra} + "}";
}

void check_spec_error(std::string_view extra, std::string_view message) {
  check_error(spec_from(spec_with(extra)), ec::validation, message);
}

} // namespace

BOOST_AUTO_TEST_SUITE(box_spec_suite)

BOOST_AUTO_TEST_CASE(fields_are_stripped_as_pythons_str_strip_does) {
  // No-break space, ideographic space and U+001F are whitespace to str.strip().
  const auto s = check_ok(spec_from(
    "{\"session_id\":\"\xc2\xa0s1\xe3\x80\x80\",\"cmd\":\"\\u001f ls\\u2028\","
    "\"workdir\":\"\xc2\xa0/workspace/x\xc2\xa0\"}"));
  BOOST_CHECK_EQUAL(s.session_id, "s1");
  BOOST_CHECK_EQUAL(s.cmd, "ls");
  BOOST_CHECK_EQUAL(s.workdir, "/workspace/x");
}

BOOST_AUTO_TEST_CASE(a_minimal_spec_gets_the_reference_defaults) {
  const auto s = check_ok(spec_from(R"({"session_id":" s1 ","cmd":"  ls -la  "})"));
  BOOST_CHECK_EQUAL(s.session_id, "s1");
  BOOST_CHECK_EQUAL(s.cmd, "ls -la");
  BOOST_CHECK_EQUAL(s.workdir, "/workspace");
  BOOST_CHECK_EQUAL(s.timeout_sec, 30);
  BOOST_CHECK(s.network == network_mode::off);
  BOOST_CHECK(s.env.empty());
  BOOST_CHECK_EQUAL(s.image, "rockchin/langbot-sandbox:latest");
  BOOST_CHECK(s.host_path.empty());
  BOOST_CHECK(s.host_path_mode == mount_mode::rw);
  BOOST_CHECK_EQUAL(s.mount_path, "/workspace");
  BOOST_CHECK(s.extra_mounts.empty());
  BOOST_CHECK(s.skill_name.empty());
  BOOST_CHECK(!s.persistent);
  BOOST_CHECK_EQUAL(s.cpus, 1.0);
  BOOST_CHECK_EQUAL(s.memory_mb, 512);
  BOOST_CHECK_EQUAL(s.pids_limit, 128);
  BOOST_CHECK(s.read_only_rootfs);
  BOOST_CHECK_EQUAL(s.workspace_quota_mb, 0);
}

BOOST_AUTO_TEST_CASE(every_field_is_decoded) {
  const auto s = check_ok(spec_from(R"({
    "cmd":"echo hi","workdir":" /data/sub ","timeout_sec":5,"network":"on","session_id":"x",
    "env":{"A":"1","B":""},"image":"img:1","host_path":" /srv/ws ","host_path_mode":"ro",
    "mount_path":" /data ","extra_mounts":[{"host_path":"/opt/a","mount_path":"/mnt/a","mode":"ro"},
    {"host_path":"C:\\x","mount_path":"/mnt/c"}],"skill_name":" my_skill-1 ","persistent":true,
    "cpus":0.5,"memory_mb":64,"pids_limit":1,"read_only_rootfs":false,"workspace_quota_mb":7,
    "unknown_key":{"ignored":true}})"));
  BOOST_CHECK_EQUAL(s.workdir, "/data/sub");
  BOOST_CHECK_EQUAL(s.timeout_sec, 5);
  BOOST_CHECK(s.network == network_mode::on);
  BOOST_CHECK_EQUAL(s.env.size(), 2u);
  BOOST_CHECK_EQUAL(s.env.at("A"), "1");
  BOOST_CHECK_EQUAL(s.image, "img:1");
  BOOST_CHECK_EQUAL(s.host_path, "/srv/ws");
  BOOST_CHECK(s.host_path_mode == mount_mode::ro);
  BOOST_CHECK_EQUAL(s.mount_path, "/data");
  BOOST_REQUIRE_EQUAL(s.extra_mounts.size(), 2u);
  BOOST_CHECK(s.extra_mounts[0] == (mount_spec{"/opt/a", "/mnt/a", mount_mode::ro}));
  BOOST_CHECK(s.extra_mounts[1] == (mount_spec{"C:\\x", "/mnt/c", mount_mode::rw}));
  BOOST_CHECK_EQUAL(s.skill_name, "my_skill-1");
  BOOST_CHECK(s.persistent);
  BOOST_CHECK_EQUAL(s.cpus, 0.5);
  BOOST_CHECK_EQUAL(s.memory_mb, 64);
  BOOST_CHECK_EQUAL(s.pids_limit, 1);
  BOOST_CHECK(!s.read_only_rootfs);
  BOOST_CHECK_EQUAL(s.workspace_quota_mb, 7);
}

BOOST_AUTO_TEST_CASE(null_means_the_default) {
  const auto s = check_ok(spec_from(spec_with(
    R"(,"workdir":null,"timeout_sec":null,"network":null,"env":null,"image":null,"host_path":null,
    "host_path_mode":null,"mount_path":null,"extra_mounts":null,"skill_name":null,"persistent":null,
    "cpus":null,"memory_mb":null,"pids_limit":null,"read_only_rootfs":null,"workspace_quota_mb":null)")));
  BOOST_CHECK(s == check_ok(spec_from(spec_with(""))));
}

BOOST_AUTO_TEST_CASE(a_missing_session_id_is_a_key_error) {
  check_error(spec_from(R"({"cmd":"ls","timeout_sec":"bad"})"), ec::key, "'session_id'");
}

BOOST_AUTO_TEST_CASE(a_blank_session_id_is_refused) {
  check_error(spec_from(R"({"session_id":"   ","cmd":"ls"})"), ec::validation,
              "session_id must not be empty");
  check_error(spec_from(R"({"session_id":null,"cmd":"ls"})"), ec::validation,
              "session_id must be a string");
  check_error(spec_from(R"({"session_id":5,"cmd":"ls"})"), ec::validation,
              "session_id must be a string");
}

BOOST_AUTO_TEST_CASE(exec_requires_a_command_but_create_session_does_not) {
  check_error(spec_from(R"({"session_id":"s","cmd":"   "})"), ec::validation,
              "cmd must not be empty");
  check_error(spec_from(R"({"session_id":"s"})"), ec::validation, "cmd must not be empty");
  BOOST_CHECK(spec_from(R"({"session_id":"s"})", false).ok());
}

BOOST_AUTO_TEST_CASE(workdir_falls_back_to_a_non_blank_mount_path) {
  BOOST_CHECK_EQUAL(check_ok(spec_from(spec_with(R"(,"mount_path":"/data")"))).workdir, "/data");
  BOOST_CHECK_EQUAL(check_ok(spec_from(spec_with(R"(,"workdir":null,"mount_path":" /data ")"))).workdir,
                    "/data");
  BOOST_CHECK_EQUAL(check_ok(spec_from(spec_with(R"(,"workdir":"","mount_path":"/data")"))).workdir,
                    "/data");
  // An explicit workdir wins.
  BOOST_CHECK_EQUAL(
    check_ok(spec_from(spec_with(R"(,"workdir":"/tmp","mount_path":"/data")"))).workdir, "/tmp");
  // A blank mount_path does not feed the fallback; it then fails on its own.
  check_spec_error(R"(,"workdir":"","mount_path":"  ")",
                   "workdir must be an absolute path inside the sandbox");
}

BOOST_AUTO_TEST_CASE(workdir_must_be_absolute) {
  check_spec_error(R"(,"workdir":"rel/dir")", "workdir must be an absolute path inside the sandbox");
  check_spec_error(R"(,"workdir":"  ")", "workdir must be an absolute path inside the sandbox");
  check_spec_error(R"(,"workdir":"")", "workdir must be an absolute path inside the sandbox");
  check_spec_error(R"(,"workdir":7)", "workdir must be a string");
}

BOOST_AUTO_TEST_CASE(timeout_must_be_positive) {
  check_spec_error(R"(,"timeout_sec":0)", "timeout_sec must be greater than 0");
  check_spec_error(R"(,"timeout_sec":-5)", "timeout_sec must be greater than 0");
  BOOST_CHECK_EQUAL(check_ok(spec_from(spec_with(R"(,"timeout_sec":100000)"))).timeout_sec, 100000);
}

BOOST_AUTO_TEST_CASE(bool_is_never_accepted_as_integer) {
  check_spec_error(R"(,"timeout_sec":true)", "timeout_sec must be an integer");
  check_spec_error(R"(,"memory_mb":false)", "memory_mb must be an integer");
  check_spec_error(R"(,"pids_limit":true)", "pids_limit must be an integer");
  check_spec_error(R"(,"workspace_quota_mb":true)", "workspace_quota_mb must be an integer");
}

BOOST_AUTO_TEST_CASE(numeric_strings_are_never_accepted_as_integer) {
  check_spec_error(R"(,"timeout_sec":"5")", "timeout_sec must be an integer");
  check_spec_error(R"(,"memory_mb":"512")", "memory_mb must be an integer");
}

BOOST_AUTO_TEST_CASE(floats_are_never_accepted_as_integer) {
  check_spec_error(R"(,"timeout_sec":1.5)", "timeout_sec must be an integer");
  check_spec_error(R"(,"timeout_sec":30.0)", "timeout_sec must be an integer");
  check_spec_error(R"(,"pids_limit":1e2)", "pids_limit must be an integer");
}

// Python's int has no bound: a timeout beyond 64 bits is a very long timeout, which the
// ceiling (box.limits.max_timeout_sec) then clamps; a count beyond 64 bits is out of range.
BOOST_AUTO_TEST_CASE(integers_beyond_int64_saturate_or_are_refused) {
  for (auto big : {"9223372036854775808", "123456789012345678901234567890"}) {
    BOOST_TEST_CONTEXT(big) {
      auto spec = check_ok(spec_from(spec_with(std::string{R"(,"timeout_sec":)"} + big)));
      BOOST_CHECK_EQUAL(spec.timeout_sec, INT64_MAX);
    }
  }
  check_spec_error(R"(,"timeout_sec":-123456789012345678901234567890)",
                   "timeout_sec must be greater than 0");
  check_spec_error(R"(,"memory_mb":123456789012345678901234567890)",
                   "memory_mb must be less than or equal to 9223372036854775807");
}

BOOST_AUTO_TEST_CASE(network_accepts_only_off_and_on) {
  check_spec_error(R"(,"network":"OFF")", "network must be one of: off, on");
  check_spec_error(R"(,"network":true)", "network must be one of: off, on");
  check_spec_error(R"(,"network":"")", "network must be one of: off, on");
}

BOOST_AUTO_TEST_CASE(env_must_map_strings_to_strings) {
  check_spec_error(R"(,"env":{"A":1})", "env values must be strings");
  check_spec_error(R"(,"env":{"A":null})", "env values must be strings");
  check_spec_error(R"(,"env":["A"])", "env must be an object");
}

BOOST_AUTO_TEST_CASE(image_must_be_a_string) {
  check_spec_error(R"(,"image":1)", "image must be a string");
}

BOOST_AUTO_TEST_CASE(host_path_must_be_absolute_posix_or_windows) {
  for (auto ok_path : {"/srv/x", "C:\\\\work", "c:/work", "\\\\\\\\server\\\\share"}) {
    auto text = spec_with(std::string{R"(,"host_path":")"} + ok_path + "\"");
    BOOST_CHECK_MESSAGE(spec_from(text).ok(), text);
  }
  check_spec_error(R"(,"host_path":"relative/x")", "host_path must be an absolute host path");
  check_spec_error(R"(,"host_path":"")", "host_path must be an absolute host path");
  check_spec_error(R"(,"host_path":"   ")", "host_path must be an absolute host path");
  check_spec_error(R"(,"host_path":"C:")", "host_path must be an absolute host path");
  check_spec_error(R"(,"host_path":"\\single")", "host_path must be an absolute host path");
  check_spec_error(R"(,"host_path":1)", "host_path must be a string");
}

BOOST_AUTO_TEST_CASE(host_path_mode_accepts_only_none_ro_rw) {
  check_spec_error(R"(,"host_path_mode":"wo")", "host_path_mode must be one of: none, ro, rw");
}

BOOST_AUTO_TEST_CASE(mount_path_must_be_absolute) {
  check_spec_error(R"(,"workdir":"/w","mount_path":"data")",
                   "mount_path must be an absolute path inside the sandbox");
  check_spec_error(R"(,"mount_path":[])", "mount_path must be a string");
}

BOOST_AUTO_TEST_CASE(extra_mounts_are_validated_with_indexed_names) {
  check_spec_error(R"(,"extra_mounts":{})", "extra_mounts must be a list");
  check_spec_error(R"(,"extra_mounts":["x"])", "extra_mounts[0] must be an object");
  check_spec_error(R"(,"extra_mounts":[{"host_path":"/a","mount_path":"/b"},{"mount_path":"/c"}])",
                   "extra_mounts[1].host_path is required");
  check_spec_error(R"(,"extra_mounts":[{"host_path":"/a"}])",
                   "extra_mounts[0].mount_path is required");
  check_spec_error(R"(,"extra_mounts":[{"host_path":null,"mount_path":"/b"}])",
                   "extra_mounts[0].host_path must be a string");
  check_spec_error(R"(,"extra_mounts":[{"host_path":"/a","mount_path":5}])",
                   "extra_mounts[0].mount_path must be a string");
  check_spec_error(R"(,"extra_mounts":[{"host_path":"rel","mount_path":"/b"}])",
                   "extra_mounts[0].host_path must be an absolute host path");
  check_spec_error(R"(,"extra_mounts":[{"host_path":"/a","mount_path":"b"}])",
                   "extra_mounts[0].mount_path must be an absolute path inside the sandbox");
  check_spec_error(R"(,"extra_mounts":[{"host_path":"/a","mount_path":"/b","mode":"x"}])",
                   "extra_mounts[0].mode must be one of: none, ro, rw");
}

BOOST_AUTO_TEST_CASE(extra_mount_paths_are_normalized_as_python_does) {
  // langbot-plugin 0.7.13: posixpath.normpath(mount_path) must be mount_path itself.
  for (auto bad : {"/w/", "/a//b", "/a/./b", "/a/../b", "///a", "/a/.", "/a/.."})
    check_spec_error(std::string{R"(,"extra_mounts":[{"host_path":"/a","mount_path":")"} + bad + R"("}])",
                     "extra_mounts[0].mount_path must be normalized");
  for (auto good : {"/", "//a", "/a/b", "/a/.b/..c", " /a "}) {
    auto r = spec_from(spec_with(std::string{R"(,"extra_mounts":[{"host_path":"/a","mount_path":")"} + good + R"("}])"));
    BOOST_CHECK_MESSAGE(r.ok(), good);
  }
}

BOOST_AUTO_TEST_CASE(content_addressed_mounts_follow_0_7_13s_rules) {
  const std::string hex(64, 'a');
  auto mount = [&](const std::string& fields) {
    return std::string{R"(,"extra_mounts":[{"host_path":"/store/package",)"} + fields + "}]";
  };
  auto artifact = R"("mount_path":"/opt/langbot-artifacts/)" + hex + R"(","mode":"ro","content_digest":"sha256:)" + hex
                  + R"(","manifest_path":"/store/manifest.json")";
  const auto s = check_ok(spec_from(spec_with(mount(artifact))));
  BOOST_REQUIRE_EQUAL(s.extra_mounts.size(), 1u);
  BOOST_CHECK(is_content_addressed(s.extra_mounts[0]));
  BOOST_CHECK_EQUAL(s.extra_mounts[0].content_digest, "sha256:" + hex);
  BOOST_CHECK_EQUAL(s.extra_mounts[0].manifest_path, "/store/manifest.json");
  // A 0.7.16 client sends both keys as null on every other mount.
  const auto plain = check_ok(spec_from(spec_with(mount(R"("mount_path":"/m","content_digest":null,"manifest_path":null)"))));
  BOOST_CHECK(!is_content_addressed(plain.extra_mounts[0]));
  check_spec_error(mount(R"("mount_path":"/m","content_digest":"md5:x")"),
                   "extra_mounts[0].content_digest must use sha256:<hex>");
  check_spec_error(mount(R"("mount_path":"/m","content_digest":"sha256:ABC")"),
                   "extra_mounts[0].content_digest must use sha256:<64 lowercase hex>");
  check_spec_error(mount(R"("mount_path":"/m","content_digest":"sha256:)" + std::string(64, 'A') + "\""),
                   "extra_mounts[0].content_digest must use sha256:<64 lowercase hex>");
  check_spec_error(mount(R"("mount_path":"/m","manifest_path":"rel/manifest.json")"),
                   "extra_mounts[0].manifest_path must be an absolute host path");
  // The artifact root takes nothing but a read-only mount addressed by its own digest.
  const std::string artifact_error =
    "extra_mounts[0]: Artifact paths require a read-only digest-addressed mount and manifest";
  auto rw = artifact;
  rw.replace(rw.find(R"("mode":"ro")"), 11, R"("mode":"rw")");
  check_spec_error(mount(rw), artifact_error);
  check_spec_error(mount(R"("mount_path":"/opt/langbot-artifacts","mode":"ro")"), artifact_error);
  check_spec_error(mount(R"("mount_path":"/opt/langbot-artifacts/)" + std::string(64, 'b')
                         + R"(","mode":"ro","content_digest":"sha256:)" + hex
                         + R"(","manifest_path":"/store/manifest.json")"),
                   artifact_error);
  check_spec_error(mount(R"("mount_path":"/opt/langbot-artifacts/)" + hex + R"(","mode":"ro","content_digest":"sha256:)"
                         + hex + "\""),
                   artifact_error);
}

BOOST_AUTO_TEST_CASE(skill_name_is_stripped_and_blank_means_none) {
  BOOST_CHECK(check_ok(spec_from(spec_with(R"(,"skill_name":"   ")"))).skill_name.empty());
  BOOST_CHECK_EQUAL(check_ok(spec_from(spec_with(R"(,"skill_name":" a_b-C9 ")"))).skill_name,
                    "a_b-C9");
}

BOOST_AUTO_TEST_CASE(skill_name_accepts_unicode_letters) {
  BOOST_CHECK_EQUAL(check_ok(spec_from(spec_with(R"(,"skill_name":"技能-ä")"))).skill_name,
                    "技能-ä");
}

BOOST_AUTO_TEST_CASE(skill_name_refuses_punctuation_length_and_only_separators) {
  const std::string message =
    "skill_name can only contain up to 64 letters, numbers, hyphens and underscores";
  check_spec_error(R"(,"skill_name":"a b")", message);
  check_spec_error(R"(,"skill_name":"../x")", message);
  check_spec_error(R"(,"skill_name":"a.b")", message);
  check_spec_error(R"(,"skill_name":"--__")", message);
  check_spec_error(R"(,"skill_name":"a\u00a0b")", message);
  check_spec_error(R"(,"skill_name":"a\u2014b")", message);
  check_spec_error(",\"skill_name\":\"" + std::string(65, 'a') + "\"", message);
  BOOST_CHECK(spec_from(spec_with(",\"skill_name\":\"" + std::string(64, 'a') + "\"")).ok());
  // 64 characters of two bytes each are still 64 characters.
  std::string wide;
  for (int i = 0; i < 64; ++i)
    wide += "\xC3\xA4";
  BOOST_CHECK(spec_from(spec_with(",\"skill_name\":\"" + wide + "\"")).ok());
  check_spec_error(R"(,"skill_name":7)", "skill_name must be a string");
}

BOOST_AUTO_TEST_CASE(booleans_accept_only_true_and_false) {
  check_spec_error(R"(,"persistent":1)", "persistent must be a boolean");
  check_spec_error(R"(,"persistent":"true")", "persistent must be a boolean");
  check_spec_error(R"(,"read_only_rootfs":0)", "read_only_rootfs must be a boolean");
}

BOOST_AUTO_TEST_CASE(cpus_accepts_integers_and_floats_but_not_bool_or_string) {
  BOOST_CHECK_EQUAL(check_ok(spec_from(spec_with(R"(,"cpus":1)"))).cpus, 1.0);
  BOOST_CHECK_EQUAL(check_ok(spec_from(spec_with(R"(,"cpus":0.25)"))).cpus, 0.25);
  check_spec_error(R"(,"cpus":true)", "cpus must be a number");
  check_spec_error(R"(,"cpus":"1.0")", "cpus must be a number");
  check_spec_error(R"(,"cpus":0)", "cpus must be greater than 0");
  check_spec_error(R"(,"cpus":-0.5)", "cpus must be greater than 0");
}

BOOST_AUTO_TEST_CASE(resource_values_above_their_bounds_are_refused_before_any_arithmetic) {
  // 2^44 MiB would wrap memory_mb * 2^20 and leave memory unlimited.
  check_spec_error(R"(,"memory_mb":17592186044416)", "memory_mb must be less than or equal to 1048576");
  BOOST_CHECK(spec_from(spec_with(R"(,"memory_mb":1048576)")).ok());
  check_spec_error(R"(,"memory_mb":1048577)", "memory_mb must be less than or equal to 1048576");
  check_spec_error(R"(,"pids_limit":4194305)", "pids_limit must be less than or equal to 4194304");
  BOOST_CHECK(spec_from(spec_with(R"(,"pids_limit":4194304)")).ok());
  check_spec_error(R"(,"pids_limit":9223372036854775807)",
                   "pids_limit must be less than or equal to 4194304");
  const auto n = resource_bounds::cpus();
  BOOST_CHECK(spec_from(spec_with(",\"cpus\":" + std::to_string(n))).ok());
  check_spec_error(",\"cpus\":" + std::to_string(n) + ".5",
                   "cpus must be less than or equal to " + std::to_string(n));
  check_spec_error(R"(,"cpus":1e300)", "cpus must be less than or equal to " + std::to_string(n));
  check_spec_error(R"(,"workspace_quota_mb":17592186044416)",
                   "workspace_quota_mb must be less than or equal to 16777216");
}

BOOST_AUTO_TEST_CASE(resource_bounds_use_the_reference_messages) {
  check_spec_error(R"(,"memory_mb":31)", "memory_mb must be at least 32");
  BOOST_CHECK(spec_from(spec_with(R"(,"memory_mb":32)")).ok());
  check_spec_error(R"(,"pids_limit":0)", "pids_limit must be at least 1");
  check_spec_error(R"(,"workspace_quota_mb":-1)",
                   "workspace_quota_mb must be greater than or equal to 0");
}

BOOST_AUTO_TEST_CASE(workdir_must_stay_under_mount_path_when_host_path_is_given) {
  const std::string message = "workdir must stay under mount_path when host_path is provided";
  check_spec_error(R"(,"host_path":"/srv","mount_path":"/data","workdir":"/tmp")", message);
  check_spec_error(R"(,"host_path":"/srv","mount_path":"/data","workdir":"/database")", message);
  BOOST_CHECK(spec_from(spec_with(R"(,"host_path":"/srv","mount_path":"/data","workdir":"/data")")).ok());
  BOOST_CHECK(
    spec_from(spec_with(R"(,"host_path":"/srv","mount_path":"/data","workdir":"/data/x")")).ok());
  // Not enforced without a host path, or when the host mount is disabled.
  BOOST_CHECK(spec_from(spec_with(R"(,"mount_path":"/data","workdir":"/tmp")")).ok());
  BOOST_CHECK(spec_from(spec_with(
    R"(,"host_path":"/srv","host_path_mode":"none","mount_path":"/data","workdir":"/tmp")")).ok());
}

BOOST_AUTO_TEST_CASE(fields_are_validated_in_table_order_then_cross_rule_then_cmd) {
  check_error(spec_from(R"({"session_id":"","cmd":"","timeout_sec":0,"memory_mb":1})"),
              ec::validation, "timeout_sec must be greater than 0");
  check_error(spec_from(R"({"session_id":"","cmd":"","memory_mb":1})"), ec::validation,
              "session_id must not be empty");
  check_error(spec_from(R"({"session_id":"s","cmd":"","host_path":"/h","workdir":"/x","mount_path":"/m"})"),
              ec::validation, "workdir must stay under mount_path when host_path is provided");
}

BOOST_AUTO_TEST_CASE(a_non_object_spec_is_refused) {
  check_error(spec_from("[]"), ec::validation, "spec must be an object");
}

BOOST_AUTO_TEST_CASE(malformed_json_text_is_a_value_error) {
  auto r = spec_from("{");
  BOOST_REQUIRE(!r.ok());
  BOOST_CHECK(r.error().code == ec::value);
  BOOST_CHECK(r.error().message.starts_with("Invalid JSON: "));
}

BOOST_AUTO_TEST_CASE(the_last_duplicate_key_wins_as_in_python) {
  BOOST_CHECK_EQUAL(check_ok(spec_from(R"({"session_id":"s","cmd":"a","cmd":"b"})")).cmd, "b");
}

BOOST_AUTO_TEST_SUITE_END()

// -- managed process spec ---------------------------------------------------------------

BOOST_AUTO_TEST_SUITE(process_spec_suite)

using boxrt::test::process_from;

BOOST_AUTO_TEST_CASE(a_minimal_process_spec_gets_defaults) {
  const auto p = check_ok(process_from(R"({"command":"  python3  "})"));
  BOOST_CHECK_EQUAL(p.process_id, "default");
  BOOST_CHECK_EQUAL(p.command, "python3");
  BOOST_CHECK(p.args.empty());
  BOOST_CHECK(p.env.empty());
  BOOST_CHECK_EQUAL(p.cwd, "/workspace");
  BOOST_CHECK_EQUAL(p.memory_mb, 0);
}

BOOST_AUTO_TEST_CASE(every_process_field_is_decoded) {
  const auto p = check_ok(process_from(
    R"({"process_id":" web.1_a-b ","command":"node","args":["a","b"],"env":{"K":"V"},"cwd":" /w ","memory_mb":256})"));
  BOOST_CHECK_EQUAL(p.process_id, "web.1_a-b");
  BOOST_REQUIRE_EQUAL(p.args.size(), 2u);
  BOOST_CHECK_EQUAL(p.args[1], "b");
  BOOST_CHECK_EQUAL(p.env.at("K"), "V");
  BOOST_CHECK_EQUAL(p.cwd, "/w");
  BOOST_CHECK_EQUAL(p.memory_mb, 256);
}

BOOST_AUTO_TEST_CASE(process_command_is_required_and_non_empty) {
  check_error(process_from("{}"), ec::validation, "command is required");
  check_error(process_from(R"({"command":"  "})"), ec::validation, "command must not be empty");
  check_error(process_from(R"({"command":null})"), ec::validation, "command must be a string");
}

BOOST_AUTO_TEST_CASE(process_cwd_must_be_absolute) {
  check_error(process_from(R"({"command":"x","cwd":"w"})"), ec::validation,
              "cwd must be an absolute path inside the sandbox");
}

BOOST_AUTO_TEST_CASE(process_args_must_be_a_list_of_strings) {
  check_error(process_from(R"({"command":"x","args":"a b"})"), ec::validation, "args must be a list");
  check_error(process_from(R"({"command":"x","args":["a",1]})"), ec::validation,
              "args[1] must be a string");
}

BOOST_AUTO_TEST_CASE(process_env_values_must_be_strings) {
  check_error(process_from(R"({"command":"x","env":{"A":true}})"), ec::validation,
              "env values must be strings");
}

BOOST_AUTO_TEST_CASE(process_memory_must_be_a_non_negative_integer) {
  check_error(process_from(R"({"command":"x","memory_mb":-1})"), ec::validation,
              "memory_mb must be greater than or equal to 0");
  check_error(process_from(R"({"command":"x","memory_mb":true})"), ec::validation,
              "memory_mb must be an integer");
}

BOOST_AUTO_TEST_CASE(process_id_is_limited_to_128_safe_characters) {
  const std::string message =
    "process_id can only contain up to 128 letters, numbers, dots, hyphens and underscores";
  check_error(process_from(R"({"command":"x","process_id":"a/b"})"), ec::validation, message);
  check_error(process_from(R"({"command":"x","process_id":"  "})"), ec::validation, message);
  check_error(process_from("{\"command\":\"x\",\"process_id\":\"" + std::string(129, 'p') + "\"}"),
              ec::validation, message);
  BOOST_CHECK(process_from("{\"command\":\"x\",\"process_id\":\"" + std::string(128, 'p') + "\"}").ok());
  check_error(process_from(R"({"command":"x","process_id":1})"), ec::validation,
              "process_id must be a string");
}

BOOST_AUTO_TEST_CASE(a_non_object_process_spec_is_refused) {
  check_error(process_from("null"), ec::validation, "spec must be an object");
}

BOOST_AUTO_TEST_SUITE_END()
