// `network: "on"` (contract §4.7), with boxd as a real process on real sandboxes. All
// traffic stays inside namespaces this test makes: boxd runs in an `outer` network
// namespace joined by a veth pair to an `upstream` one (10.203.0.0/24: its gateway at
// .1, a TCP echo server and a minimal DNS responder at .10). A network-on sandbox must reach those
// through its own stack, and must reach nothing of boxd's host: no listener or abstract
// socket of boxd's namespace, not boxd's port (on loopback or the veth address), not
// another tenant's network-on sandbox. Root, bubblewrap, slirp4netns, nft and ip, as CI has.
#include <fcntl.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <tuple>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <simdjson.h>

#include "net/ws/client.hpp"
#include "tests/wire/boxd_process.hpp"

using namespace boxrt;
using namespace boxrt::test;
namespace fs = std::filesystem;

namespace {

const std::string token = "network-test-token-0123456789abcdef012345";

bool network_capable() {
  for (const char* tool : {"/usr/bin/bwrap", "/usr/bin/slirp4netns", "/usr/sbin/nft", "/usr/bin/ip", "/sbin/ip"})
    if (std::string_view{tool}.ends_with("/ip") ? (::access("/usr/bin/ip", X_OK) != 0 && ::access("/sbin/ip", X_OK) != 0)
                                              : ::access(tool, X_OK) != 0)
      return false;
  return ::geteuid() == 0;
}

boost::test_tools::assertion_result network_precondition(boost::unit_test::test_unit_id) {
  return {network_capable()};
}

int sh(const std::string& cmd) {
  return std::system(cmd.c_str());
}

/// The two namespaces, the veth between them and what runs in `upstream`.
struct test_network {
  test_network() {
    auto id = std::to_string(::getpid() % 100000);
    outer = "boxrt-out-" + id;
    upstream = "boxrt-up-" + id;
    dir = fs::temp_directory_path() / ("boxrt-net-" + id);
    fs::create_directories(dir);
    const std::string vo = "bxo" + id, vu = "bxu" + id;
    // boxd's namespace resolves through the upstream responder: `ip netns exec` binds
    // this file over /etc/resolv.conf for what it runs.
    fs::create_directories("/etc/netns/" + outer);
    std::ofstream{"/etc/netns/" + outer + "/resolv.conf"} << "nameserver 10.203.0.10\n";
    const std::string setup = "set -e; ip netns add " + outer + "; ip netns add " + upstream + "; ip link add " + vo
                              + " type veth peer name " + vu + "; ip link set " + vo + " netns " + outer
                              + "; ip link set " + vu + " netns " + upstream + "; ip -n " + outer + " addr add 10.203.0.2/24 dev "
                              + vo + "; ip -n " + upstream + " addr add 10.203.0.1/24 dev " + vu + "; ip -n " + upstream
                              + " addr add 10.203.0.10/24 dev " + vu + "; ip -n " + outer
                              + " link set " + vo + " up; ip -n " + upstream + " link set " + vu + " up; ip -n " + outer
                              + " link set lo up; ip -n " + upstream + " link set lo up; ip -n " + outer
                              + " route add default via 10.203.0.1";
    // `ip netns add` has failed with EINVAL ("setting the network namespace ... failed")
    // while other suites started sandboxes at the same moment (fresh mount namespaces
    // being made beside it): the setup starts over, from nothing, a few times.
    int rc = -1;
    for (int attempt = 0; attempt < 3 && rc != 0; ++attempt) {
      if (attempt > 0)
        sh("ip netns del " + outer + " 2>/dev/null; ip netns del " + upstream + " 2>/dev/null; ip link del " + vo
           + " 2>/dev/null; true");
      rc = sh(setup);
    }
    BOOST_REQUIRE_EQUAL(rc, 0);
    std::ofstream{dir / "echo.py"} << R"(
import socket, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', 7007)); s.listen(16)
open(__file__ + '.ready', 'w').close()
def serve(c):
    data = c.recv(100)
    c.sendall(b'echo:' + data); c.close()
while True:
    c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
)";
    // Answers A queries for echo.boxrt.test with 10.203.0.1 and NXDOMAIN otherwise.
    std::ofstream{dir / "dns.py"} << R"(
import socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('10.203.0.10', 53))
open(__file__ + '.ready', 'w').close()
while True:
    q, peer = s.recvfrom(512)
    tid, flags, qd = struct.unpack('!HHH', q[:6])
    i, labels = 12, []
    while q[i]:
        labels.append(q[i + 1:i + 1 + q[i]].decode()); i += 1 + q[i]
    question = q[12:i + 5]
    qtype = struct.unpack('!H', q[i + 1:i + 3])[0]
    if '.'.join(labels) == 'echo.boxrt.test' and qtype == 1:
        answer = b'\xc0\x0c' + struct.pack('!HHIH', 1, 1, 60, 4) + socket.inet_aton('10.203.0.10')
        s.sendto(struct.pack('!HHHHHH', tid, 0x8180, 1, 1, 0, 0) + question + answer, peer)
    else:
        s.sendto(struct.pack('!HHHHHH', tid, 0x8183, 1, 0, 0, 0) + question, peer)
)";
    BOOST_REQUIRE_EQUAL(sh("ip netns exec " + upstream + " python3 " + (dir / "echo.py").string() + " >/dev/null 2>&1 &"), 0);
    BOOST_REQUIRE_EQUAL(sh("ip netns exec " + upstream + " python3 " + (dir / "dns.py").string() + " >/dev/null 2>&1 &"), 0);
    // Both serve before any sandbox tries them.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{30};
    while (!fs::exists(dir / "echo.py.ready") || !fs::exists(dir / "dns.py.ready")) {
      BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline,
                            "the upstream echo and DNS servers did not start");
      std::this_thread::sleep_for(std::chrono::milliseconds{20});
    }
    host_ns = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    outer_ns = ::open(("/run/netns/" + outer).c_str(), O_RDONLY | O_CLOEXEC);
    BOOST_REQUIRE(host_ns >= 0 && outer_ns >= 0);
  }
  ~test_network() {
    ::close(host_ns);
    ::close(outer_ns);
    // The bracket keeps each pattern from matching this very shell's command line
    // (which would end the shell before the second pkill runs).
    sh("pkill -f '" + dir.string() + "/[e]cho.py'; pkill -f '" + dir.string() + "/[d]ns.py'");
    sh("ip netns del " + outer + " 2>/dev/null; ip netns del " + upstream + " 2>/dev/null");
    std::error_code err;
    fs::remove_all("/etc/netns/" + outer, err);
    fs::remove_all(dir, err);
  }

  /// Runs `fn` with this thread in the outer namespace: sockets it makes live there.
  template <class Fn>
  auto in_outer(Fn fn) {
    BOOST_REQUIRE(::setns(outer_ns, CLONE_NEWNET) == 0);
    struct back {
      int ns;
      ~back() { ::setns(ns, CLONE_NEWNET); }
    } restore{host_ns};
    return fn();
  }

  std::string outer, upstream;
  fs::path dir;
  int host_ns = -1, outer_ns = -1;
};

