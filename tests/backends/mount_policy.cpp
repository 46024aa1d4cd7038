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

namespace {

namespace fs = std::filesystem;

const std::string ns_a = "ws-" + std::string(24, 'a');
const std::string ns_b = "ws-" + std::string(24, 'b');

/// `<store>/tenants/<ns>/.langbot-skill-store/revisions/<hex>`, as LangBot 4.11 publishes
/// a revision: its package folder and its manifest made.
std::string publish(const std::string& store, const std::string& ns, const std::string& hex,
                    bool manifest = true) {
  auto rev = store + "/tenants/" + ns + "/.langbot-skill-store/revisions/" + hex;
  fs::create_directories(rev + "/package");
  if (manifest)
    std::ofstream{rev + "/manifest.json"} << "{}";
  return rev;
}

mount_spec artifact_of(const std::string& rev, const std::string& hex) {
  return mount_spec{rev + "/package", "/opt/langbot-artifacts/" + hex, mount_mode::ro, "sha256:" + hex,
                    rev + "/manifest.json"};
}

/// Workspace A's fence on a host root `root` (default workspace `<root>/default`).
mount_fence fence_of(const std::string& root, const std::string& transfer = {}) {
  local_config local;
  local.host_root = root;
  return make_mount_fence(resolve_local(local), ns_a, root + "/default/tenants/" + ns_a, transfer);
}

} // namespace

BOOST_AUTO_TEST_CASE(admission_read_only_mounts_follow_the_reference_rules_in_order) {
  temp_dir root, elsewhere;
  const std::string hex(64, 'a');
  auto rev = publish(root.str("skills"), ns_a, hex);
  fs::create_directories(root.str("data"));
  fs::create_directories(elsewhere.str("data"));
  std::ofstream{elsewhere.str("manifest.json")} << "{}";
  std::ofstream{root.str("data.json")} << "{}";
  // A link inside a root that leads out of it is judged by where it leads.
  fs::create_directory_symlink(elsewhere.str("data"), root.str("link"));
  const std::vector<std::string> roots{root.str()};
  const auto fence = fence_of(root.str());
  const auto artifact = artifact_of(rev, hex);
  const mount_spec data{root.str("data"), "/workspace/data", mount_mode::ro};

  auto ok = admit_read_only_mounts({artifact, data}, roots, fence);
  BOOST_REQUIRE(ok);
  BOOST_CHECK_EQUAL(ok->size(), 2u);
  BOOST_TEST(admitted_text(admit_read_only_mounts({}, {}, fence)) == "ok");

  auto with = [&](auto change, mount_spec m) {
    change(m);
    return admitted_text(admit_read_only_mounts({m}, roots, fence));
  };
  std::vector<mount_spec> many(257, data);
  BOOST_TEST(admitted_text(admit_read_only_mounts(many, roots, fence))
             == "BoxAdmissionError: Managed sandbox accepts at most 256 read-only mounts");
  BOOST_TEST(admitted_text(admit_read_only_mounts({data}, {}, fence))
             == "BoxAdmissionError: Managed sandbox read-only mounts require allowed_mount_roots");
  BOOST_TEST(with([](mount_spec& m) { m.mode = mount_mode::rw; }, data)
             == "BoxAdmissionError: Managed sandbox additional mounts must be read-only");
  BOOST_TEST(with([](mount_spec& m) { m.mode = mount_mode::none; }, data)
             == "BoxAdmissionError: Managed sandbox additional mounts must be read-only");
  BOOST_TEST(with([&](mount_spec& m) { m.host_path = root.str("missing"); }, data)
             == "BoxAdmissionError: Managed sandbox read-only mount source is unavailable");
  BOOST_TEST(with([&](mount_spec& m) { m.host_path = root.str("data.json"); }, data)
             == "BoxAdmissionError: Managed sandbox read-only mount source is unavailable");
  BOOST_TEST(with([&](mount_spec& m) { m.host_path = root.str("link"); }, data)
             == "BoxAdmissionError: Managed sandbox read-only mount source is outside allowed_mount_roots");
  BOOST_TEST(with([&](mount_spec& m) { m.content_digest.clear(); }, artifact)
             == "BoxAdmissionError: Managed sandbox mount manifests require content_digest");
  auto bare = publish(root.str("skills"), ns_a, std::string(64, 'e'), false);
  BOOST_TEST(admitted_text(admit_read_only_mounts({artifact_of(bare, std::string(64, 'e'))}, roots, fence))
             == "BoxAdmissionError: Managed sandbox read-only mount manifest is unavailable");
  // A mount that is not content-addressed may name a manifest of its own.
  auto named = data;
  named.content_digest = "sha256:" + hex;
  named.manifest_path = root.str("data.json");
  BOOST_TEST(admitted_text(admit_read_only_mounts({named}, roots, fence)) == "ok");
  named.manifest_path = elsewhere.str("manifest.json");
  BOOST_TEST(admitted_text(admit_read_only_mounts({named}, roots, fence))
             == "BoxAdmissionError: Managed sandbox read-only mount manifest is outside allowed_mount_roots");
  // A digest without a manifest is not content-addressed: its target must be in /workspace.
  BOOST_TEST(with([&](mount_spec& m) { m.content_digest = "sha256:" + hex; }, data) == "ok");
  BOOST_TEST(with([](mount_spec& m) { m.mount_path = "/workspace"; }, data)
             == "BoxAdmissionError: Managed sandbox additional mount targets must stay under /workspace");
  BOOST_TEST(admitted_text(admit_read_only_mounts({data, data}, roots, fence))
             == "BoxAdmissionError: Managed sandbox additional mount targets must be unique");
  // The first failing mount wins, whatever fails later.
  auto rw = data;
  rw.mode = mount_mode::rw;
  auto missing = data;
  missing.host_path = root.str("missing");
  BOOST_TEST(admitted_text(admit_read_only_mounts({missing, rw}, roots, fence))
             == "BoxAdmissionError: Managed sandbox read-only mount source is unavailable");
}

