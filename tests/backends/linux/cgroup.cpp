// cgroup_tree at file level, on a fake hierarchy in a temp folder: which files a
// group's limits go to on v1 and on v2, and that removal stays inside the base.
// (The real v1 hierarchy is exercised by the bwrap tests.)
#include "backends/linux/cgroup.hpp"

#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>

#include "tests/backends/temp_dir.hpp"

using namespace boxrt;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in{p};
  std::string s;
  std::getline(in, s);
  return s;
}

} // namespace

BOOST_AUTO_TEST_SUITE(cgroup_suite)

BOOST_AUTO_TEST_CASE(v2_is_detected_only_when_memory_pids_and_cpu_are_delegated) {
  testing::temp_dir root;
  BOOST_TEST((cgroup_tree::detect(root.str()) == cgroup_tree::version::v1));
  std::ofstream{root.str() + "/cgroup.controllers"} << "hugetlb\n";
  BOOST_TEST((cgroup_tree::detect(root.str()) == cgroup_tree::version::v1));
  std::ofstream{root.str() + "/cgroup.controllers"} << "cpuset cpu io memory pids\n";
  BOOST_TEST((cgroup_tree::detect(root.str()) == cgroup_tree::version::v2));
}

BOOST_AUTO_TEST_CASE(v2_limits_go_to_the_unified_files) {
  testing::temp_dir root;
  cgroup_tree tree{root.str(), "boxrt-test", cgroup_tree::version::v2};
  BOOST_TEST(std::string{tree.mechanism()} == "cgroup_v2");
  auto g = tree.create("s1", cgroup_limits{256 << 20, 67, 1.5});
  BOOST_REQUIRE(g.ok());
  auto dir = fs::path{root.str()} / "boxrt-test" / "s1";
  BOOST_TEST(slurp(fs::path{root.str()} / "boxrt-test" / "cgroup.subtree_control") == "+memory +pids +cpu");
  BOOST_TEST(slurp(dir / "memory.max") == std::to_string(256 << 20));
  BOOST_TEST(slurp(dir / "pids.max") == "67");
  BOOST_TEST(slurp(dir / "cpu.max") == "150000 100000");
  BOOST_TEST((*g)->join_fds().size() == 1u);
  std::ofstream{dir / "memory.events"} << "low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n";
  BOOST_TEST((*g)->oom_kills() == 2);
}

BOOST_AUTO_TEST_CASE(v1_limits_go_to_one_group_per_controller) {
  testing::temp_dir root;
  for (auto c : {"memory", "pids", "cpu"})
    fs::create_directories(fs::path{root.str()} / c);
  cgroup_tree tree{root.str(), "boxrt-test", cgroup_tree::version::v1};
  BOOST_TEST(std::string{tree.mechanism()} == "cgroup_v1");
  auto g = tree.create("s1", cgroup_limits{64 << 20, 19, 0.5});
  BOOST_REQUIRE(g.ok());
  auto at = [&](const char* c) { return fs::path{root.str()} / c / "boxrt-test" / "s1"; };
  BOOST_TEST(slurp(at("memory") / "memory.limit_in_bytes") == std::to_string(64 << 20));
  BOOST_TEST(slurp(at("pids") / "pids.max") == "19");
  BOOST_TEST(slurp(at("cpu") / "cpu.cfs_quota_us") == "50000");
  BOOST_TEST(slurp(at("cpu") / "cpu.cfs_period_us") == "100000");
  BOOST_TEST((*g)->join_fds().size() == 3u);
  std::ofstream{at("memory") / "memory.oom_control"} << "oom_kill_disable 0\nunder_oom 0\noom_kill 4\n";
  BOOST_TEST((*g)->oom_kills() == 4);
}

BOOST_AUTO_TEST_CASE(a_missing_v1_controller_is_a_clear_error) {
  testing::temp_dir root;
  fs::create_directories(fs::path{root.str()} / "memory");
  cgroup_tree tree{root.str(), "boxrt-test", cgroup_tree::version::v1};
  auto g = tree.create("s1", cgroup_limits{64 << 20, 19, 0.5});
  BOOST_REQUIRE(!g.ok());
  BOOST_TEST(g.error().message == "cgroup v1 controller pids is not mounted");
  std::string why;
  BOOST_TEST(!tree.usable(&why));
  BOOST_TEST(why == "cgroup v1 controller pids is not mounted");
}

BOOST_AUTO_TEST_SUITE_END()
