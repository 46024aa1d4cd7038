// The default workspace at start-up and at box_init: one check, the reference's texts.
#include <filesystem>
#include <fstream>

#include <boost/test/unit_test.hpp>

#include "backends/mount_policy.hpp"
#include "temp_dir.hpp"

using namespace boxrt;
using boxrt::testing::temp_dir;

BOOST_AUTO_TEST_SUITE(mount_policy_suite)

BOOST_AUTO_TEST_CASE(the_default_workspace_is_created_under_an_allowed_root) {
  temp_dir root;
  local_config local;
  local.allowed_mount_roots = {root.str()};
  local.default_workspace = root.str("a/b");
  BOOST_TEST(!ensure_default_workspace(local));
  BOOST_TEST(std::filesystem::is_directory(root.str("a/b")));
  // An existing directory is fine wherever it is.
  local.allowed_mount_roots = {"/nonexistent-root"};
  BOOST_TEST(!ensure_default_workspace(local));
}

BOOST_AUTO_TEST_CASE(each_refusal_has_the_reference_text) {
  temp_dir root;
  std::ofstream{root.str("file")} << "x";
  local_config local;
  local.allowed_mount_roots = {root.str("r1"), root.str("r2")};

  local.default_workspace = root.str("file");
  auto err = ensure_default_workspace(local);
  BOOST_TEST((err.code == ec::validation));
  BOOST_CHECK_EQUAL(err.message,
                    "box.local.default_workspace must point to a directory on the Box runtime host");

  local.default_workspace = root.str("elsewhere");
  err = ensure_default_workspace(local);
  BOOST_CHECK_EQUAL(err.message, "box.local.default_workspace is outside allowed_mount_roots: "
                                   + root.str("r1") + ", " + root.str("r2"));
  BOOST_TEST(!std::filesystem::exists(root.str("elsewhere")));

  local.allowed_mount_roots.clear();
  err = ensure_default_workspace(local);
  BOOST_CHECK_EQUAL(err.message, "box.local.default_workspace cannot be created because no "
                                 "allowed_mount_roots are configured");

  local.default_workspace.clear();
  BOOST_TEST(!ensure_default_workspace(local));
}

BOOST_AUTO_TEST_CASE(an_artifact_manifest_lies_under_the_allowed_roots_and_exists) {
  temp_dir root, elsewhere;
  std::filesystem::create_directories(root.str("store/package"));
  std::ofstream{root.str("store/manifest.json")} << "{}";
  std::ofstream{elsewhere.str("manifest.json")} << "{}";
  local_config local;
  local.allowed_mount_roots = {root.str()};
  box_spec spec;
  const std::string hex(64, 'c');
  spec.extra_mounts = {mount_spec{root.str("store/package"), "/opt/langbot-artifacts/" + hex, mount_mode::ro,
                                  "sha256:" + hex, root.str("store/manifest.json")}};
  BOOST_TEST(!check_spec_mounts(spec, local));
  spec.extra_mounts[0].manifest_path = elsewhere.str("manifest.json");
  auto outside = check_spec_mounts(spec, local);
  BOOST_TEST(outside.message.find("extra_mounts[0].manifest_path is outside allowed_mount_roots") == 0,
             outside.message);
  spec.extra_mounts[0].manifest_path = root.str("store/missing.json");
  BOOST_TEST(check_spec_mounts(spec, local).message
             == "extra_mounts[0].manifest_path " + root.str("store/missing.json") + " is not a file");
}

namespace {

std::string admitted_text(const result<std::vector<mount_spec>>& r) {
  if (r)
    return "ok";
  return std::string{r.error().code == ec::admission ? "BoxAdmissionError: " : "other: "} + r.error().message;
}

} // namespace

