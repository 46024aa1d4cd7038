// The sandbox backend with real sandboxes (root, as CI runs), on the driver the suite
// runs with (sandbox_fixture.hpp: bwrap, or nsjail in test_backends_nsjail). Every isolation claim has a
// test that fails without it; controls (network on, a writable bind) show the probes
// can see what they look for.
#include "backends/sandbox/sandbox.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "backends/registry.hpp"
#include "managed_helpers.hpp"
#include "sandbox_fixture.hpp"
#include "messages/tenancy.hpp"

using namespace boxrt;
namespace fs = std::filesystem;

namespace {

using testing::sandbox_precondition;

/// The real-sandbox fixture on the suite's driver (sandbox_fixture.hpp).
using driver_fixture = testing::sandbox_fixture;

/// A TCP listener on host loopback; returns its port.
struct host_listener {
  host_listener() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd, 16);
    socklen_t n = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
    port = ntohs(a.sin_port);
  }
  ~host_listener() { ::close(fd); }
  int fd;
  int port;
};

/// True while a `sleep <arg>` runs anywhere on the host.
bool running(const std::string& arg) {
  for (auto& e : fs::directory_iterator{"/proc"}) {
    std::ifstream in{e.path() / "cmdline"};
    std::string cmd, a;
    std::getline(in, cmd, '\0');
    std::getline(in, a, '\0');
    if (cmd == "sleep" && a == arg)
      return true;
  }
  return false;
}

std::string connect_cmd(int port) {
  return "python3 -c \"import socket; socket.create_connection(('127.0.0.1', " + std::to_string(port)
         + "), 2); print('connected')\" 2>/dev/null";
}

/// Runs a shell command on the host and returns its stdout.
std::string run_on_host(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr)
    return out;
  char buf[4096];
  while (auto n = std::fread(buf, 1, sizeof buf, p))
    out.append(buf, n);
  ::pclose(p);
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(sandbox_suite, *boost::unit_test::precondition(sandbox_precondition))

BOOST_FIXTURE_TEST_CASE(a_warm_session_keeps_state_between_execs_without_a_new_sandbox, driver_fixture) {
  BOOST_REQUIRE_MESSAGE(backend->unavailable_reason().empty(), backend->unavailable_reason());
  auto s = spec("warm");
  auto session = start(s);
  auto first = run(*session, s, "echo $PPID; echo state > /tmp/kept; echo out; echo err >&2; exit 3");
  BOOST_TEST(first.exit_code == 3);
  BOOST_TEST(first.stderr_text == "err");
  auto second = run(*session, s, "echo $PPID; cat /tmp/kept; pwd");
  // The same init (the shell's parent) served both: no sandbox per command.
  std::istringstream a{first.stdout_text}, b{second.stdout_text};
  std::string pa, pb;
  a >> pa;
  b >> pb;
  BOOST_TEST(pa == pb);
  BOOST_TEST(second.stdout_text.find("state") != std::string::npos);
  BOOST_TEST(second.stdout_text.find("/workspace") != std::string::npos);
  // The workdir is created by the init itself.
  s.workdir = "/workspace/deep/er";
  BOOST_TEST(run(*session, s, "pwd").stdout_text == "/workspace/deep/er");
  backend->stop_session(*session);
  BOOST_TEST(!session->alive());
}

// The launcher takes boxd's descriptors by number where the kernel lets it, else it
// starts from a copy of boxd's table: both make the same sandbox, with no descriptor of
// boxd's inside beyond what it was handed.
BOOST_FIXTURE_TEST_CASE(both_ways_of_handing_the_launcher_its_descriptors_make_the_same_sandbox, driver_fixture) {
  for (bool take : {true, false}) {
    BOOST_TEST_CONTEXT("launcher_takes_fds " << take) {
      opts.launcher_takes_fds = take;
      make_backend();
      auto s = spec(take ? "fds-taken" : "fds-copied");
      auto session = start(s);
      auto r = run(*session, s, "echo ok; ls /proc/self/fd | wc -l");
      BOOST_TEST(r.stdout_text == "ok\n4", r.stdout_text + r.stderr_text); // 0-2 and ls's own
      backend->stop_session(*session);
    }
  }
}

// boxd's descriptor limit bounds how many sandboxes a host keeps: a live one holds three
// of boxd's (init's exec and control sockets, the reaper's pidfd), its session file
// system and the drivers' error pipes none, and a stopped one nothing at all.
BOOST_FIXTURE_TEST_CASE(a_live_sandbox_holds_three_of_boxds_descriptors_and_a_stopped_one_none, driver_fixture) {
  auto open_fds = [] {
    size_t n = 0;
    for ([[maybe_unused]] auto& e : fs::directory_iterator{"/proc/self/fd"})
      ++n;
    return n;
  };
  // A first session opens what boxd opens once (its uid and quota records, say).
  auto first = spec("fds-first");
  auto one = start(first);
  BOOST_REQUIRE(run(*one, first, "true").exit_code == 0);
  const auto before = open_fds();
  auto s = spec("fds-second");
  auto two = start(s);
  auto r = run(*two, s, "echo ok");
  BOOST_TEST(r.stdout_text == "ok", r.stdout_text + r.stderr_text);
  BOOST_TEST(open_fds() == before + 3, "descriptors " << before << " -> " << open_fds());
  backend->stop_session(*two);
  two.reset();
  BOOST_TEST(open_fds() == before);
  backend->stop_session(*one);
}

// A driver named by a relative path (a config's, as make bench passes it) is found from
// boxd's working folder, not from the namespace the launcher enters before it execs it.
BOOST_FIXTURE_TEST_CASE(a_driver_named_by_a_relative_path_starts_sandboxes, driver_fixture) {
  const auto absolute = opts.driver == sandbox_driver::nsjail ? opts.nsjail_path : std::string{"/usr/bin/bwrap"};
  const auto relative = fs::relative(absolute).string();
  BOOST_REQUIRE(!relative.empty() && relative.front() != '/');
  (opts.driver == sandbox_driver::nsjail ? opts.nsjail_path : opts.bwrap_path) = relative;
  make_backend();
  auto s = spec("relative-driver");
  auto session = start(s);
  BOOST_TEST(run(*session, s, "echo ok").stdout_text == "ok");
  backend->stop_session(*session);
}

