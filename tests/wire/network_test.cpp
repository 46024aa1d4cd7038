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

    const auto d = dir.string();
    // The upstream servers (tests/wire/upstream/, shared with benchmarks/egress_bench.py).
    const std::string up = BOXRT_TEST_UPSTREAM_DIR;
    BOOST_REQUIRE_EQUAL(sh("sh " + up + "/certs.sh " + d), 0);
    BOOST_REQUIRE_EQUAL(sh("set -e; for a in 20 21 22; do ip -n " + upstream + " addr add 10.203.0.$a/24 dev " + vu
                           + "; done"),
                        0);
    BOOST_REQUIRE_EQUAL(sh("ip netns exec " + upstream + " python3 " + up + "/web.py " + d + " >/dev/null 2>&1 &"), 0);
    BOOST_REQUIRE_EQUAL(sh("ip netns exec " + upstream + " python3 " + (dir / "echo.py").string() + " >/dev/null 2>&1 &"), 0);
    BOOST_REQUIRE_EQUAL(sh("ip netns exec " + upstream + " python3 " + up + "/dns.py " + d + " >/dev/null 2>&1 &"), 0);
    // Both serve before any sandbox tries them.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{30};
    while (!fs::exists(dir / "echo.py.ready") || !fs::exists(dir / "dns.ready") || !fs::exists(dir / "web.ready")) {
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
    sh("pkill -f '" + dir.string() + "/[e]cho.py'; pkill -f '[d]ns.py " + dir.string() + "$'; pkill -f '[w]eb.py "
       + dir.string() + "$'");
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

namespace {

/// What a sandbox under an egress policy tries (docs/network.md "Egress policy"): each
/// check's outcome is "ok:<answer>" or "refused:<exception>"; a timeout shows as
/// "refused:timeout" (socket.timeout) and fails the checks that must be refused at once.
const std::string egress_probe = R"(
import json, os, socket, ssl, struct, sys, time
open('/tmp/ca.pem', 'w').write(os.environ['CA'])
ctx = ssl.create_default_context(cafile='/tmp/ca.pem')
r = {}
def run(name, fn):
    try:
        r[name] = 'ok:' + fn()
    except socket.timeout:
        r[name] = 'refused:timeout'
    except Exception as e:
        r[name] = 'refused:' + type(e).__name__
def read_all(s):
    data = b''
    while True:
        c = s.recv(65536)
        if not c:
            return data
        data += c
def answer(data):
    head, _, body = data.partition(b'\r\n\r\n')
    status = head.split(b'\r\n')[0].decode()
    return body.decode() if ' 200 ' in status else status
def http(host, addr=None, port=80):
    s = socket.create_connection((addr or host, port), 5)
    s.sendall(('GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' % host).encode())
    return answer(read_all(s))
def http_no_host(addr):
    s = socket.create_connection((addr, 80), 5)
    s.sendall(b'GET / HTTP/1.0\r\n\r\n')
    return answer(read_all(s))
def https(sni, addr=None):
    s = socket.create_connection((addr or sni, 443), 5)
    t = ctx.wrap_socket(s, server_hostname=sni)
    t.sendall(('GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' % sni).encode())
    return answer(read_all(t))
def tcp(addr, port):
    s = socket.create_connection((addr, port), 5)
    s.sendall(b'ping')
    return read_all(s).decode() or 'closed'
def udp(addr, port):
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(5); u.connect((addr, port))
    u.send(b'hi')
    return u.recv(100).decode()
def dns_direct(name, server):
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(5)
    q = struct.pack('!HHHHHH', 0x1234, 0x0100, 1, 0, 0, 0) + b''.join(bytes([len(l)]) + l.encode() for l in name.split('.')) + b'\0\0\1\0\1'
    u.sendto(q, (server, 53))
    return 'rcode=%d' % (u.recv(512)[3] & 15)
def silent(addr, port):
    s = socket.create_connection((addr, port), 5)
    return read_all(s).decode() or 'closed'
def over_limit(addr, port, n):
    held = [socket.create_connection((addr, port), 5) for _ in range(n)]
    try:
        return silent(addr, port)
    finally:
        for h in held:
            h.close()
def ipv6(addr):
    s = socket.socket(socket.AF_INET6); s.settimeout(5); s.connect((addr, 80))
    return 'connected'
checks = json.loads(os.environ['CHECKS'])
for name, call in checks:
    fn, args = call[0], call[1:]
    run(name, lambda: globals()[fn](*args) if fn != 'resolve' else socket.gethostbyname(args[0]))
print(json.dumps(r))
)";

/// Runs `checks` ([name, [function, args...]], see egress_probe) in `session` of `ws`.
std::map<std::string, std::string> probe_egress(net::rpc_client& client, const std::string& ws,
                                                const std::string& session, const std::string& ca,
                                                const std::string& checks) {
  std::string cmd = "python3 - <<'EOF'\n" + egress_probe + "\nEOF";
  auto r = client.call("box_exec",
                       R"({"session_id":")" + session + R"(","network":"on","persistent":true,"timeout_sec":120,"cmd":)"
                         + json_string(cmd) + R"(,"env":{"CA":)" + json_string(ca) + R"(,"CHECKS":)" + json_string(checks)
                         + "}}",
                       ctx(ws));
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.message);
  simdjson::dom::parser parser;
  auto text = stdout_of(r);
  simdjson::dom::object seen;
  BOOST_REQUIRE_MESSAGE(parser.parse(text).get_object().get(seen) == simdjson::SUCCESS, text);
  std::map<std::string, std::string> out;
  for (auto field : seen)
    out[std::string{field.key}] = std::string{field.value.get_string().value()};
  return out;
}

