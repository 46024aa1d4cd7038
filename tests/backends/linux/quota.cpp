// Quota images (backends/linux/quota.*): real loop mounts, root only, as CI runs.
#include "backends/linux/quota.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>

#include "temp_dir.hpp"

using namespace boxrt;
namespace fs = std::filesystem;

namespace {

boost::test_tools::assertion_result as_root(boost::unit_test::test_unit_id) {
  return {::geteuid() == 0 && ::access("/usr/sbin/debugfs", X_OK) == 0};
}

/// What `e2fsck -fn` (a full check that changes nothing) says of an image.
bool image_is_consistent(const std::string& image) {
  int status = 0;
  run_tool_status({"e2fsck", "-fn", image}, status);
  return status == 0;
}

/// Leaves a record of `mount_point` as a run that died with the image mounted would,
/// without the mount (the machine went down).
void leave_record(const std::string& records, const std::string& mount_point, const std::string& image) {
  fs::create_directories(records);
  std::ofstream{records + "/crashed"} << mount_point << "\n" << image << "\n";
}

} // namespace

BOOST_AUTO_TEST_SUITE(quota_suite, *boost::unit_test::precondition(as_root))

BOOST_AUTO_TEST_CASE(an_image_left_mounted_by_a_crash_is_checked_before_it_is_mounted_again) {
  testing::temp_dir dir;
  auto images = dir.str("images"), records = dir.str("records"), point = dir.str("ws");
  {
    loop_quota q{images, records};
    auto lease = q.acquire("ws", point, 8, 1000, 1000);
    BOOST_REQUIRE_MESSAGE(lease.ok(), (lease.ok() ? std::string{} : lease.error().message));
    std::ofstream{point + "/kept.txt"} << "kept";
  }
  auto image = images + "/ws.ext4";
  // The machine went down while it was mounted: marked not clean, a link count wrong.
  int status = 0;
  run_tool_status({"debugfs", "-w", "-R", "sif <2> links_count 5", image}, status);
  run_tool_status({"debugfs", "-w", "-R", "ssv state 0", image}, status);
  BOOST_REQUIRE(!image_is_consistent(image));
  leave_record(records, point, image);
  {
    loop_quota q{images, records};
    q.cleanup_recorded();
    auto lease = q.acquire("ws", point, 8, 1000, 1000);
    BOOST_REQUIRE_MESSAGE(lease.ok(), (lease.ok() ? std::string{} : lease.error().message));
    std::ifstream in{point + "/kept.txt"};
    std::string text;
    in >> text;
    BOOST_TEST(text == "kept");
  }
  // e2fsck -p repaired it before the mount.
  BOOST_TEST(image_is_consistent(image));
}

BOOST_AUTO_TEST_CASE(an_image_e2fsck_cannot_repair_refuses_its_workspace_with_a_clear_error) {
  testing::temp_dir dir;
  auto images = dir.str("images"), records = dir.str("records"), point = dir.str("ws");
  {
    loop_quota q{images, records};
    BOOST_REQUIRE(q.acquire("ws", point, 8, 1000, 1000).ok());
  }
  auto image = images + "/ws.ext4";
  // The root folder's inode is gone: preen mode stops and asks for an operator.
  int status = 0;
  run_tool_status({"debugfs", "-w", "-R", "clri <2>", image}, status);
  run_tool_status({"debugfs", "-w", "-R", "ssv state 0", image}, status);
  leave_record(records, point, image);
  loop_quota q{images, records};
  q.cleanup_recorded();
  auto lease = q.acquire("ws", point, 8, 1000, 1000);
  BOOST_REQUIRE(!lease.ok());
  BOOST_TEST(wire_class(lease.error().code) == "BoxError");
  BOOST_TEST(lease.error().message.rfind("the quota image of " + point
                                           + " was not cleanly unmounted and e2fsck cannot repair it: ",
                                         0)
             == 0u);
  BOOST_TEST(mounts_under(point).empty());
}

BOOST_AUTO_TEST_SUITE_END()