BOOST_FIXTURE_TEST_CASE(one_sandbox_serves_a_hundred_execs_as_the_workspace_uid, driver_fixture) {
  auto s = spec("hundred", tenant("100100100100100100100100"));
  auto session = start(s);
  auto first_pid = backend->sandbox_pid(*session);
  auto uid = backend->sandbox_uid(*session);
  BOOST_REQUIRE(first_pid > 0);
  BOOST_REQUIRE(uid != 0);
  // The host sees the sandbox's first process as the workspace uid, not root.
  std::ifstream status{"/proc/" + std::to_string(first_pid) + "/status"};
  std::string line, host_uid;
  while (std::getline(status, line))
    if (line.rfind("Uid:", 0) == 0)
      std::istringstream{line.substr(4)} >> host_uid;
  BOOST_TEST(host_uid == std::to_string(uid));
  std::string init;
  for (int i = 0; i < 100; ++i) {
    auto r = run(*session, s, "echo $PPID; id -u");
    std::istringstream out{r.stdout_text};
    std::string ppid, id;
    out >> ppid >> id;
    if (i == 0)
      init = ppid;
    BOOST_TEST_REQUIRE(ppid == init); // the same init served every exec
    BOOST_TEST_REQUIRE(id == std::to_string(uid));
  }
  BOOST_TEST(backend->sandbox_pid(*session) == first_pid);
  // /dev as bwrap's --dev makes it: the standard links, a pty of the sandbox's own, and
  // the niceness of boxd (nsjail's own default is 19).
  auto dev = run(*session, s, "readlink /dev/fd /dev/stdin; python3 -c \"import pty; pty.openpty(); print('pty')\"; "
                              "cut -d' ' -f19 /proc/self/stat");
  BOOST_TEST(dev.stdout_text == "/proc/self/fd\n/proc/self/fd/0\npty\n0", dev.stdout_text + dev.stderr_text);
  // No supplementary group of boxd's (its host group opens every tenant tree) inside.
  std::istringstream groups{run(*session, s, "sed -n 's/^Groups://p' /proc/self/status").stdout_text};
  for (std::string g; groups >> g;)
    BOOST_TEST(g == std::to_string(uid));
  // nsjail maps the uid onto itself and nothing else (bwrap nests a second user
  // namespace, whose parent shows it as 0; the host view above holds for both).
  if (opts.driver != sandbox_driver::nsjail) {
    backend->stop_session(*session);
    return;
  }
  std::istringstream map{run(*session, s, "cat /proc/self/uid_map /proc/self/gid_map").stdout_text};
  uint64_t in_uid = 0, out_uid = 0, n_uid = 0, in_gid = 0, out_gid = 0, n_gid = 0;
  map >> in_uid >> out_uid >> n_uid >> in_gid >> out_gid >> n_gid;
  BOOST_TEST(in_uid == uid);
  BOOST_TEST(out_uid == uid);
  BOOST_TEST(n_uid == 1u);
  BOOST_TEST(in_gid == uid);
  BOOST_TEST(out_gid == uid);
  BOOST_TEST(n_gid == 1u);
  backend->stop_session(*session);
}

BOOST_FIXTURE_TEST_CASE(output_is_capped_with_the_reference_notice, driver_fixture) {
  auto s = spec("clip");
  auto session = start(s);
  auto r = run(*session, s, "head -c 5000 /dev/zero | tr '\\0' a", 1000);
  BOOST_TEST(r.stdout_text == std::string(1000, 'a') + "\n... [raw output clipped at 1000 bytes, 4000 bytes discarded]");
  backend->stop_session(*session);
}

BOOST_FIXTURE_TEST_CASE(host_loopback_is_unreachable_with_network_off_and_on, driver_fixture) {
  // `network: on` gets a namespace and a user-mode stack of its own, never the host's
  // network (tests/wire/network_test.cpp proves its outbound reach in test namespaces).
  host_listener host;
  for (auto mode : {network_mode::off, network_mode::on}) {
    auto s = spec(mode == network_mode::on ? "net-on" : "net-off");
    s.network = mode;
    auto session = start(s);
    auto r = run(*session, s, connect_cmd(host.port) + "; readlink /proc/self/ns/net");
    BOOST_TEST(r.exit_code == 0);
    BOOST_TEST(r.stdout_text.find("connected") == std::string::npos);
    BOOST_TEST(r.stdout_text.find(fs::read_symlink("/proc/self/ns/net").string()) == std::string::npos);
    backend->stop_session(*session);
  }
  // Control: the probe itself reaches the listener from the host.
  auto c = run_on_host(connect_cmd(host.port));
  BOOST_TEST(c == "connected\n");
}

BOOST_FIXTURE_TEST_CASE(host_files_outside_the_binds_are_invisible, driver_fixture) {
  auto secret = root + "/secret.txt";
  std::ofstream{secret} << "host secret";
  auto s = spec("invisible");
  auto session = start(s);
  auto r = run(*session, s, "cat " + secret + "; ls /root /home/*/ 2>&1; test -e /etc/shadow && echo shadow; ls /");
  BOOST_TEST(r.stdout_text.find("host secret") == std::string::npos);
  BOOST_TEST(r.stdout_text.find("shadow") == std::string::npos);
  BOOST_TEST(r.stdout_text.find("workspace") != std::string::npos);
  backend->stop_session(*session);
}

BOOST_FIXTURE_TEST_CASE(workspaces_cannot_see_each_other, driver_fixture) {
  auto a_path = tenant("aaaaaaaaaaaaaaaaaaaaaaaa"), b_path = tenant("bbbbbbbbbbbbbbbbbbbbbbbb");
  auto a = spec("ws-a", a_path), b = spec("ws-b", b_path);
  auto sa = start(a), sb = start(b);
  BOOST_TEST(run(*sa, a, "echo only-a > /workspace/a.txt; id -u").stdout_text == std::to_string(backend->sandbox_uid(*sa)));
  // Written as the unprivileged sandbox uid, not as host root.
  struct stat st{};
  BOOST_REQUIRE(::stat((a_path + "/a.txt").c_str(), &st) == 0);
  BOOST_TEST(st.st_uid == backend->sandbox_uid(*sa));
  auto r = run(*sb, b, "ls -a /workspace; cat " + a_path + "/a.txt; find / -name a.txt 2>/dev/null");
  BOOST_TEST(r.stdout_text.find("only-a") == std::string::npos);
  BOOST_TEST(r.stdout_text.find("a.txt") == std::string::npos);
  backend->stop_session(*sa);
  backend->stop_session(*sb);
}