// Before, any read-only directory under the roots passed: A's sandbox mounted B's tree
// (or the tenants folder, or boxd's state), and manifest_path told which paths exist.
BOOST_AUTO_TEST_CASE(a_workspace_never_mounts_another_workspaces_tree_or_boxds_folders) {
  temp_dir host, outside;
  const auto root = host.str();
  const std::string hex(64, 'a'), other_hex(64, 'c');
  const auto tenants = root + "/default/tenants";
  const auto tree_a = tenants + "/" + ns_a, tree_b = tenants + "/" + ns_b;
  fs::create_directories(tree_a + "/d");
  fs::create_directories(tree_b + "/d");
  std::ofstream{tree_b + "/secret.txt"} << "b";
  fs::create_directories(root + "/state");
  fs::create_directories(root + "/transfers/x");
  auto rev_a = publish(root + "/skills", ns_a, hex);
  auto rev_b = publish(root + "/skills", ns_b, hex);
  auto rev_a_outside = publish(outside.str("skills"), ns_a, other_hex);
  auto staging = root + "/skills/tenants/" + ns_a + "/.langbot-skill-store/staging/publish-1";
  fs::create_directories(staging + "/package");
  std::ofstream{staging + "/manifest.json"} << "{}";
  // A revision forged inside A's own (tenant-writable) tree.
  auto forged = publish(tree_a + "/store", ns_a, hex);
  // Links in A's tree that lead into B's, to something there and to nothing.
  fs::create_directory_symlink(tree_b + "/d", tree_a + "/to-b");
  fs::create_directory_symlink(tree_b + "/nothing", tree_a + "/to-b-missing");
  const std::vector<std::string> roots{root, outside.str()};
  const auto fence = fence_of(root, root + "/transfers");
  const std::string refused = std::string{"BoxAdmissionError: "} + foreign_mount_text;
  auto admit = [&](const mount_spec& m) { return admitted_text(admit_read_only_mounts({m}, roots, fence)); };
  auto plain = [](const std::string& source) { return mount_spec{source, "/workspace/x", mount_mode::ro}; };
  auto addressed = [&](const std::string& source, const std::string& manifest) {
    return mount_spec{source, "/opt/langbot-artifacts/" + hex, mount_mode::ro, "sha256:" + hex, manifest};
  };

  // The reported attack: B's tree as a content-addressed source, any file as its manifest.
  BOOST_TEST(admit(addressed(tree_b, tree_b + "/secret.txt")) == refused);
  BOOST_TEST(admit(addressed(tree_b, tree_b + "/missing.txt")) == refused);
  // Neither B's tree nor anything of boxd's, existing or not, as a plain source.
  for (const auto& source : {tree_b, tree_b + "/d", tree_b + "/missing", tenants + "/ws-" + std::string(24, 'c'),
                             tenants, root + "/default", root, root + "/state", root + "/state/nothing",
                             root + "/transfers", root + "/transfers/x", root + "/skills/tenants",
                             root + "/x/tenants/" + ns_b + "/y", tree_a + "/to-b", tree_a + "/to-b-missing"})
    BOOST_TEST(admit(plain(source)) == refused, source);
  // B's manifest, existing or not, beside an admissible source.
  auto with_manifest = plain(tree_a + "/d");
  with_manifest.content_digest = "sha256:" + hex;
  for (const auto& manifest : {tree_b + "/secret.txt", tree_b + "/missing.txt", root + "/state/x"}) {
    with_manifest.manifest_path = manifest;
    BOOST_TEST(admit(with_manifest) == refused, manifest);
  }
  // Content-addressed: only A's own published revision of that digest.
  BOOST_TEST(admit(artifact_of(rev_a, hex)) == "ok");
  BOOST_TEST(admit(artifact_of(rev_a_outside, other_hex)) == "ok"); // a skills root outside host_root
  BOOST_TEST(admit(artifact_of(rev_b, hex)) == refused);
  BOOST_TEST(admit(addressed(rev_a + "/package", rev_b + "/manifest.json")) == refused);
  BOOST_TEST(admit(addressed(rev_a + "/package", tree_a + "/d/manifest.json")) == refused);
  BOOST_TEST(admit(addressed(staging + "/package", staging + "/manifest.json")) == refused);
  BOOST_TEST(admit(artifact_of(forged, hex)) == refused);
  BOOST_TEST(admit(addressed(tree_a + "/d", rev_a + "/manifest.json")) == refused);
  auto wrong_hex = artifact_of(rev_a_outside, other_hex);
  wrong_hex.host_path = rev_a + "/package";
  wrong_hex.manifest_path = rev_a + "/manifest.json";
  BOOST_TEST(admit(wrong_hex) == refused);
  // A plain mount of A's own tree stays as the reference has it.
  BOOST_TEST(admit(plain(tree_a + "/d")) == "ok");
  // Read-only comes first, as in the reference.
  auto rw = plain(tree_b);
  rw.mode = mount_mode::rw;
  BOOST_TEST(admit(rw) == "BoxAdmissionError: Managed sandbox additional mounts must be read-only");
}

