// Sockets that never finish a handshake, against a real boxd started with the soft
// descriptor limit a service manager gives (1024): the limit is raised, pending
// handshakes are capped and time out, and descriptors stay in reserve for sandboxes.
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/net/ws/client.hpp"
#include "tests/wire/boxd_process.hpp"
#include "tests/wire/process_probe.hpp"
#include "tests/wire/wire_common.hpp"

namespace boxrt::test {
namespace {

using wire::token;

bool can_sandbox() {
  return ::geteuid() == 0 && ::access("/usr/bin/bwrap", X_OK) == 0;
}

/// Real sandboxes where the machine has them (CI does), else the scripted backend.
std::string box_json() {
  return can_sandbox() ? R"({"backend": "bwrap", "local": {"host_root": "box"}})"
                       : R"({"backend": "scripted", "local": {"host_root": "box"}})";
}

/// The test process itself needs more than 1024 descriptors.
void raise_own_limit() {
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &lim);
}

/// `n` TCP connections to `port` that send nothing.
std::vector<int> idle_sockets(uint16_t port, size_t n) {
  std::vector<int> out;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (size_t i = 0; i < n; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    BOOST_REQUIRE(fd >= 0);
    BOOST_REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    out.push_back(fd);
  }
  return out;
}

struct closer {
  std::vector<int> fds;
  ~closer() {
    for (int fd : fds)
      ::close(fd);
  }
};

/// "Max open files" soft and hard of `pid`.
std::pair<std::string, std::string> fd_limits(pid_t pid) {
  std::ifstream limits{"/proc/" + std::to_string(pid) + "/limits"};
  std::string line;
  while (std::getline(limits, line))
    if (line.rfind("Max open files", 0) == 0) {
      std::istringstream fields{line.substr(14)};
      std::string soft, hard;
      fields >> soft >> hard;
      return {soft, hard};
    }
  return {};
}

ws_options with_token() {
  ws_options o;
  o.token = token;
  return o;
}

} // namespace

BOOST_AUTO_TEST_SUITE(descriptors_suite)

// 1100 idle sockets at a soft limit of 1024 made a new workspace's first exec fail with
// "Too many open files" and flooded the log with accept errors every 50 ms.
BOOST_AUTO_TEST_CASE(idle_sockets_are_capped_and_time_out) {
  raise_own_limit();
  boxd_process boxd{box_json(),
                    R"(, "control_token": ")" + token + R"(", "handshake_timeout_ms": 1500)",
                    {"prlimit", "--nofile=1024:4096"}};
  BOOST_CHECK_EQUAL(fd_limits(boxd.pid()).first, "4096");
  BOOST_CHECK(log_has(boxd, "open file limit raised from 1024 to 4096"));
  const auto port = port_of(boxd);
  const size_t baseline = open_fds(boxd.pid());
  closer idle{idle_sockets(port, 1100)};
  BOOST_REQUIRE(eventually([&] {
    return log_has(boxd, "have not finished their handshake (server.max_pending_handshakes)");
  }));
  // At most the cap's worth of sockets is held (plus a few in passing).
  BOOST_CHECK_LE(open_fds(boxd.pid()), baseline + 256 + 16);
  // The oldest idle one makes room: a client that finishes its handshake gets in now.
  ws_client c{port, with_token()};
  BOOST_REQUIRE(c.is_open());
  // The idle ones go when the handshake deadline passes.
  BOOST_CHECK(eventually([&] { return open_fds(boxd.pid()) <= baseline + 16; }));
  auto r = c.call(1, "box_exec", R"({"session_id":"s","cmd":"echo fresh"})",
                  context_json("ws-fresh"));
  BOOST_CHECK_EQUAL(r.code, 0);
  BOOST_CHECK_MESSAGE(r.data.find("fresh") != std::string::npos, r.raw);
}

// With a hard limit of 1024 nothing can be raised: the last reserved_fds descriptors
// are kept for sandboxes while idle sockets pile up.
BOOST_AUTO_TEST_CASE(descriptors_are_kept_in_reserve_for_sandboxes) {
  raise_own_limit();
  boxd_process boxd{box_json(),
                    R"(, "control_token": ")" + token
                      + R"(", "max_pending_handshakes": 5000, "handshake_timeout_ms": 60000)",
                    {"prlimit", "--nofile=1024:1024"}};
  const auto port = port_of(boxd);
  ws_client c{port, with_token()};
  BOOST_REQUIRE(c.is_open());
  BOOST_REQUIRE_EQUAL(c.call(1, "__ping").code, 0);
  closer idle{idle_sockets(port, 1100)};
  BOOST_REQUIRE(eventually([&] { return log_has(boxd, "are reserved for sandboxes"); }));
  BOOST_CHECK_LE(open_fds(boxd.pid()), 1024u - 256u + 16u);
  // A new workspace's first exec (a new sandbox) still gets its descriptors.
  auto r = c.call(2, "box_exec", R"({"session_id":"s","cmd":"echo reserved"})",
                  context_json("ws-reserve"));
  BOOST_CHECK_EQUAL(r.code, 0);
  BOOST_CHECK_MESSAGE(r.data.find("reserved") != std::string::npos, r.raw);
  // Refusals are logged a few times, not every 50 ms.
  std::ifstream log{boxd.dir() / "boxd.log"};
  size_t lines = 0;
  for (std::string line; std::getline(log, line);)
    lines += line.find("connection refused") != std::string::npos ? 1 : 0;
  BOOST_CHECK_LE(lines, 3u);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace boxrt::test
