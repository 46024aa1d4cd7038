#include <boost/test/unit_test.hpp>

#include "messages/models.hpp"

using namespace boxrt;

BOOST_AUTO_TEST_SUITE(models_suite)

BOOST_AUTO_TEST_CASE(enums_render_their_wire_names) {
  BOOST_CHECK_EQUAL(to_string(network_mode::off), "off");
  BOOST_CHECK_EQUAL(to_string(network_mode::on), "on");
  BOOST_CHECK_EQUAL(to_string(mount_mode::none), "none");
  BOOST_CHECK_EQUAL(to_string(mount_mode::ro), "ro");
  BOOST_CHECK_EQUAL(to_string(mount_mode::rw), "rw");
  BOOST_CHECK_EQUAL(to_string(exec_status::completed), "completed");
  BOOST_CHECK_EQUAL(to_string(exec_status::timed_out), "timed_out");
  BOOST_CHECK_EQUAL(to_string(process_status::running), "running");
  BOOST_CHECK_EQUAL(to_string(process_status::exited), "exited");
  BOOST_CHECK_EQUAL(to_string(entitlement_status::active), "active");
  BOOST_CHECK_EQUAL(to_string(entitlement_status::suspended), "suspended");
  BOOST_CHECK_EQUAL(to_string(entitlement_status::cancelled), "cancelled");
}

BOOST_AUTO_TEST_CASE(extra_mount_key_skips_none_sorts_and_deduplicates) {
  box_spec spec;
  spec.extra_mounts = {{"/b", "/mnt/b", mount_mode::ro},
                       {"/a", "/mnt/a", mount_mode::rw},
                       {"/skip", "/mnt/skip", mount_mode::none},
                       {"/b", "/mnt/b", mount_mode::ro}};
  auto key = extra_mount_key(spec);
  BOOST_REQUIRE_EQUAL(key.size(), 2u);
  BOOST_CHECK(key[0] == (mount_spec{"/a", "/mnt/a", mount_mode::rw}));
  BOOST_CHECK(key[1] == (mount_spec{"/b", "/mnt/b", mount_mode::ro}));
}

BOOST_AUTO_TEST_CASE(skill_mounts_are_not_part_of_the_mount_key) {
  box_spec spec;
  spec.extra_mounts = {{"/srv/skills/a", "/workspace/.skills/a", mount_mode::ro},
                       {"/srv/data", "/data", mount_mode::ro},
                       {"/srv/skills/b", "/workspace/.skills/b/deeper", mount_mode::ro}};
  BOOST_CHECK(is_skill_mount(spec, spec.extra_mounts[0]));
  BOOST_CHECK(!is_skill_mount(spec, spec.extra_mounts[1]));
  BOOST_CHECK(!is_skill_mount(spec, spec.extra_mounts[2]));
  auto key = extra_mount_key(spec);
  BOOST_REQUIRE_EQUAL(key.size(), 2u);
  BOOST_CHECK_EQUAL(key[0].mount_path, "/data");
  BOOST_CHECK_EQUAL(key[1].mount_path, "/workspace/.skills/b/deeper");
}

BOOST_AUTO_TEST_CASE(extra_mount_key_is_independent_of_order) {
  box_spec x;
  x.extra_mounts = {{"/a", "/m/a", mount_mode::rw}, {"/b", "/m/b", mount_mode::ro}};
  box_spec y;
  y.extra_mounts = {{"/b", "/m/b", mount_mode::ro}, {"/a", "/m/a", mount_mode::rw},
                    {"/c", "/m/c", mount_mode::none}};
  BOOST_CHECK(extra_mount_key(x) == extra_mount_key(y));
}

BOOST_AUTO_TEST_CASE(session_info_copies_the_compat_fields_of_the_spec) {
  box_spec spec;
  spec.session_id = "s1";
  spec.image = "img";
  spec.network = network_mode::on;
  spec.host_path = "/h";
  spec.host_path_mode = mount_mode::ro;
  spec.mount_path = "/m";
  spec.persistent = true;
  spec.cpus = 2.5;
  spec.memory_mb = 1024;
  spec.pids_limit = 64;
  spec.read_only_rootfs = false;
  spec.workspace_quota_mb = 10;
  auto info = session_info_from_spec(spec);
  BOOST_CHECK_EQUAL(info.session_id, "s1");
  BOOST_CHECK_EQUAL(info.image, "img");
  BOOST_CHECK(info.network == network_mode::on);
  BOOST_CHECK_EQUAL(info.host_path, "/h");
  BOOST_CHECK(info.host_path_mode == mount_mode::ro);
  BOOST_CHECK_EQUAL(info.mount_path, "/m");
  BOOST_CHECK(info.persistent);
  BOOST_CHECK_EQUAL(info.cpus, 2.5);
  BOOST_CHECK_EQUAL(info.memory_mb, 1024);
  BOOST_CHECK_EQUAL(info.pids_limit, 64);
  BOOST_CHECK(!info.read_only_rootfs);
  BOOST_CHECK_EQUAL(info.workspace_quota_mb, 10);
  BOOST_CHECK(info.backend_name.empty());
  BOOST_CHECK_EQUAL(info.created_at, 0);
}

BOOST_AUTO_TEST_SUITE_END()
