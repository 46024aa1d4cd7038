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

BOOST_AUTO_TEST_SUITE_END()
