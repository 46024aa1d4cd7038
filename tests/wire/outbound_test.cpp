// A client that never reads, against a real boxd process: its memory stays bounded,
// other connections are served, and the memory goes back after the close (README §4.13).
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "tests/net/client.hpp"
#include "tests/wire/boxd_process.hpp"
#include "tests/wire/process_probe.hpp"
#include "tests/wire/wire_common.hpp"

namespace boxrt::test {
namespace {

using wire::token;

} // namespace

BOOST_AUTO_TEST_SUITE(outbound_suite)

// 700 execs printing 1 MiB each on a socket that never reads took boxd from 15 MiB to
// 744 MiB before the caps (563 MiB after the close).
BOOST_AUTO_TEST_CASE(a_client_that_never_reads_keeps_boxd_small) {
  boxd_process boxd{R"({"backend": "scripted", "local": {"host_root": "box"}})",
                    R"(, "control_token": ")" + token + R"(", "outbound_stall_ms": 2000)"};
  const auto port = port_of(boxd);
  ws_options o;
  o.token = token;
  ws_client other{port, o};
  BOOST_REQUIRE(other.is_open());
  BOOST_REQUIRE_EQUAL(other.call(1, "__ping").code, 0);
  const size_t baseline = rss_mib(boxd.pid());

  o.receive_buffer_bytes = 4096;
  auto stuck = std::make_unique<ws_client>(port, o);
  BOOST_REQUIRE(stuck->is_open());
  const std::string ctx = context_json("ws-flood");
  for (int i = 0; i < 700; ++i)
    stuck->request(i, "box_exec", R"({"session_id":"s","cmd":"bytes 1048576"})", ctx);

  // Served meanwhile, while boxd's memory is sampled.
  size_t peak = 0;
  int64_t seq = 2;
  BOOST_REQUIRE(eventually([&] {
    BOOST_REQUIRE_EQUAL(other.call(seq++, "__ping").code, 0);
    peak = std::max(peak, rss_mib(boxd.pid()));
    return log_has(boxd, "closing the connection");
  }));
  BOOST_TEST_MESSAGE("RSS baseline " << baseline << " MiB, peak " << peak << " MiB");
  // 128 in-flight replies of 1 MiB at most, plus the caps' 64 MiB and the copies.
  BOOST_CHECK_LT(peak, baseline + 320);
  BOOST_CHECK_EQUAL(stuck->wait_closed(), 1008);
  stuck.reset();
  BOOST_CHECK(eventually([&] { return rss_mib(boxd.pid()) < baseline + 48; }));
  BOOST_TEST_MESSAGE("RSS after the close " << rss_mib(boxd.pid()) << " MiB");
  BOOST_CHECK_EQUAL(other.call(seq++, "__ping").code, 0);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace boxrt::test