// Standard mode trusts the host as the reference does, but not with another workspace's tree.
BOOST_AUTO_TEST_CASE(standard_mode_refuses_another_workspaces_tree) {
  temp_dir host;
  const auto root = host.str();
  const auto tenants = root + "/default/tenants";
  fs::create_directories(tenants + "/" + ns_a + "/.mcp/p");
  fs::create_directories(tenants + "/" + ns_b + "/d");
  fs::create_directory_symlink(tenants + "/" + ns_b + "/d", root + "/alias");
  local_config local;
  local.host_root = root;
  local = resolve_local(local);
  box_spec spec;
  spec.host_path = tenants + "/" + ns_a;
  auto fence = make_mount_fence(local, ns_a, spec.host_path, {});
  auto check = [&](const std::string& source) {
    spec.extra_mounts = {mount_spec{source, "/workspace/x", mount_mode::ro}};
    return check_spec_mounts(spec, local, &fence).message;
  };
  BOOST_TEST(check(tenants + "/" + ns_a + "/.mcp/p") == "");
  for (const auto& source : {tenants + "/" + ns_b + "/d", root + "/alias"})
    BOOST_TEST(check(source) == "extra_mounts[0].host_path " + source + " is blocked for security", source);
  // A workspace deeper in its own tree keeps that tree as its own.
  spec.host_path = tenants + "/" + ns_a + "/.mcp/p";
  fence = make_mount_fence(local, "", spec.host_path, {});
  BOOST_TEST(check(tenants + "/" + ns_a + "/.mcp/p") == "");
  BOOST_TEST(check(tenants + "/" + ns_b + "/d") != "");
}

BOOST_AUTO_TEST_CASE(admitted_mounts_carry_their_real_paths) {
  temp_dir root;
  const std::string hex(64, 'd');
  publish(root.str("store"), ns_a, hex);
  fs::create_directory_symlink(root.str("store"), root.str("alias"));
  auto rev = root.str("alias/tenants/" + ns_a + "/.langbot-skill-store/revisions/" + hex);
  mount_spec m{rev + "/package", "/opt/langbot-artifacts/" + hex, mount_mode::ro, "sha256:" + hex,
               rev + "/./manifest.json"};
  auto out = admit_read_only_mounts({m}, {root.str()}, fence_of(root.str()));
  BOOST_REQUIRE(out);
  auto real = root.str("store/tenants/" + ns_a + "/.langbot-skill-store/revisions/" + hex);
  BOOST_CHECK_EQUAL((*out)[0].host_path, real + "/package");
  BOOST_CHECK_EQUAL((*out)[0].manifest_path, real + "/manifest.json");
  BOOST_CHECK_EQUAL((*out)[0].mount_path, m.mount_path);
  BOOST_CHECK_EQUAL((*out)[0].content_digest, m.content_digest);
}

BOOST_AUTO_TEST_SUITE_END()