BOOST_FIXTURE_TEST_CASE(writing_past_the_quota_fails_with_enospc_and_the_data_persists, driver_fixture) {
  auto path = tenant("cccccccccccccccccccccccc");
  auto s = spec("quota", path);
  s.workspace_quota_mb = 8;
  auto session = start(s);
  auto r = run(*session, s, "dd if=/dev/zero of=/workspace/big bs=1M count=32 2>&1; echo kept > /workspace/small; df -k /workspace | tail -1");
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(r.stdout_text.find("No space left on device") != std::string::npos);
  // The host path is the mounted image: the file stops at the quota.
  BOOST_TEST(fs::file_size(path + "/big") <= 8u * 1048576);
  BOOST_TEST_MESSAGE(r.stdout_text);
  auto files = run(*session, s, "i=0; while [ $i -lt 5000 ]; do printf '' 2>/dev/null > /workspace/f$i || break; i=$((i+1)); done; echo $i; printf '' > /workspace/again");
  BOOST_TEST_MESSAGE(files.stdout_text << " / " << files.stderr_text);
  BOOST_TEST(std::stoi(files.stdout_text) < 5000);
  BOOST_TEST(files.stderr_text.find("No space left on device") != std::string::npos);
  backend->stop_session(*session);
  // Unmounted with the session, kept in the image: a new session sees the file again.
  BOOST_TEST(!fs::exists(path + "/small"));
  auto again = start(s);
  BOOST_TEST(run(*again, s, "cat /workspace/small").stdout_text == "kept");
  // The workspace's skill storage image is not made on the start path: only when an exec
  // mounts a skill of boxd's own store (next test), or the store asks for it.
  BOOST_TEST(!fs::exists(backend->skill_storage_dir("ws-cccccccccccccccccccccccc") + "/lost+found"));
  backend->stop_session(*again);
}

BOOST_FIXTURE_TEST_CASE(the_first_exec_with_a_stored_skill_mounts_the_skill_storage, driver_fixture) {
  const std::string name = "ws-cccccccccccccccccccccccd";
  {
    // The store writes a package, then lets its image go.
    auto storage = backend->acquire_skill_storage(opts.skills_tenants_dir + "/" + name);
    BOOST_REQUIRE(storage);
    fs::create_directories(storage->root + "/pkg");
    std::ofstream{storage->root + "/pkg/SKILL.md"} << "stored skill";
  }
  BOOST_TEST(!fs::exists(backend->skill_storage_dir(name) + "/pkg"));
  auto s = spec("stored", tenant(name.substr(3)));
  auto session = start(s);
  auto with = s;
  with.extra_mounts = {
    mount_spec{backend->skill_storage_dir(name) + "/pkg", "/workspace/.skills/pkg", mount_mode::ro, {}, {}, true}};
  BOOST_TEST(run(*session, with, "cat /workspace/.skills/pkg/SKILL.md").stdout_text == "stored skill");
  BOOST_TEST(fs::exists(backend->skill_storage_dir(name) + "/pkg/SKILL.md"));
  backend->stop_session(*session);
  // The session's hold went with it.
  BOOST_TEST(!fs::exists(backend->skill_storage_dir(name) + "/pkg"));
}

BOOST_FIXTURE_TEST_CASE(a_hosts_own_skill_store_under_the_skills_root_stays_visible, driver_fixture) {
  // LangBot 4.11 keeps its skill store at <skills_root>/tenants/ws-<24 hex>: a session of
  // that workspace, and boxd's own store for it, never mount anything over it.
  const std::string name = "ws-9999999999999999999999ab";
  auto host_store = opts.skills_tenants_dir + "/" + name + "/.langbot-skill-store";
  fs::create_directories(host_store + "/registry");
  std::ofstream{host_store + "/registry/demo.json"} << "{}";
  auto s = spec("host-store", tenant(name.substr(3)));
  s.workspace_quota_mb = 8;
  auto session = start(s);
  auto storage = backend->acquire_skill_storage(opts.skills_tenants_dir + "/" + name);
  BOOST_REQUIRE(storage);
  BOOST_TEST(storage->root == backend->skill_storage_dir(name));
  BOOST_TEST(fs::exists(storage->root + "/lost+found"));
  BOOST_TEST(fs::exists(host_store + "/registry/demo.json"));
  BOOST_TEST(!fs::exists(opts.skills_tenants_dir + "/" + name + "/lost+found"));
  backend->stop_session(*session);
  storage->hold.reset();
  BOOST_TEST(fs::exists(host_store + "/registry/demo.json"));
}

BOOST_FIXTURE_TEST_CASE(a_fork_bomb_stops_at_pids_limit, driver_fixture) {
  auto s = spec("forks");
  s.pids_limit = 16;
  auto session = start(s);
  auto r = run(*session, s,
               "python3 -c \"\nimport os, time\nn = 0\ntry:\n  while n < 200:\n    if os.fork() == 0:\n"
               "      time.sleep(30); os._exit(0)\n    n += 1\nexcept OSError as e:\n  print('stopped', n)\n\"");
  BOOST_TEST_MESSAGE(r.stdout_text << " / " << r.stderr_text);
  BOOST_TEST(r.stdout_text.rfind("stopped", 0) == 0);
  auto n = std::stoi(r.stdout_text.substr(8));
  BOOST_TEST(n <= 16);
  BOOST_TEST(n > 0);
  // The session still serves after the bomb (its leftovers were killed).
  BOOST_TEST(run(*session, s, "echo alive").stdout_text == "alive");
  backend->stop_session(*session);
}

BOOST_FIXTURE_TEST_CASE(allocating_past_memory_mb_is_killed_and_reported, driver_fixture) {
  auto s = spec("memory");
  s.memory_mb = 64;
  auto session = start(s);
  auto r = run(*session, s, "python3 -c \"b = bytearray(256 * 1024 * 1024); print(len(b))\"");
  BOOST_TEST(r.exit_code == 137);
  auto last = r.stderr_text.substr(r.stderr_text.rfind('\n') + 1);
  BOOST_TEST(last == "out of memory");
  auto ok = run(*session, s, "python3 -c \"b = bytearray(16 * 1024 * 1024); print(len(b))\"");
  BOOST_TEST(ok.exit_code == 0);
  backend->stop_session(*session);
}

