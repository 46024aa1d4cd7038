// box_get_storage_analysis's host walk: counted as langbot-plugin counts, never through a
// link, and bounded.
#include "backends/linux/usage.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <boost/test/unit_test.hpp>

#include "backends/linux/beneath.hpp"
#include "temp_dir.hpp"

using namespace boxrt;
using boxrt::testing::temp_dir;
namespace fs = std::filesystem;

BOOST_AUTO_TEST_SUITE(usage_suite)

BOOST_AUTO_TEST_CASE(files_and_links_count_with_their_own_size_and_no_link_is_followed) {
  temp_dir root, outside;
  fs::create_directories(root.str("ws/a/b"));
  std::ofstream{root.str("ws/a/b/f")} << std::string(1000, 'x');
  std::ofstream{root.str("ws/g")} << "12345";
  std::ofstream{outside.str("big")} << std::string(100000, 'y');
  // Links out of the tree, to a folder and to a file: each is one entry of its own size.
  fs::create_directory_symlink(outside.str(), root.str("ws/a/out"));
  fs::create_symlink(outside.str("big"), root.str("ws/big"));
  auto fd = beneath::open_root(root.str());
  BOOST_REQUIRE(fd);
  auto u = measure_tree(fd.get(), "ws");
  BOOST_TEST(u.exists);
  BOOST_TEST(u.file_count == 4);
  BOOST_TEST(u.size_bytes == static_cast<int64_t>(1000 + 5 + outside.str().size() + outside.str("big").size()));
  BOOST_TEST(u.error_count == 0);
  // The entry itself a link to a folder: refused, never entered.
  auto linked = measure_tree(fd.get(), "ws/a/out");
  BOOST_TEST(linked.size_bytes < 100000);
  auto missing = measure_tree(fd.get(), "ws/none");
  BOOST_TEST(!missing.exists);
  BOOST_TEST(missing.error_count == 0);
  auto file = measure_tree(fd.get(), "ws/g");
  BOOST_TEST((file.exists && file.file_count == 1 && file.size_bytes == 5));
}

BOOST_AUTO_TEST_CASE(depth_and_entries_are_bounded_and_each_cut_is_an_error) {
  temp_dir root;
  std::string deep = root.str("ws");
  for (int i = 0; i < 10; ++i)
    deep += "/d";
  fs::create_directories(deep);
  std::ofstream{deep + "/f"} << "x";
  auto fd = beneath::open_root(root.str());
  BOOST_REQUIRE(fd);
  auto shallow = measure_tree(fd.get(), "ws", 5);
  BOOST_TEST(shallow.file_count == 0);
  BOOST_TEST(shallow.error_count == 1);
  BOOST_TEST(measure_tree(fd.get(), "ws", 64).file_count == 1);
  for (int i = 0; i < 20; ++i)
    std::ofstream{root.str("ws/f" + std::to_string(i))} << "x";
  auto few = measure_tree(fd.get(), "ws", 64, 10);
  BOOST_TEST(few.file_count <= 10);
  BOOST_TEST(few.error_count >= 1);
}

BOOST_AUTO_TEST_SUITE_END()
