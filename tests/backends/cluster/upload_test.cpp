// A skill upload forwarded between nodes: the entry node carries the bytes, the owner
// lands them in a file of its own, and a path named by another node is never used.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "backends/cluster/upload.hpp"
#include "tests/backends/temp_dir.hpp"

using namespace boxrt;
using namespace boxrt::cluster;
namespace fs = std::filesystem;

namespace {

/// A folder of the test's own, removed with it.
struct scratch {
  testing::temp_dir tmp;
  fs::path dir{tmp.str()};
  std::string read(const std::string& path) const {
    std::ifstream in{path, std::ios::binary};
    return {std::istreambuf_iterator<char>{in}, {}};
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(cluster_upload_suite)

BOOST_AUTO_TEST_CASE(an_upload_travels_as_bytes_and_lands_in_a_file_of_the_owner) {
  scratch s;
  auto sent = (s.dir / "sent.zip").string();
  std::ofstream{sent, std::ios::binary} << "PK-bytes";
  skill_request req;
  req.file_path = sent;
  carry_upload(req);
  BOOST_TEST(req.file_bytes == "PK-bytes");
  BOOST_TEST(!fs::exists(sent));
  fs::create_directories(s.dir / "owner");
  BOOST_REQUIRE(!land_upload(req, (s.dir / "owner").string(), true));
  BOOST_TEST(req.file_path.rfind((s.dir / "owner").string(), 0) == 0);
  BOOST_TEST(s.read(req.file_path) == "PK-bytes");
  BOOST_TEST(req.file_bytes.empty());
}

// Found by an adversarial pass: a peer named a file of the owner's (say /etc/shadow)
// with no bytes; the owner then installed it as the upload, or unlinked it as root when
// the request was refused.
BOOST_AUTO_TEST_CASE(a_path_named_by_another_node_is_never_used) {
  scratch s;
  auto victim = (s.dir / "victim").string();
  std::ofstream{victim} << "secret";
  skill_request req;
  req.file_path = victim;
  BOOST_REQUIRE(!land_upload(req, s.dir.string(), true));
  BOOST_TEST(req.file_path.empty());
  BOOST_TEST(s.read(victim) == "secret");
  // A request of this node's own connection keeps its transfer file.
  skill_request local;
  local.file_path = victim;
  BOOST_REQUIRE(!land_upload(local, s.dir.string(), false));
  BOOST_TEST(local.file_path == victim);
}

BOOST_AUTO_TEST_CASE(a_forwarded_upload_larger_than_the_ceiling_is_refused) {
  scratch s;
  skill_request req;
  req.file_bytes.assign(max_forwarded_upload + 1, 'x');
  auto err = land_upload(req, s.dir.string(), true);
  BOOST_TEST((err.code == ec::validation));
  BOOST_TEST(err.message == "Box cluster refuses a forwarded upload larger than 104857600 bytes");
  BOOST_TEST(fs::is_empty(s.dir));
}

BOOST_AUTO_TEST_SUITE_END()