BOOST_FIXTURE_TEST_CASE(a_timeout_kills_the_whole_tree_and_ends_the_session, driver_fixture) {
  auto s = spec("timeout");
  s.timeout_sec = 1;
  auto session = start(s);
  auto r = run(*session, s, "sh -c 'sleep 4711 & sleep 4711' & sleep 4711");
  BOOST_TEST((r.status == exec_status::timed_out));
  BOOST_TEST(r.stderr_text == "Command timed out after 1 seconds.");
  BOOST_TEST(!session->alive());
  backend->stop_session(*session);
  // Nothing of the tree is left on the host (the kill was synchronous with teardown).
  BOOST_TEST(!running("4711"));
}

BOOST_FIXTURE_TEST_CASE(the_root_filesystem_and_read_only_mounts_cannot_be_written, driver_fixture) {
  auto data = root + "/data";
  fs::create_directories(data);
  auto s = spec("readonly");
  s.extra_mounts.push_back(mount_spec{data, "/data", mount_mode::ro});
  auto rw_dir = root + "/rw";
  s.extra_mounts.push_back(mount_spec{rw_dir, "/rw", mount_mode::rw});
  auto session = start(s);
  // The root alone first: /usr and the ro mount are read-only binds anyway.
  auto root_only = run(*session, s, "touch /x 2>&1");
  BOOST_TEST(root_only.stdout_text.find("Read-only file system") != std::string::npos);
  auto r = run(*session, s, "touch /usr/x 2>&1; touch /data/x 2>&1; touch /rw/x && echo rw-ok");
  BOOST_TEST(r.stdout_text.find("Read-only file system") != std::string::npos);
  BOOST_TEST(!fs::exists(data + "/x"));
  // Control: the writable mount is writable.
  BOOST_TEST(r.stdout_text.find("rw-ok") != std::string::npos);
  BOOST_TEST(fs::exists(rw_dir + "/x"));
  backend->stop_session(*session);
}

BOOST_FIXTURE_TEST_CASE(no_capabilities_and_no_mount_or_unshare_inside, driver_fixture) {
  auto s = spec("caps");
  auto session = start(s);
  auto r = run(*session, s, "grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status");
  BOOST_TEST(r.stdout_text.find("CapEff:\t0000000000000000") != std::string::npos);
  BOOST_TEST(r.stdout_text.find("CapBnd:\t0000000000000000") != std::string::npos);
  BOOST_TEST(r.stdout_text.find("NoNewPrivs:\t1") != std::string::npos);
  BOOST_TEST(r.stdout_text.find("Seccomp:\t2") != std::string::npos);
  auto m = run(*session, s, "mount -t tmpfs none /tmp 2>&1; echo mount=$?; unshare --user --map-root-user true 2>&1; echo unshare=$?");
  BOOST_TEST(m.stdout_text.find("mount=0") == std::string::npos);
  BOOST_TEST(m.stdout_text.find("unshare=0") == std::string::npos);
  backend->stop_session(*session);
}

BOOST_FIXTURE_TEST_CASE(the_seccomp_filter_refuses_what_capabilities_alone_allow, driver_fixture) {
  // personality() needs no privilege, so only the filter can refuse it.
  auto s = spec("seccomp");
  auto session = start(s);
  auto r = run(*session, s, "python3 -c \"import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
                            "rc = libc.personality(0xffffffff); print(rc, os.strerror(ctypes.get_errno()))\"");
  BOOST_TEST(r.stdout_text == "-1 Operation not permitted");
  backend->stop_session(*session);
}

BOOST_FIXTURE_TEST_CASE(a_sandbox_outlives_the_thread_that_started_it, driver_fixture) {
  // Worker-pool threads end when idle; bwrap's --die-with-parent must not take the
  // warm sandbox with them.
  auto s = spec("thread");
  std::shared_ptr<backend_session> session;
  std::thread starter{[&] {
    auto r = backend->start_session(s);
    if (r.ok())
      session = r.value();
  }};
  starter.join();
  BOOST_REQUIRE(session);
  auto r = run(*session, s, "echo still here");
  BOOST_TEST(r.stdout_text == "still here");
  BOOST_TEST(session->alive());
  backend->stop_session(*session);
}

BOOST_FIXTURE_TEST_CASE(boxd_state_is_never_a_tenant_mount, driver_fixture) {
  for (auto path : {opts.state_dir, opts.state_dir + "/images", root}) {
    auto s = spec("state", path);
    auto r = backend->start_session(s);
    BOOST_REQUIRE(!r.ok());
    BOOST_TEST(r.error().message == "host_path " + path + " is blocked for security");
  }
  auto s = spec("state-extra");
  s.extra_mounts.push_back(mount_spec{opts.state_dir + "/mounts", "/x", mount_mode::ro});
  auto r = backend->start_session(s);
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST(r.error().message == "extra_mounts[0].host_path " + opts.state_dir + "/mounts is blocked for security");
}

BOOST_FIXTURE_TEST_CASE(an_interrupt_ends_a_running_exec_and_every_later_one, driver_fixture) {
  auto s = spec("interrupt");
  auto session = start(s);
  std::thread stopper{[&] {
    // Waits for the command to be running, then interrupts (a condition, not a delay).
    for (int i = 0; i < 20000 && !running("4712"); ++i)
      std::this_thread::yield();
    session->interrupt();
  }};
  s.timeout_sec = 60;
  auto t0 = std::chrono::steady_clock::now();
  auto r = run(*session, s, "sleep 4712");
  stopper.join();
  BOOST_TEST(r.exit_code == 137);
  BOOST_TEST((std::chrono::steady_clock::now() - t0 < std::chrono::seconds{30}));
  BOOST_TEST(run(*session, s, "echo never").stdout_text.empty());
  backend->stop_session(*session);
}