/// A TCP listener on `addr` and an abstract unix socket, made in the calling thread's
/// namespace.
struct listener {
  explicit listener(const char* addr) {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ::inet_pton(AF_INET, addr, &a.sin_addr);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd, 16);
    socklen_t n = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
    port = ntohs(a.sin_port);
  }
  ~listener() { ::close(fd); }
  int fd = -1;
  int port = 0;
};

struct abstract_socket {
  abstract_socket() {
    fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::string name = std::string{'\0'} + "boxrt-abstract-test";
    std::memcpy(a.sun_path, name.data(), name.size());
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size()));
    ::listen(fd, 4);
  }
  ~abstract_socket() { ::close(fd); }
  int fd = -1;
};

std::string ctx(const std::string& ws) {
  return R"({"instance_uuid":"instance-n","workspace_uuid":")" + ws + R"(","placement_generation":1})";
}

/// The "stdout" of an exec reply.
std::string stdout_of(const net::rpc_response& r) {
  simdjson::dom::parser p;
  std::string_view out;
  if (p.parse(r.data_json)["stdout"].get_string().get(out) != simdjson::SUCCESS)
    return "<" + r.message + ">";
  return std::string{out};
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

} // namespace

BOOST_AUTO_TEST_SUITE(network_suite, *boost::unit_test::precondition(network_precondition))

BOOST_AUTO_TEST_CASE(a_network_on_sandbox_reaches_upstream_and_nothing_of_boxds_host) {
  test_network net;
  // boxd itself listens on every address of its namespace (loopback and the veth).
  std::unique_ptr<boxd_process> boxd;
  net.in_outer([&] {
    boxd = std::make_unique<boxd_process>(
      R"({"backend": "bwrap", "local": {"host_root": "box"}})",
      R"(, "listen": "0.0.0.0:0", "control_token": ")" + token + "\"",
      std::vector<std::string>{"ip", "netns", "exec", net.outer});
    return 0;
  });
  auto port = std::stoi(boxd->url().substr(boxd->url().rfind(':') + 1));
  net::rpc_client client;
  net.in_outer([&] {
    client.connect({"ws://127.0.0.1:" + std::to_string(port), token, "instance-n"});
    return 0;
  });
  // What a tenant might hope to reach in boxd's namespace.
  auto [loop, veth, abstract] = net.in_outer([] {
    return std::make_tuple(std::make_unique<listener>("127.0.0.1"), std::make_unique<listener>("10.203.0.2"),
                           std::make_unique<abstract_socket>());
  });
  // Another tenant's network-on sandbox with a listener of its own.
  auto b_listener = client.call("box_exec", R"({"session_id":"b","cmd":"true","network":"on","persistent":true})",
                                ctx("tenant-b"));
  BOOST_REQUIRE_MESSAGE(b_listener.code == 0, b_listener.message);
  auto started = client.call(
    "box_start_managed_process",
    R"J({"session_id":"b","spec":{"command":"python3","args":["-c","import socket\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\ns.bind(('0.0.0.0',7100))\ns.listen(4)\nwhile True: s.accept()[0].close()"]}})J",
    ctx("tenant-b"));
  BOOST_REQUIRE_MESSAGE(started.code == 0, started.message);

  const std::string probe = R"(