/// GET `path` from boxd (in the calling thread's namespace).
std::string http_get(int port, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    auto req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token + "\r\n\r\n";
    (void)::write(fd, req.data(), req.size());
    char buf[65536];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;)
      out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

std::string slurp(const fs::path& p) {
  std::ifstream in{p};
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

bool refused_at_once(const std::string& outcome) {
  return outcome.starts_with("refused:") && outcome != "refused:timeout";
}

void egress_policy_scenario(const std::string& driver) {
  test_network net;
  const auto ca = slurp(net.dir / "ca.pem");
  const std::string box = R"({"backend": ")" + driver + R"(", "local": {"host_root": "box"},
    "network_egress": {"resolvers": ["10.203.0.10"], "header_timeout_ms": 1000, "max_connections": 8},
    "network_profiles": {"wide": {"allow_domains": ["allowed.test", "*.allowed.test"]}}})";
  const std::string server = R"(, "listen": "0.0.0.0:0", "control_token": ")" + token + R"(", "audit_log": "audit.log")";
  std::unique_ptr<boxd_process> boxd;
  net.in_outer([&] {
    boxd = std::make_unique<boxd_process>(box, server, std::vector<std::string>{"ip", "netns", "exec", net.outer});
    return 0;
  });
  auto port = std::stoi(boxd->url().substr(boxd->url().rfind(':') + 1));
  net::rpc_client client;
  net.in_outer([&] {
    client.connect({"ws://127.0.0.1:" + std::to_string(port), token, "instance-n"});
    return 0;
  });
  auto set_policy = [&](const std::string& ws, const std::string& body) {
    return client.call("box_set_network_policy",
                       R"({"instance_uuid":"instance-n","workspace_uuid":")" + ws + R"(",)" + body + "}");
  };
  // Bad input: a typed error, nothing stored.
  auto bad = set_policy("tenant-a", R"("policy":{"allow_domains":["ex ample.com"]})");
  BOOST_TEST(bad.code != 0);
  BOOST_TEST(bad.message.find("policy.allow_domains[0]") != std::string::npos, bad.message);
  auto unknown = set_policy("tenant-a", R"("profile":"nope")");
  BOOST_TEST(unknown.message.find("unknown network profile \"nope\"") != std::string::npos, unknown.message);
  auto none = client.call("box_get_network_policy", R"({"instance_uuid":"instance-n","workspace_uuid":"tenant-a"})");
  BOOST_TEST(none.data_json.find(R"("source":"none")") != std::string::npos, none.data_json);

  // Before the sandbox starts: its rules hold before its first command.
  auto set = set_policy("tenant-a", R"("policy":{"allow_domains":["allowed.test","rebind.allowed.test","loop.allowed.test","meta.allowed.test"]})");
  BOOST_REQUIRE_MESSAGE(set.code == 0, set.message);
  BOOST_TEST(set.data_json.find(R"("source":"workspace")") != std::string::npos, set.data_json);
  // A process and a file that must outlive the policy changes below.
  BOOST_REQUIRE(client.call("box_exec", R"({"session_id":"a","network":"on","persistent":true,"cmd":"echo kept > /tmp/marker"})",
                            ctx("tenant-a")).code == 0);
  auto proc = client.call("box_start_managed_process",
                          R"({"session_id":"a","spec":{"command":"sleep","args":["600"]}})", ctx("tenant-a"));
  BOOST_REQUIRE_MESSAGE(proc.code == 0, proc.message);

  const std::string boxd_port = std::to_string(port);
  auto seen = probe_egress(client, "tenant-a", "a", ca, R"([
    ["resolve_allowed", ["resolve", "allowed.test"]],
    ["http_allowed", ["http", "allowed.test"]],
    ["https_allowed", ["https", "allowed.test"]],
    ["resolve_other", ["resolve", "other.allowed.test"]],
    ["resolve_denied", ["resolve", "denied.test"]],
    ["dns_direct_denied", ["dns_direct", "denied.test", "10.203.0.10"]],
    ["dns_direct_allowed", ["dns_direct", "allowed.test", "10.203.0.10"]],
    ["http_denied_by_ip", ["http", "denied.test", "10.203.0.22"]],
    ["http_by_ip_no_host", ["http_no_host", "10.203.0.22"]],
    ["https_denied_by_ip", ["https", "denied.test", "10.203.0.22"]],
    ["https_allowed_sni_to_denied_ip", ["https", "allowed.test", "10.203.0.22"]],
    ["http_allowed_host_to_denied_ip", ["http", "allowed.test", "10.203.0.22"]],
    ["port_not_allowed", ["tcp", "10.203.0.20", 7007]],
    ["udp", ["udp", "10.203.0.22", 9999]],
    ["ipv6", ["ipv6", "fd00:203::22"]],
    ["rebind_by_rules", ["http", "rebind.allowed.test"]],
    ["rebind_by_filter", ["http", "rebind.allowed.test", "10.203.0.20"]],
    ["loopback_by_filter", ["http", "loop.allowed.test", "10.203.0.20"]],
    ["metadata_by_rules", ["http", "meta.allowed.test"]],
    ["metadata_by_filter", ["http", "meta.allowed.test", "10.203.0.20"]],
    ["boxd_on_veth", ["tcp", "10.203.0.2", )" + boxd_port + R"(]],
    ["boxd_via_gateway", ["tcp", "10.0.2.2", )" + boxd_port + R"(]],
    ["silent_past_header_timeout", ["silent", "10.203.0.20", 80]],
    ["past_max_connections", ["over_limit", "10.203.0.20", 80, 8]]
  ])");
  auto v = [&](const char* k) { return seen.count(k) ? seen[k] : std::string{"<missing>"}; };
  BOOST_TEST(v("resolve_allowed") == "ok:10.203.0.20");
  BOOST_TEST(v("http_allowed") == "ok:allowed.test@10.203.0.20");
  BOOST_TEST(v("https_allowed") == "ok:allowed.test@10.203.0.20");
  BOOST_TEST(v("dns_direct_allowed") == "ok:rcode=0");
  // Unlisted: no name, and its address reaches nothing, however it is asked.
  BOOST_TEST(v("resolve_other") == "refused:gaierror");
  BOOST_TEST(v("resolve_denied") == "refused:gaierror");
  BOOST_TEST(v("dns_direct_denied") == "ok:rcode=3");
  BOOST_TEST(v("http_denied_by_ip") == "ok:HTTP/1.1 403 Forbidden");
  BOOST_TEST(v("http_by_ip_no_host") == "ok:HTTP/1.1 403 Forbidden");
  BOOST_TEST(refused_at_once(v("https_denied_by_ip")), v("https_denied_by_ip"));
  // An allowed name sent to the unlisted address reaches the allowed host, never that one.
  BOOST_TEST(v("https_allowed_sni_to_denied_ip") == "ok:allowed.test@10.203.0.20");
  BOOST_TEST(v("http_allowed_host_to_denied_ip") == "ok:allowed.test@10.203.0.20");
  for (const char* k : {"port_not_allowed", "udp", "ipv6", "rebind_by_rules", "metadata_by_rules", "boxd_on_veth",
                        "boxd_via_gateway"})
    BOOST_TEST(refused_at_once(v(k)), k << ": " << v(k));
  // Limits: a connection that names nothing is ended after header_timeout_ms, one past
  // max_connections at once.
  BOOST_TEST(v("silent_past_header_timeout") == "refused:ConnectionResetError");
  BOOST_TEST(v("past_max_connections") == "refused:ConnectionResetError");
  for (const char* k : {"rebind_by_filter", "loopback_by_filter", "metadata_by_filter"})
    BOOST_TEST(v(k) == "ok:HTTP/1.1 403 Forbidden", k << ": " << v(k));

  // A relay the policy no longer allows is ended when the change is in force: a slow
  // download from allowed.test, then a policy without it.
  auto dl = client.call("box_start_managed_process", R"J({"session_id":"a","spec":{"process_id":"dl","command":"python3","args":["-c",)J"
                        + json_string(R"(
import socket, ssl, time
ctx = ssl.create_default_context(cafile='/tmp/ca.pem')
t = ctx.wrap_socket(socket.create_connection(('allowed.test', 443), 10), server_hostname='allowed.test')
t.sendall(b'GET /bytes/1073741824 HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n')
t.recv(65536)
open('/tmp/dl.started', 'w').close()
got = 0
try:
    while True:
        n = len(t.recv(65536))
        if not n:
            break
        got += n
        time.sleep(0.01)
    open('/tmp/dl.status', 'w').write('complete' if got >= 1 << 30 else 'cut after %d bytes' % got)
except Exception as e:
    open('/tmp/dl.status', 'w').write('cut:' + type(e).__name__)
)") + "]}}",
                        ctx("tenant-a"));
  BOOST_REQUIRE_MESSAGE(dl.code == 0, dl.message);
  // (Bounded waits inside the sandbox: 10 s each.)
  auto wait_for_file = [&](const std::string& path) {
    return stdout_of(client.call("box_exec", R"({"session_id":"a","network":"on","persistent":true,"cmd":)"
                                             + json_string("for i in $(seq 200); do [ -e " + path
                                                           + " ] && break; sleep 0.05; done; cat " + path + " 2>&1")
                                             + "}",
                                 ctx("tenant-a")));
  };
  BOOST_TEST(wait_for_file("/tmp/dl.started") == "",
             client.call("box_get_managed_process", R"({"session_id":"a","process_id":"dl"})", ctx("tenant-a")).data_json);
  BOOST_REQUIRE(set_policy("tenant-a", R"("policy":{"allow_domains":["other.allowed.test"]})").code == 0);
  // (An unclean end reads as an early EOF through Python's ssl, or as a reset.)
  auto cut = wait_for_file("/tmp/dl.status");
  BOOST_TEST(cut.starts_with("cut"), cut);

  // A change reaches the running sandbox by the time its reply comes; processes and
  // files stay.
  auto t0 = std::chrono::steady_clock::now();
  auto wide = set_policy("tenant-a", R"("profile":"wide")");
  auto took_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  BOOST_REQUIRE_MESSAGE(wide.code == 0, wide.message);
  BOOST_TEST_MESSAGE("box_set_network_policy on a running sandbox: " << took_ms << " ms");
  auto after = probe_egress(client, "tenant-a", "a", ca, R"([["https_other", ["https", "other.allowed.test"]],
    ["resolve_denied", ["resolve", "denied.test"]]])");
  BOOST_TEST(after["https_other"] == "ok:other.allowed.test@10.203.0.21");
  BOOST_TEST(after["resolve_denied"] == "refused:gaierror");
  BOOST_TEST(stdout_of(client.call("box_exec", R"({"session_id":"a","network":"on","persistent":true,"cmd":"cat /tmp/marker"})",
                                   ctx("tenant-a"))) == "kept");
  auto still = client.call("box_get_managed_process", R"({"session_id":"a"})", ctx("tenant-a"));
  BOOST_TEST(still.data_json.find(R"("status":"running")") != std::string::npos, still.data_json);
  auto got = client.call("box_get_network_policy", R"({"instance_uuid":"instance-n","workspace_uuid":"tenant-a"})");
  BOOST_TEST(got.data_json.find(R"("profile":"wide")") != std::string::npos, got.data_json);

  // Another workspace's sandbox has no policy: today's behaviour.
  auto other = probe_egress(client, "tenant-b", "b", ca, R"([["http_denied", ["http", "denied.test"]],
    ["udp", ["udp", "10.203.0.22", 9999]]])");
  BOOST_TEST(other["http_denied"] == "ok:denied.test@10.203.0.22");
  BOOST_TEST(other["udp"] == "ok:udp:hi");
  // The operator's default reaches it, running, by box_init's reply; and goes again.
  auto init = client.call("box_init", R"({"network_policy":{"allow_domains":["denied.test"]}})");
  BOOST_REQUIRE_MESSAGE(init.code == 0, init.message);
  auto defaulted = probe_egress(client, "tenant-b", "b", ca, R"([["http_denied", ["http", "denied.test"]],
    ["http_allowed", ["http", "allowed.test"]], ["udp", ["udp", "10.203.0.22", 9999]]])");
  BOOST_TEST(defaulted["http_denied"] == "ok:denied.test@10.203.0.22");
  BOOST_TEST(defaulted["http_allowed"] == "refused:gaierror");
  BOOST_TEST(refused_at_once(defaulted["udp"]), defaulted["udp"]);
  auto got_b = client.call("box_get_network_policy", R"({"instance_uuid":"instance-n","workspace_uuid":"tenant-b"})");
  BOOST_TEST(got_b.data_json.find(R"("source":"default")") != std::string::npos, got_b.data_json);
  BOOST_REQUIRE(client.call("box_init", R"({"network_policy":null})").code == 0);
  BOOST_TEST(probe_egress(client, "tenant-b", "b", ca, R"([["udp", ["udp", "10.203.0.22", 9999]]])")["udp"] == "ok:udp:hi");

  // Counted without names, and each refused connection audited.
  std::string metrics;
  net.in_outer([&] {
    metrics = http_get(port, "/metrics");
    return 0;
  });
  BOOST_TEST(metrics.find(R"(boxd_egress_connections_total{decision="deny",reason="domain"})") != std::string::npos);
  BOOST_TEST(metrics.find(R"(boxd_egress_connections_total{decision="allow",reason="domain"})") != std::string::npos);
  BOOST_TEST(metrics.find(R"(boxd_egress_lookups_total{decision="deny",reason="domain"})") != std::string::npos);
  BOOST_TEST(metrics.find("denied.test") == std::string::npos);
  auto audit = slurp(boxd->dir() / "audit.log");
  BOOST_TEST(audit.find(R"("action":"egress")") != std::string::npos);
  BOOST_TEST(audit.find(R"("name":"denied.test")") != std::string::npos);
  BOOST_TEST(audit.find(R"("reason":"address")") != std::string::npos);

  // Cleared: today's behaviour again, in the same sandbox.
  auto cleared = set_policy("tenant-a", R"("policy":null)");
  BOOST_REQUIRE_MESSAGE(cleared.code == 0, cleared.message);
  BOOST_TEST(cleared.data_json.find(R"("source":"none")") != std::string::npos, cleared.data_json);
  auto open = probe_egress(client, "tenant-a", "a", ca, R"([["http_denied", ["http", "denied.test"]],
    ["udp", ["udp", "10.203.0.22", 9999]], ["boxd_on_veth", ["tcp", "10.203.0.2", )" + boxd_port + R"(]]])");
  BOOST_TEST(open["http_denied"] == "ok:denied.test@10.203.0.22");
  BOOST_TEST(open["udp"] == "ok:udp:hi");
  BOOST_TEST(refused_at_once(open["boxd_on_veth"]), open["boxd_on_veth"]);

  // Durable: kept across a restart, and a new sandbox starts under it. (The restarted
  // boxd caps filtered connections across sandboxes at 4, below the sandbox's own 8.)
  BOOST_REQUIRE(set_policy("tenant-a", R"("profile":"wide")").code == 0);
  client.close();
  auto dir = boxd->dir();
  BOOST_TEST(boxd->stop() == 0);
  auto capped = box;
  capped.replace(capped.find(R"("max_connections": 8)"), std::string_view{R"("max_connections": 8)"}.size(),
                 R"("max_connections": 8, "max_connections_total": 4)");
  net.in_outer([&] {
    boxd = std::make_unique<boxd_process>(capped, server, std::vector<std::string>{"ip", "netns", "exec", net.outer}, dir);
    return 0;
  });
  port = std::stoi(boxd->url().substr(boxd->url().rfind(':') + 1));
  net::rpc_client again;
  net.in_outer([&] {
    again.connect({"ws://127.0.0.1:" + std::to_string(port), token, "instance-n"});
    return 0;
  });
  auto kept = again.call("box_get_network_policy", R"({"instance_uuid":"instance-n","workspace_uuid":"tenant-a"})");
  BOOST_TEST(kept.data_json.find(R"("profile":"wide")") != std::string::npos, kept.data_json);
  auto restarted = probe_egress(again, "tenant-a", "c", ca, R"([["https_other", ["https", "other.allowed.test"]],
    ["http_denied", ["http", "denied.test", "10.203.0.22"]], ["past_total", ["over_limit", "10.203.0.20", 80, 4]]])");
  BOOST_TEST(restarted["https_other"] == "ok:other.allowed.test@10.203.0.21");
  BOOST_TEST(restarted["http_denied"] == "ok:HTTP/1.1 403 Forbidden");
  BOOST_TEST(restarted["past_total"] == "refused:ConnectionResetError");
  std::string capped_metrics;
  net.in_outer([&] {
    capped_metrics = http_get(port, "/metrics");
    return 0;
  });
  BOOST_TEST(capped_metrics.find(R"(boxd_egress_connections_total{decision="deny",reason="limit_total"})")
             != std::string::npos);
  again.close();
  BOOST_TEST(boxd->stop() == 0);
}

} // namespace

BOOST_AUTO_TEST_CASE(an_egress_policy_holds_on_bwrap) { egress_policy_scenario("bwrap"); }
BOOST_AUTO_TEST_CASE(an_egress_policy_holds_on_nsjail) { egress_policy_scenario("nsjail"); }

BOOST_AUTO_TEST_SUITE_END()