BOOST_FIXTURE_TEST_CASE(readiness_reports_what_the_probe_sandbox_shows, driver_fixture) {
  auto r = backend->probe_readiness("", true);
  BOOST_TEST_MESSAGE("readiness error: " << r.error);
  BOOST_TEST(r.available);
  BOOST_TEST(r.limits_mechanism == "cgroup_v1");
  // cgroup v2 is not what enforces the limits here, and it is not claimed.
  BOOST_TEST(!r.details.at("cgroup_v2"));
  for (auto key : {"resource_limits", "namespace_isolation", "mount_isolation", "network_isolation",
                   "hard_workspace_quota", "hard_skill_storage_quota", "bounded_ephemeral_storage",
                   "inode_quota"})
    BOOST_TEST(r.details.at(key), key);
}

namespace {

/// The mount table of the calling process's namespace (boxd's, in these tests).
std::string own_mounts() {
  std::ifstream in{"/proc/self/mountinfo"};
  return {std::istreambuf_iterator<char>{in}, {}};
}

/// Lines of `text` that name `root`: this test's own mounts. Other suites run beside
/// this one (ctest -j) and mount their own quota images in the same namespace.
size_t lines(const std::string& text, const std::string& root) {
  size_t n = 0;
  std::istringstream in{text};
  for (std::string line; std::getline(in, line);)
    n += line.find(root) != std::string::npos;
  return n;
}

} // namespace

// A sandbox's mounts live in the sandbox alone: starting sandboxes adds nothing to boxd's
// namespace (which every launch used to copy, so each start and each sandbox cost more
// with every live one), and a per-exec mount of one session appears neither there nor
// in another sandbox.
BOOST_FIXTURE_TEST_CASE(no_sandbox_mount_reaches_boxds_namespace_or_another_sandbox, driver_fixture) {
  auto skills = root + "/skills-apart";
  fs::create_directories(skills + "/gamma-4721");
  std::ofstream{skills + "/gamma-4721/SKILL.md"} << "skill gamma";
  std::ofstream{skills + "/manifest.json"} << "{}";
  const auto before = lines(own_mounts(), root);
  auto a = spec("apart-a");
  auto b = spec("apart-b");
  auto sa = start(a);
  auto sb = start(b);
  const auto b_before = run(*sb, b, "cat /proc/self/mountinfo").stdout_text;
  auto with = a;
  with.extra_mounts = {mount_spec{skills + "/gamma-4721", "/workspace/.skills/gamma-4721", mount_mode::ro},
                       mount_spec{skills + "/gamma-4721", "/opt/langbot-artifacts/" + std::string(64, 'c'),
                                  mount_mode::ro, "sha256:" + std::string(64, 'c'), skills + "/manifest.json"}};
  auto r = run(*sa, with, "cat /workspace/.skills/gamma-4721/SKILL.md /opt/langbot-artifacts/c*/SKILL.md; "
                          "grep -c gamma-4721 /proc/self/mountinfo");
  BOOST_TEST(r.stdout_text == "skill gammaskill gamma2", r.stdout_text + r.stderr_text);
  // boxd's namespace: not one mount more than before two sandboxes started.
  auto now = own_mounts();
  BOOST_TEST(lines(now, root) == before, now);
  BOOST_TEST(now.find("gamma-4721") == std::string::npos);
  // The other sandbox: its table is what it was.
  BOOST_TEST(run(*sb, b, "cat /proc/self/mountinfo").stdout_text == b_before);
  // Dropped with the next exec that does not ask for it.
  BOOST_TEST(run(*sa, a, "grep -c gamma-4721 /proc/self/mountinfo").stdout_text == "0");
  backend->stop_session(*sa);
  backend->stop_session(*sb);
  BOOST_TEST(lines(own_mounts(), root) == before);
}

BOOST_FIXTURE_TEST_CASE(skills_come_and_go_per_exec_in_the_same_sandbox, driver_fixture) {
  auto skills = root + "/skills-store";
  for (auto name : {"alpha", "beta"}) {
    fs::create_directories(skills + "/" + name);
    std::ofstream{skills + "/" + name + "/SKILL.md"} << "skill " << name;
  }
  auto s = spec("skills", tenant("eeeeeeeeeeeeeeeeeeeeeeee"));
  auto session = start(s);
  auto with = [&](std::string name, mount_mode mode) {
    auto e = s;
    e.extra_mounts = {mount_spec{skills + "/" + name, "/workspace/.skills/" + name, mode}};
    return e;
  };
  auto a = with("alpha", mount_mode::ro);
  auto first = run(*session, a, "echo $PPID; cat /workspace/.skills/alpha/SKILL.md; ls /workspace/.skills; "
                                "touch /workspace/.skills/alpha/x 2>&1");
  BOOST_TEST(first.stdout_text.find("skill alpha") != std::string::npos);
  BOOST_TEST(first.stdout_text.find("Read-only file system") != std::string::npos);
  BOOST_TEST(!fs::exists(skills + "/alpha/x"));
  // Another skill: only it is visible now, and the sandbox is the same one.
  auto b = with("beta", mount_mode::ro);
  auto second = run(*session, b, "echo $PPID; ls /workspace/.skills; cat /workspace/.skills/beta/SKILL.md");
  BOOST_TEST(second.stdout_text.find("alpha") == std::string::npos);
  BOOST_TEST(second.stdout_text.find("skill beta") != std::string::npos);
  BOOST_TEST(first.stdout_text.substr(0, first.stdout_text.find('\n'))
             == second.stdout_text.substr(0, second.stdout_text.find('\n')));
  // Standard mode mounts skills read-write.
  auto w = with("beta", mount_mode::rw);
  BOOST_TEST(run(*session, w, "echo note > /workspace/.skills/beta/note && echo ok").stdout_text == "ok");
  BOOST_TEST(fs::exists(skills + "/beta/note"));
  // No skill: none visible.
  BOOST_TEST(run(*session, s, "ls /workspace/.skills | wc -l").stdout_text == "0");
  backend->stop_session(*session);
  // The packages survive the session's cleanup (nothing was removed through a mount).
  BOOST_TEST(fs::exists(skills + "/alpha/SKILL.md"));
  BOOST_TEST(fs::exists(skills + "/beta/note"));
}