BOOST_AUTO_TEST_CASE(admission_read_only_mounts_follow_the_reference_rules_in_order) {
  namespace fs = std::filesystem;
  temp_dir root, elsewhere;
  const std::string hex(64, 'a');
  fs::create_directories(root.str("rev/package"));
  std::ofstream{root.str("rev/manifest.json")} << "{}";
  fs::create_directories(root.str("data"));
  fs::create_directories(elsewhere.str("data"));
  std::ofstream{elsewhere.str("manifest.json")} << "{}";
  // A link inside a root that leads out of it is judged by where it leads.
  fs::create_directory_symlink(elsewhere.str("data"), root.str("link"));
  const std::vector<std::string> roots{root.str()};
  const mount_spec artifact{root.str("rev/package"), "/opt/langbot-artifacts/" + hex, mount_mode::ro,
                            "sha256:" + hex, root.str("rev/manifest.json")};
  const mount_spec data{root.str("data"), "/workspace/data", mount_mode::ro};

  auto ok = admit_read_only_mounts({artifact, data}, roots);
  BOOST_REQUIRE(ok);
  BOOST_CHECK_EQUAL(ok->size(), 2u);
  BOOST_TEST(admitted_text(admit_read_only_mounts({}, {})) == "ok");

  auto with = [&](auto change, mount_spec m) {
    change(m);
    return admitted_text(admit_read_only_mounts({m}, roots));
  };
  std::vector<mount_spec> many(257, data);
  BOOST_TEST(admitted_text(admit_read_only_mounts(many, roots))
             == "BoxAdmissionError: Managed sandbox accepts at most 256 read-only mounts");
  BOOST_TEST(admitted_text(admit_read_only_mounts({data}, {}))
             == "BoxAdmissionError: Managed sandbox read-only mounts require allowed_mount_roots");
  BOOST_TEST(with([](mount_spec& m) { m.mode = mount_mode::rw; }, data)
             == "BoxAdmissionError: Managed sandbox additional mounts must be read-only");
  BOOST_TEST(with([](mount_spec& m) { m.mode = mount_mode::none; }, data)
             == "BoxAdmissionError: Managed sandbox additional mounts must be read-only");
  BOOST_TEST(with([&](mount_spec& m) { m.host_path = root.str("missing"); }, data)
             == "BoxAdmissionError: Managed sandbox read-only mount source is unavailable");
  BOOST_TEST(with([&](mount_spec& m) { m.host_path = root.str("rev/manifest.json"); }, data)
             == "BoxAdmissionError: Managed sandbox read-only mount source is unavailable");
  BOOST_TEST(with([&](mount_spec& m) { m.host_path = root.str("link"); }, data)
             == "BoxAdmissionError: Managed sandbox read-only mount source is outside allowed_mount_roots");
  BOOST_TEST(with([&](mount_spec& m) { m.content_digest.clear(); }, artifact)
             == "BoxAdmissionError: Managed sandbox mount manifests require content_digest");
  BOOST_TEST(with([&](mount_spec& m) { m.manifest_path = root.str("rev/missing.json"); }, artifact)
             == "BoxAdmissionError: Managed sandbox read-only mount manifest is unavailable");
  BOOST_TEST(with([&](mount_spec& m) { m.manifest_path = elsewhere.str("manifest.json"); }, artifact)
             == "BoxAdmissionError: Managed sandbox read-only mount manifest is outside allowed_mount_roots");
  // A digest without a manifest is not content-addressed: its target must be in /workspace.
  BOOST_TEST(with([&](mount_spec& m) { m.content_digest = "sha256:" + hex; }, data) == "ok");
  BOOST_TEST(with([](mount_spec& m) { m.mount_path = "/workspace"; }, data)
             == "BoxAdmissionError: Managed sandbox additional mount targets must stay under /workspace");
  BOOST_TEST(with([](mount_spec& m) { m.mount_path = "/opt/langbot-artifacts/" + std::string(64, 'b'); }, artifact)
             == "BoxAdmissionError: Managed sandbox additional mount targets must stay under /workspace");
  BOOST_TEST(admitted_text(admit_read_only_mounts({data, data}, roots))
             == "BoxAdmissionError: Managed sandbox additional mount targets must be unique");
  // The first failing mount wins, whatever fails later.
  auto rw = data;
  rw.mode = mount_mode::rw;
  auto missing = data;
  missing.host_path = root.str("missing");
  BOOST_TEST(admitted_text(admit_read_only_mounts({missing, rw}, roots))
             == "BoxAdmissionError: Managed sandbox read-only mount source is unavailable");
}

BOOST_AUTO_TEST_CASE(admitted_mounts_carry_their_real_paths) {
  namespace fs = std::filesystem;
  temp_dir root;
  const std::string hex(64, 'd');
  fs::create_directories(root.str("store/rev/package"));
  std::ofstream{root.str("store/rev/manifest.json")} << "{}";
  fs::create_directory_symlink(root.str("store"), root.str("alias"));
  mount_spec m{root.str("alias/rev/package"), "/opt/langbot-artifacts/" + hex, mount_mode::ro, "sha256:" + hex,
               root.str("alias/./rev/manifest.json")};
  auto out = admit_read_only_mounts({m}, {root.str()});
  BOOST_REQUIRE(out);
  BOOST_CHECK_EQUAL((*out)[0].host_path, root.str("store/rev/package"));
  BOOST_CHECK_EQUAL((*out)[0].manifest_path, root.str("store/rev/manifest.json"));
  BOOST_CHECK_EQUAL((*out)[0].mount_path, m.mount_path);
  BOOST_CHECK_EQUAL((*out)[0].content_digest, m.content_digest);
}

BOOST_AUTO_TEST_SUITE_END()