import json, socket
r = {}
def tcp(host, port, wait=3):
    s = socket.create_connection((host, port), wait)
    s.sendall(b'ping'); data = s.recv(100); s.close()
    return 'ok:' + data.decode()
def unix_abstract():
    s = socket.socket(socket.AF_UNIX); s.settimeout(3); s.connect('\0boxrt-abstract-test')
    return 'ok'
def run(name, fn):
    try: r[name] = fn()
    except Exception as e: r[name] = 'refused'
# What must work gets longer: the user-mode stack is slow to start on a busy machine.
run('echo_by_ip', lambda: tcp('10.203.0.10', 7007, 20))
run('gateway', lambda: tcp('10.203.0.1', 7007))
run('echo_by_name', lambda: tcp(socket.gethostbyname('echo.boxrt.test'), 7007, 20))
run('loopback_listener', lambda: tcp('127.0.0.1', LOOP))
run('loopback_via_gateway', lambda: tcp('10.0.2.2', LOOP))
run('veth_listener', lambda: tcp('10.203.0.2', VETH))
run('boxd_on_loopback', lambda: tcp('127.0.0.1', BOXD))
run('boxd_via_gateway', lambda: tcp('10.0.2.2', BOXD))
run('boxd_on_veth', lambda: tcp('10.203.0.2', BOXD))
run('abstract_socket', unix_abstract)
run('other_sandbox_own_address', lambda: tcp('10.0.2.100', 7100))
run('other_sandbox_via_host', lambda: tcp('10.203.0.2', 7100))
run('metadata', lambda: tcp('169.254.169.254', 80))
r['netns'] = __import__('os').readlink('/proc/self/ns/net')
print(json.dumps(r))
)";
  auto script = probe;
  for (auto [key, value] : {std::pair{"LOOP", loop->port}, {"VETH", veth->port}, {"BOXD", port}})
    for (size_t at; (at = script.find(key)) != std::string::npos;)
      script.replace(at, std::string_view{key}.size(), std::to_string(value));
  auto cmd = "python3 - <<'EOF'\n" + script + "\nEOF";
  auto a = client.call("box_exec",
                       R"({"session_id":"a","network":"on","timeout_sec":60,"cmd":)" + json_string(cmd) + "}",
                       ctx("tenant-a"));
  BOOST_REQUIRE_MESSAGE(a.code == 0, a.message);
  simdjson::dom::parser parser;
  auto seen_text = stdout_of(a);
  simdjson::dom::object seen;
  BOOST_REQUIRE_MESSAGE(parser.parse(seen_text).get_object().get(seen) == simdjson::SUCCESS, seen_text);
  auto value = [&](const char* k) {
    std::string_view v;
    return seen[k].get_string().get(v) == simdjson::SUCCESS ? std::string{v} : std::string{"<missing>"};
  };
  // Outbound through the stack: by address and by a name the given resolv.conf resolves.
  BOOST_TEST(value("echo_by_ip") == "ok:echo:ping");
  BOOST_TEST(value("echo_by_name") == "ok:echo:ping");
  for (const char* k : {"gateway", "loopback_listener", "loopback_via_gateway", "veth_listener", "boxd_on_loopback",
                        "boxd_via_gateway", "boxd_on_veth", "abstract_socket", "other_sandbox_own_address",
                        "other_sandbox_via_host", "metadata"})
    BOOST_TEST(value(k) == "refused", k << ": " << value(k));
  // Its own network namespace, not boxd's.
  auto boxd_ns = fs::read_symlink("/proc/" + std::to_string(boxd->pid()) + "/ns/net").string();
  BOOST_TEST(value("netns") != boxd_ns);
  // Network off stays as it was: loopback only.
  auto off = client.call("box_exec", R"({"session_id":"off","cmd":"awk -F: 'NR>2{print $1}' /proc/net/dev | tr -d ' '"})",
                         ctx("tenant-a"));
  BOOST_TEST(stdout_of(off) == "lo");
  // The stack's process goes with its session.
  auto stacks = [&] { return sh("pgrep -P " + std::to_string(boxd->pid()) + " -x slirp4netns >/dev/null") == 0; };
  BOOST_TEST(stacks());
  BOOST_TEST(client.call("box_delete_session", R"({"session_id":"a"})", ctx("tenant-a")).code == 0);
  BOOST_TEST(client.call("box_delete_session", R"({"session_id":"b"})", ctx("tenant-b")).code == 0);
  BOOST_TEST(!stacks());
  client.close();
  BOOST_TEST(boxd->stop() == 0);
}

BOOST_AUTO_TEST_SUITE_END()