struct rlimit_fixture : driver_fixture {
  rlimit_fixture() {
    backend.reset();
    opts.cgroup_root = ""; // as on a host without usable cgroups
    // RLIMIT_NPROC counts every process of a uid on the host: uids of their own, so
    // the sandboxes of suites running at the same time (the default range) never count.
    opts.uid_first = 0x72000000u;
    opts.uid_last = opts.uid_first + 0xff;
    backend = std::make_unique<sandbox_backend>(opts);
  }
};

BOOST_FIXTURE_TEST_CASE(without_cgroups_each_session_has_its_own_uid_and_nproc_cap, rlimit_fixture) {
  auto s = spec("nproc");
  s.pids_limit = 16;
  auto one = start(s), two = start(s);
  auto uid_one = run(*one, s, "id -u").stdout_text, uid_two = run(*two, s, "id -u").stdout_text;
  BOOST_TEST(uid_one != uid_two);
  BOOST_TEST(uid_one == std::to_string(backend->sandbox_uid(*one)));
  auto r = run(*one, s,
               "python3 -c \"\nimport os, time\nn = 0\ntry:\n  while n < 200:\n    if os.fork() == 0:\n"
               "      time.sleep(30); os._exit(0)\n    n += 1\nexcept OSError as e:\n  print('stopped', n)\n\"");
  BOOST_TEST(r.stdout_text.rfind("stopped", 0) == 0);
  BOOST_TEST(std::stoi(r.stdout_text.substr(8)) <= 16);
  backend->stop_session(*one);
  backend->stop_session(*two);
  // Memory and cpu are not capped this way, and readiness says so.
  auto report = backend->probe_readiness("", true);
  BOOST_TEST(report.limits_mechanism == "rlimit");
  BOOST_TEST(!report.details.at("resource_limits"));
  BOOST_TEST(report.details.at("namespace_isolation"));
}

BOOST_FIXTURE_TEST_CASE(a_second_boxd_on_the_same_state_directory_is_refused, driver_fixture) {
  // Another process cannot take the folder's lock (a lock of another open file
  // description, as a second boxd would hold).
  int fd = ::open((opts.state_dir + "/lock").c_str(), O_RDWR | O_CLOEXEC);
  BOOST_REQUIRE(fd >= 0);
  BOOST_TEST(::flock(fd, LOCK_EX | LOCK_NB) != 0);
  BOOST_TEST(errno == EWOULDBLOCK);
  ::close(fd);
}

BOOST_FIXTURE_TEST_CASE(both_drivers_share_one_state_directory_within_boxd, driver_fixture) {
  // box_init may select the other driver while this backend lives (a skill store holds
  // it): the new one shares the lock, the images and the uids instead of being refused,
  // and its orphan clean-up leaves this one's sandboxes alone.
  backend->cleanup_orphans(); // as boxd does at start
  auto ws = tenant("0123456789abcdef01234567");
  auto s = spec("shared", ws);
  s.workspace_quota_mb = 8;
  auto first = start(s);
  BOOST_TEST(run(*first, s, "echo kept > /workspace/f; id -u").exit_code == 0);
  auto o = opts;
  o.driver = opts.driver == sandbox_driver::bwrap ? sandbox_driver::nsjail : sandbox_driver::bwrap;
  o.nsjail_path = testing::test_nsjail_path();
  sandbox_backend other{o};
  BOOST_REQUIRE_MESSAGE(other.unavailable_reason().empty(), other.unavailable_reason());
  other.cleanup_orphans();
  BOOST_TEST(run(*first, s, "cat /workspace/f").stdout_text == "kept");
  auto second = other.start_session(s);
  BOOST_REQUIRE_MESSAGE(second.ok(), (second.ok() ? std::string{} : second.error().message));
  s.cmd = "cat /workspace/f; id -u; df -k /workspace | tail -1 | awk '{print $2 < 9000}'";
  auto r = other.exec(**second, s, exec_limits{});
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(r->exit_code == 0);
  // The same image (the file is there, the size is the quota's) and the same uid.
  BOOST_TEST(r->stdout_text == "kept\n" + std::to_string(backend->sandbox_uid(*first)) + "\n1");
  other.stop_session(**second);
  BOOST_TEST(run(*first, s, "cat /workspace/f").stdout_text == "kept");
}

BOOST_AUTO_TEST_CASE(the_next_start_removes_what_a_crashed_run_left) {
  char tmpl[] = "/tmp/boxrt-bwrap-crash-XXXXXX";
  std::string root = ::mkdtemp(tmpl);
  sandbox_options opts;
  opts.state_dir = root + "/state";
  auto ws = root + "/workspaces/tenants/ws-dddddddddddddddddddddddd";
  int ready[2];
  BOOST_REQUIRE(::pipe(ready) == 0);
  auto pid = ::fork();
  if (pid == 0) {
    // The "crashed" boxd: starts a sandbox on a quota image, then dies without cleanup.
    sandbox_backend b{opts};
    box_spec s;
    s.session_id = "crash";
    s.host_path = ws;
    s.workspace_quota_mb = 8;
    auto started = b.start_session(s);
    s.cmd = "setsid sleep 4713 > /dev/null 2>&1 &";
    if (started.ok())
      (void)b.exec(**started, s, exec_limits{});
    (void)!::write(ready[1], started.ok() ? "1" : "0", 1);
    ::_exit(0);
  }
  ::close(ready[1]);
  char c = 0;
  BOOST_REQUIRE(::read(ready[0], &c, 1) == 1);
  ::waitpid(pid, nullptr, 0);
  BOOST_REQUIRE(c == '1');
  auto mounted = [&] {
    std::ifstream in{"/proc/self/mountinfo"};
    std::string line;
    while (std::getline(in, line))
      if (line.find(" " + ws + " ") != std::string::npos)
        return true;
    return false;
  };
  // boxrt-init ended with its boxd (end of input), and the sandbox with it; what stays
  // behind is the quota mount and the cgroups.
  BOOST_TEST(mounted());
  auto groups = "/sys/fs/cgroup/pids/boxrt-" + sha256_hex(fs::absolute(opts.state_dir).lexically_normal().string()).substr(0, 12);
  auto count_groups = [&] {
    size_t n = 0;
    std::error_code err;
    for (auto& e : fs::directory_iterator{groups, err})
      n += e.is_directory() ? 1 : 0;
    return n;
  };
  BOOST_TEST(count_groups() == 1u);
  {
    sandbox_backend next{opts};
    BOOST_REQUIRE(next.unavailable_reason().empty());
    next.cleanup_orphans();
  }
  BOOST_TEST(!mounted());
  BOOST_TEST(count_groups() == 0u);
  BOOST_TEST(!running("4713"));
  std::error_code err;
  fs::remove_all(root, err);
}

// -- managed processes ------------------------------------------------------------------

namespace {

std::shared_ptr<managed_process> start_managed(sandbox_backend& backend, backend_session& session, std::string command,
                                               std::vector<std::string> args = {}, std::string cwd = "/workspace") {
  process_spec spec;
  spec.command = std::move(command);
  spec.args = std::move(args);
  spec.cwd = std::move(cwd);
  spec.env = {{"GREETING", "hi there"}};
  auto p = backend.start_managed_process(session, spec);
  BOOST_REQUIRE_MESSAGE(p.ok(), (p.ok() ? std::string{} : p.error().message));
  return *p;
}

} // namespace

BOOST_FIXTURE_TEST_CASE(artifacts_come_and_go_per_exec_without_a_new_sandbox, driver_fixture) {
  // langbot-plugin 0.7.13+ hands each run's activated skills over as read-only,
  // content-addressed mounts at /opt/langbot-artifacts/<hex>: one session sees different
  // sets across runs, and its sandbox (and what runs in it) stays.
  auto store = root + "/artifact-store";
  auto artifact = [&](char c) {
    std::string hex(64, c);
    fs::create_directories(store + "/" + hex + "/package");
    std::ofstream{store + "/" + hex + "/package/SKILL.md"} << "artifact " << c;
    std::ofstream{store + "/" + hex + "/manifest.json"} << "{}";
    return mount_spec{store + "/" + hex + "/package", "/opt/langbot-artifacts/" + hex, mount_mode::ro,
                      "sha256:" + hex, store + "/" + hex + "/manifest.json"};
  };
  auto a = artifact('a'), b = artifact('b');
  auto s = spec("artifacts", tenant("a7a7a7a7a7a7a7a7a7a7a7a7"));
  auto session = start(s);
  auto pid = backend->sandbox_pid(*session);
  // A process of the session that must outlive the changes of artifact sets.
  auto p = start_managed(*backend, *session, "cat");
  auto with = [&](std::vector<mount_spec> mounts) {
    auto e = s;
    e.extra_mounts = std::move(mounts);
    return e;
  };
  auto first = run(*session, with({a}), "cat /opt/langbot-artifacts/*/SKILL.md; ls /opt/langbot-artifacts; "
                                         "touch /opt/langbot-artifacts/" + std::string(64, 'a') + "/x 2>&1");
  BOOST_TEST(first.stdout_text.find("artifact a") != std::string::npos);
  BOOST_TEST(first.stdout_text.find("Read-only file system") != std::string::npos, first.stdout_text);
  auto both = run(*session, with({a, b}), "ls /opt/langbot-artifacts | wc -l; cat /opt/langbot-artifacts/*/SKILL.md");
  BOOST_TEST(both.stdout_text == "2\nartifact aartifact b");
  auto other = run(*session, with({b}), "ls /opt/langbot-artifacts");
  BOOST_TEST(other.stdout_text == std::string(64, 'b'));
  BOOST_TEST(run(*session, s, "ls /opt/langbot-artifacts | wc -l").stdout_text == "0");
  // The same sandbox all along, its process still there.
  BOOST_TEST(backend->sandbox_pid(*session) == pid);
  BOOST_TEST(!p->exit_code().has_value());
  BOOST_REQUIRE(p->write_stdin("still here\n"));
  BOOST_TEST(testing::read_until(p->stdout_fd(), "still here\n") == "still here\n");
  backend->stop_session(*session);
  BOOST_TEST(fs::exists(store + "/" + std::string(64, 'a') + "/package/SKILL.md"));
}

BOOST_FIXTURE_TEST_CASE(managed_cat_echoes_stdin_lines_from_inside_the_sandbox, driver_fixture) {
  auto s = spec("managed-echo");
  auto session = start(s);
  auto p = start_managed(*backend, *session, "cat");
  BOOST_TEST(testing::code_of(*p) == testing::running);
  BOOST_REQUIRE(p->write_stdin("hello\n"));
  BOOST_TEST(testing::read_until(p->stdout_fd(), "hello\n") == "hello\n");
  BOOST_REQUIRE(p->write_stdin("again\n"));
  BOOST_TEST(testing::read_until(p->stdout_fd(), "again\n") == "again\n");
  BOOST_TEST(testing::code_of(*p) == testing::running);
}

BOOST_FIXTURE_TEST_CASE(managed_stderr_reaches_the_preview, driver_fixture) {
  auto s = spec("managed-stderr");
  auto session = start(s);
  auto p = start_managed(*backend, *session, "sh", {"-c", "echo oops >&2; exec cat"});
  BOOST_TEST(testing::eventually([&] { return p->stderr_preview() == "oops"; }));
  BOOST_REQUIRE(p->write_stdin("ping\n"));
  BOOST_TEST(testing::read_until(p->stdout_fd(), "ping\n") == "ping\n");
}

BOOST_FIXTURE_TEST_CASE(managed_process_runs_inside_the_sandbox, driver_fixture) {
  auto s = spec("managed-inside");
  auto session = start(s);
  auto p = start_managed(*backend, *session, "sh",
                         {"-c", "id -u; grep NoNewPrivs /proc/self/status; readlink /proc/self/ns/pid; pwd; "
                                "echo \"$GREETING\"; echo end; exec cat"},
                         "/workspace/deep/er");
  auto out = testing::read_until(p->stdout_fd(), "end\n");
  auto host_pidns = fs::read_symlink("/proc/self/ns/pid").string();
  BOOST_TEST(out.starts_with(std::to_string(backend->sandbox_uid(*session)) + "\nNoNewPrivs:\t1\npid:["));
  BOOST_TEST(out.find(host_pidns) == std::string::npos);
  BOOST_TEST(out.find("\n/workspace/deep/er\nhi there\nend\n") != std::string::npos);
  // The same pid namespace as the session's execs: the exec sees the managed process.
  auto r = run(*session, s, "readlink /proc/self/ns/pid");
  BOOST_TEST(out.find(r.stdout_text) != std::string::npos);
}

BOOST_FIXTURE_TEST_CASE(the_io_folder_is_a_small_tmpfs_the_sandbox_cannot_grow, driver_fixture) {
  auto s = spec("managed-io-bound");
  auto session = start(s);
  auto r = run(*session, s, "head -c 2000000 /dev/zero > /.boxrt/io/fill");
  BOOST_TEST(r.exit_code != 0);
  BOOST_TEST(r.stderr_text.find("No space left on device") != std::string::npos);
}

BOOST_FIXTURE_TEST_CASE(execs_keep_working_while_a_managed_process_runs, driver_fixture) {
  auto s = spec("managed-exec");
  auto session = start(s);
  auto p = start_managed(*backend, *session, "cat");
  BOOST_TEST(run(*session, s, "echo from-exec").stdout_text == "from-exec");
  BOOST_REQUIRE(p->write_stdin("still here\n"));
  BOOST_TEST(testing::read_until(p->stdout_fd(), "still here\n") == "still here\n");
  BOOST_TEST(run(*session, s, "echo second-exec").stdout_text == "second-exec");
  BOOST_TEST(testing::code_of(*p) == testing::running);
}

BOOST_FIXTURE_TEST_CASE(managed_processes_start_and_stop_while_an_exec_runs, driver_fixture) {
  auto s = spec("managed-during-exec");
  auto session = start(s);
  exec_result long_exec;
  std::thread exec_thread{[&] {
    auto copy = s;
    copy.cmd = "sleep 4714; echo late";
    auto r = backend->exec(*session, copy, exec_limits{});
    if (r.ok())
      long_exec = r.value();
  }};
  BOOST_REQUIRE(testing::eventually([] { return running("4714"); }));
  // boxrt-init serves managed-process requests in the middle of the exec.
  auto p = start_managed(*backend, *session, "sh", {"-c", "echo up; exec sleep 4715"});
  BOOST_TEST(testing::read_until(p->stdout_fd(), "up\n") == "up\n");
  p->terminate(std::chrono::seconds{5});
  BOOST_TEST(testing::code_of(*p) == 128 + SIGTERM);
  BOOST_TEST(running("4714")); // the exec still runs
  BOOST_TEST(!running("4715"));
  session->interrupt();
  exec_thread.join();
  BOOST_TEST(long_exec.exit_code == 137);
  backend->stop_session(*session);
}

BOOST_FIXTURE_TEST_CASE(managed_terminate_closes_stdin_then_signals, driver_fixture) {
  auto s = spec("managed-terminate");
  auto session = start(s);
  // SIGTERM ignored (cat inherits that): only the closed stdin ends it, with exit 5.
  auto eof = start_managed(*backend, *session, "sh", {"-c", "trap '' TERM; echo up; cat; exit 5"});
  BOOST_REQUIRE(testing::read_until(eof->stdout_fd(), "up\n") == "up\n");
  eof->terminate(std::chrono::seconds{5});
  BOOST_TEST(testing::code_of(*eof) == 5);
  BOOST_TEST(!eof->write_stdin("late\n"));
  eof->terminate(std::chrono::seconds{5}); // idempotent
  BOOST_TEST(testing::code_of(*eof) == 5);
  // Ignores both: SIGKILL after the grace.
  auto stubborn = start_managed(*backend, *session, "sh", {"-c", "trap '' TERM; echo up; exec sleep 4716"});
  BOOST_REQUIRE(testing::read_until(stubborn->stdout_fd(), "up\n") == "up\n");
  stubborn->terminate(std::chrono::milliseconds{300});
  BOOST_TEST(testing::code_of(*stubborn) == 128 + SIGKILL);
  BOOST_TEST(!running("4716"));
}

BOOST_FIXTURE_TEST_CASE(managed_process_that_exits_by_itself_reports_its_code, driver_fixture) {
  auto s = spec("managed-exit");
  auto session = start(s);
  auto p = start_managed(*backend, *session, "sh", {"-c", "exit 7"});
  BOOST_TEST(testing::wait_eof(p->stdout_fd()));
  BOOST_TEST(testing::exit_within(*p) == 7);
  BOOST_TEST(!p->write_stdin("nobody reads\n"));
  auto missing = start_managed(*backend, *session, "no-such-command-4717");
  BOOST_TEST(testing::exit_within(*missing) == 127);
  BOOST_TEST(testing::eventually([&] { return missing->stderr_preview() == "no-such-command-4717: not found"; }));
}

BOOST_FIXTURE_TEST_CASE(stopping_the_session_ends_its_managed_processes, driver_fixture) {
  auto s = spec("managed-teardown");
  auto session = start(s);
  auto p = start_managed(*backend, *session, "sh", {"-c", "echo up; exec sleep 4718"});
  BOOST_REQUIRE(testing::read_until(p->stdout_fd(), "up\n") == "up\n");
  BOOST_REQUIRE(testing::eventually([] { return running("4718"); }));
  backend->stop_session(*session);
  BOOST_TEST(!running("4718"));
  BOOST_TEST(testing::code_of(*p) == 137);
  BOOST_TEST(testing::wait_eof(p->stdout_fd()));
  BOOST_TEST(!p->write_stdin("gone\n"));
  p->terminate(std::chrono::seconds{5}); // harmless once the sandbox is gone
  BOOST_TEST(testing::code_of(*p) == 137);
  auto again = backend->start_managed_process(*session, process_spec{});
  BOOST_TEST(!again.ok());
}

BOOST_FIXTURE_TEST_CASE(an_exit_code_recorded_before_teardown_survives_it, driver_fixture) {
  auto s = spec("managed-exit-teardown");
  auto session = start(s);
  auto p = start_managed(*backend, *session, "sh", {"-c", "exit 9"});
  BOOST_REQUIRE(testing::wait_eof(p->stdout_fd()));
  // Nobody asked for the code yet: teardown reads what init recorded before the io
  // folder goes. The io folder is mounted only inside the sandbox: looked at from there.
  BOOST_REQUIRE(testing::eventually([&] { return run(*session, s, "cat /.boxrt/io/p1.exit").stdout_text == "9"; }));
  backend->stop_session(*session);
  BOOST_TEST(testing::code_of(*p) == 9);
}

BOOST_AUTO_TEST_SUITE_END()
