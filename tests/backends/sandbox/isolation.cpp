// Walls a hostile tenant tried to break from inside its own sandbox, each tried again
// here by a real program in a real sandbox (root, as CI runs). Every probe also runs as
// a plain host child once (the controls), so a probe that could never succeed cannot
// pass for a wall.
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "managed_helpers.hpp"
#include "temp_dir.hpp"
#include "sandbox_fixture.hpp"
#include "backends/linux/quota.hpp"

using namespace boxrt;
using namespace boxrt::testing;
namespace fs = std::filesystem;

namespace {

#if defined(__x86_64__)
/// Python run as a command: tries every way a command has to reach the sandbox's own
/// processes (pid 1, init's reaper; pid 2, boxrt-init) and prints "name RESULT", RESULT
/// being OK or the errno name. Signal 0 only checks permission, so nothing is harmed
/// where a call gets through.
const std::string reach_init_probe = R"(
import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, (ctypes.get_errno() if r < 0 else 0)
def report(name, e):
    print(name, errno.errorcode.get(e, str(e)) if e else 'OK', flush=True)
def call(name, nr, *args):
    r, e = sc(nr, *args)
    report(name, e)
    return r
target = int(os.environ.get('TARGET', '2'))
group = os.getpgid(target)
print('pgid_of_init', group, flush=True)
for label, pid in (('init', target), ('reaper', 1), ('init_group', -group), ('everyone', -1)):
    call('kill_' + label, 62, pid, 0)
call('tkill_init', 200, target, 0)
call('tgkill_init', 234, target, target, 0)
info = ctypes.create_string_buffer(128)
ctypes.c_int.from_buffer(info, 8).value = -1   # si_code = SI_QUEUE
call('rt_sigqueueinfo_init', 129, target, 0, info)
call('rt_tgsigqueueinfo_init', 297, target, target, 0, info)
fd = call('pidfd_open_init', 434, target, 0)
if fd >= 0: os.close(fd)
fd = call('pidfd_open_reaper', 434, 1, 0)
if fd >= 0: os.close(fd)
try:
    d = os.open('/proc/%d' % target, os.O_RDONLY | os.O_DIRECTORY)
    call('pidfd_send_signal_procdir', 424, d, 0, 0, 0)
    os.close(d)
except OSError as e:
    report('pidfd_send_signal_procdir', e.errno)
r, w = os.pipe()
call('fcntl_setown_init', 72, r, 8, target)
call('fcntl_setown_init_group', 72, r, 8, -group)
owner = ctypes.c_int(target)
s = socket.socket()
call('ioctl_fiosetown_init', 16, s.fileno(), 0x8901, ctypes.byref(owner))
s.close()
self_fd = call('pidfd_open_self', 434, os.getpid(), 0)
call('pidfd_getfd_self', 438, self_fd, 0, 0)
call('kcmp_self', 312, os.getpid(), os.getpid(), 0, 0, 0)
buf = ctypes.create_string_buffer(8)
iov = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p).value, 8)
call('process_vm_readv_self', 310, os.getpid(), iov, 1, iov, 1, 0)
call('ptrace_seize_init', 101, 0x4206, target, 0, 0)
call('setpgid_into_init_group', 109, 0, group)
call('prlimit_init', 302, target, 7, 0, 0)
call('setpriority_init', 141, 0, target, 19)
for fd in (0, 1, 2):
    # Nothing of the reaper's may lead to the host's channel.
    try:
        link = os.readlink('/proc/1/fd/%d' % fd)
        link = 'pipe' if link.startswith('pipe:') else 'other'
    except OSError as e:
        link = 'unreadable'
    print('reaper_fd%d' % fd, link, flush=True)
# pid 1 and init: their memory (read-write), their syscall state and their OOM score.
for label, pid in (('reaper', int(os.environ.get('REAPER', '1'))), ('init', target)):
    try:
        os.close(os.open('/proc/%d/mem' % pid, os.O_RDWR))
        report('mem_rw_' + label, 0)
    except OSError as e:
        report('mem_rw_' + label, e.errno)
    try:
        with open('/proc/%d/syscall' % pid) as f:
            f.read()
        report('syscall_' + label, 0)
    except OSError as e:
        report('syscall_' + label, e.errno)
    try:
        with open('/proc/%d/oom_score_adj' % pid) as f:
            score = f.read()
    except OSError:
        score = '0'
    try:
        fd = os.open('/proc/%d/oom_score_adj' % pid, os.O_WRONLY)
        os.write(fd, score.strip().encode())   # its own value back: harmless where it gets in
        os.close(fd)
        report('oom_score_adj_' + label, 0)
    except OSError as e:
        report('oom_score_adj_' + label, e.errno)
for name, path, flags in (('open_init_stdout', '/proc/%d/fd/1' % target, os.O_WRONLY),
                          ('open_init_stdin', '/proc/%d/fd/0' % target, os.O_WRONLY),
                          ('open_init_environ', '/proc/%d/environ' % target, os.O_RDONLY),
                          ('open_init_mem', '/proc/%d/mem' % target, os.O_RDONLY)):
    try:
        os.close(os.open(path, flags))
        report(name, 0)
    except OSError as e:
        report(name, e.errno)
)";

/// Python: the other interfaces the filter must refuse (io_uring, vsock, memfd_secret,
/// openat2) and every way to make a set-uid or set-gid file.
const std::string refused_calls_probe = R"(
import ctypes, errno, os, socket, stat, tempfile
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def report(name, e):
    print(name, errno.errorcode.get(e, str(e)) if e else 'OK', flush=True)
def call(name, nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    report(name, ctypes.get_errno() if r < 0 else 0)
    if r >= 0 and name in ('io_uring_setup', 'memfd_secret', 'openat2'):
        os.close(r)
params = ctypes.create_string_buffer(120)
call('io_uring_setup', 425, 4, params)
call('memfd_secret', 447, 0)
how = ctypes.create_string_buffer(24)  # flags, mode, resolve: O_RDONLY
call('openat2', 437, -100, b'/', how, 24)
try:
    socket.socket(40, socket.SOCK_STREAM).close()   # AF_VSOCK
    report('socket_vsock', 0)
except OSError as e:
    report('socket_vsock', e.errno)
ldt = ctypes.create_string_buffer(16)
call('modify_ldt', 154, 0, ldt, 16)
# AF_NETLINK: route (ip) and sock_diag (ss) stay; the rest is surface.
for name, proto in (('route', 0), ('usersock', 2), ('firewall', 3), ('sock_diag', 4),
                    ('nflog', 5), ('xfrm', 6), ('audit', 9), ('netfilter', 12),
                    ('uevent', 15), ('generic', 16), ('crypto', 21)):
    try:
        socket.socket(16, socket.SOCK_RAW, proto).close()
        report('netlink_' + name, 0)
    except OSError as e:
        report('netlink_' + name, e.errno)
if os.path.exists('/proc/config.gz') or os.environ.get('EXPECT_CONFIG'):
    try:
        with open('/proc/config.gz', 'rb') as f:
            print('config_gz', 'OK' if f.read(2) == b'\x1f\x8b' else 'EMPTY', flush=True)
    except OSError as e:
        report('config_gz', e.errno)
d = tempfile.mkdtemp(dir=os.environ.get('SCRATCH', '/tmp'))
f = os.path.join(d, 'plant')
open(f, 'w').close()
def attempt(name, fn):
    try:
        fn()
        report(name, 0)
    except OSError as e:
        report(name, e.errno)
attempt('chmod_plain', lambda: os.chmod(f, 0o755))
attempt('chmod_setuid', lambda: os.chmod(f, 0o4755))
attempt('chmod_setgid', lambda: os.chmod(f, 0o2755))
fd = os.open(f, os.O_RDONLY)
attempt('fchmod_setuid', lambda: os.fchmod(fd, 0o4755))
os.close(fd)
dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
attempt('fchmodat_setgid', lambda: os.chmod('plant', 0o2755, dir_fd=dfd))
call('fchmodat2_setuid', 452, dfd, b'plant', 0o4755, 0)
attempt('open_creat_setuid', lambda: os.close(os.open(os.path.join(d, 'born'), os.O_CREAT | os.O_WRONLY, 0o4755)))
attempt('mknod_setgid', lambda: os.mknod(os.path.join(d, 'node'), stat.S_IFREG | 0o2755))
attempt('open_creat_plain', lambda: os.close(os.open(os.path.join(d, 'plain'), os.O_CREAT | os.O_WRONLY, 0o755)))
modes = [os.lstat(os.path.join(d, n)).st_mode & 0o6000 for n in os.listdir(d)]
print('special_bits', sum(1 for m in modes if m), flush=True)
)";

/// Runs `python` as a plain host child (no sandbox, no filter) and returns its report.
std::string run_on_host(const std::string& python, const std::string& env = {}) {
  std::string cmd = env + " " + python_cmd(python);
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  BOOST_REQUIRE(p != nullptr);
  char buf[4096];
  while (auto n = std::fread(buf, 1, sizeof buf, p))
    out.append(buf, n);
  ::pclose(p);
  return out;
}

/// The host pid of the boxrt-init of a sandbox whose first process is `first` (init
/// is that process's child), or -1.
pid_t host_pid_of_init(pid_t first) {
  for (auto& e : fs::directory_iterator{"/proc"}) {
    auto name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    std::ifstream status{e.path() / "status"};
    for (std::string line; std::getline(status, line);)
      if (line.rfind("PPid:", 0) == 0 && std::stoi(line.substr(5)) == first)
        return std::stoi(name);
  }
  return -1;
}
#endif

} // namespace

BOOST_AUTO_TEST_SUITE(isolation_suite, *boost::unit_test::precondition(sandbox_precondition))

#if defined(__x86_64__)

BOOST_FIXTURE_TEST_CASE(a_command_can_neither_signal_nor_reach_init, sandbox_fixture) {
  auto s = spec("reach-init");
  auto session = start(s);
  auto report = report_lines(run(*session, s, python_cmd(reach_init_probe)).stdout_text);
  // init's reaper leads the sandbox's session and process group, init is in it: its
  // group is 1, which kill() can only reach as -1, every process.
  BOOST_TEST(report["pgid_of_init"] == "1");
  for (const char* name : {"kill_init", "kill_reaper", "kill_init_group", "kill_everyone", "tkill_init",
                           "tgkill_init", "rt_sigqueueinfo_init", "rt_tgsigqueueinfo_init", "pidfd_open_init",
                           "pidfd_open_reaper", "pidfd_send_signal_procdir", "fcntl_setown_init",
                           "fcntl_setown_init_group", "ioctl_fiosetown_init", "pidfd_getfd_self", "kcmp_self",
                           "process_vm_readv_self", "ptrace_seize_init", "setpgid_into_init_group", "prlimit_init",
                           "setpriority_init"})
    BOOST_TEST(report[name] == "EPERM", name << ": " << report[name]);
  // pid 1 is init's reaper on both drivers, not dumpable: none of its descriptors can
  // even be looked at.
  for (const char* name : {"reaper_fd0", "reaper_fd1", "reaper_fd2"})
    BOOST_TEST(report[name] == "unreadable", name << ": " << report[name]);
  // Neither init nor its reaper is dumpable: their pipes to the host, their memory,
  // their syscall state and their OOM score stay closed (before, bwrap's own reaper was
  // pid 1 and dumpable: /proc/1/mem opened read-write, oom_score_adj was written).
  for (const char* name : {"open_init_stdout", "open_init_stdin", "open_init_environ", "open_init_mem",
                           "mem_rw_reaper", "syscall_reaper", "oom_score_adj_reaper", "mem_rw_init",
                           "syscall_init", "oom_score_adj_init"})
    BOOST_TEST(report[name] == "EACCES", name << ": " << report[name]);
  // The layout the filter's pid rules rely on: the reaper is pid 1, init pid 2.
  BOOST_TEST(run(*session, s, "head -c 12 /proc/1/cmdline; echo; head -c 12 /proc/2/cmdline").stdout_text
             == "/.boxrt/init\n/.boxrt/init");
  // The session is still served.
  BOOST_TEST(run(*session, s, "echo alive").stdout_text == "alive");
  backend->stop_session(*session);
}

BOOST_AUTO_TEST_CASE(control_the_reach_probes_get_through_without_the_sandbox) {
  // Aimed at a child of our own uid (the probe's own shell), without filter or dumpable
  // guard: the same calls succeed, so the probe above can fail.
  auto report = report_lines(run_on_host(reach_init_probe, "TARGET=$$ REAPER=$$"));
  for (const char* name : {"kill_init", "tkill_init", "tgkill_init", "pidfd_open_init", "pidfd_send_signal_procdir",
                           "fcntl_setown_init", "ioctl_fiosetown_init", "pidfd_getfd_self", "kcmp_self",
                           "process_vm_readv_self", "open_init_environ", "mem_rw_reaper", "syscall_reaper",
                           "oom_score_adj_reaper", "mem_rw_init", "syscall_init", "oom_score_adj_init"})
    BOOST_TEST(report[name] == "OK", name << ": " << report[name]);
}

BOOST_FIXTURE_TEST_CASE(a_stopped_init_costs_an_exec_at_most_its_timeout, sandbox_fixture) {
  auto s = spec("stopped-init");
  auto session = start(s);
  BOOST_REQUIRE(run(*session, s, "true").exit_code == 0);
  auto init = host_pid_of_init(backend->sandbox_pid(*session));
  BOOST_REQUIRE(init > 0);
  // Whatever stops init (here the host, standing in for any way a command finds), the
  // next request must not block a worker for good: a command bigger than a pipe's
  // buffer cannot be written to a stopped reader.
  BOOST_REQUIRE(::kill(init, SIGSTOP) == 0);
  s.timeout_sec = 2;
  auto big = s;
  big.cmd = ": " + std::string(256 * 1024, 'x') + "; echo done";
  auto reply = std::async(std::launch::async, [&] { return backend->exec(*session, big, exec_limits{}); });
  auto answered = reply.wait_for(std::chrono::seconds{s.timeout_sec + 5}) == std::future_status::ready;
  if (!answered)
    session->interrupt(); // let the stuck write go, so the test can end
  BOOST_REQUIRE_MESSAGE(answered, "the exec was not answered within timeout_sec + 5 s");
  auto r = reply.get();
  BOOST_TEST((!r.ok() || r.value().status == exec_status::timed_out),
             (r.ok() ? "exit " + std::to_string(r.value().exit_code) + ": " + r.value().stderr_text : r.error().message));
  ::kill(init, SIGCONT);
  backend->stop_session(*session);
}

BOOST_FIXTURE_TEST_CASE(io_uring_vsock_memfd_secret_and_openat2_are_refused, sandbox_fixture) {
  auto s = spec("refused");
  auto session = start(s);
  auto report = report_lines(run(*session, s, python_cmd(refused_calls_probe)).stdout_text);
  BOOST_TEST(report["io_uring_setup"] == "EPERM");
  BOOST_TEST(report["memfd_secret"] == "EPERM");
  BOOST_TEST(report["socket_vsock"] == "EAFNOSUPPORT");
  BOOST_TEST(report["openat2"] == "ENOSYS");
  BOOST_TEST(report["modify_ldt"] == "EPERM");
  BOOST_TEST(report["netlink_route"] == "OK");
  BOOST_TEST(report["netlink_sock_diag"] == "OK");
  for (const char* name : {"netlink_usersock", "netlink_firewall", "netlink_nflog", "netlink_xfrm",
                           "netlink_audit", "netlink_netfilter", "netlink_uevent", "netlink_generic",
                           "netlink_crypto"})
    BOOST_TEST(report[name] == "EPROTONOSUPPORT", name << ": " << report[name]);
  // The kernel's build configuration stays the host's own.
  if (fs::exists("/proc/config.gz"))
    BOOST_TEST((report["config_gz"] == "EACCES" || report["config_gz"] == "EMPTY"),
               "config_gz: " << report["config_gz"]);
  // ip and ss keep working on the sandbox's own namespace.
  auto tools = run(*session, s, "ip -o link show lo >/dev/null && echo ip-ok; "
                                "ss -tan >/dev/null && echo ss-ok");
  BOOST_TEST(tools.stdout_text == "ip-ok\nss-ok", tools.stdout_text << tools.stderr_text);
  backend->stop_session(*session);
}

BOOST_FIXTURE_TEST_CASE(no_set_uid_or_set_gid_file_can_be_made_inside, sandbox_fixture) {
  auto s = spec("setuid", tenant("5e75e75e75e75e75e75e75e7"));
  auto session = start(s);
  auto report = report_lines(run(*session, s, "SCRATCH=/workspace " + python_cmd(refused_calls_probe)).stdout_text);
  BOOST_TEST(report["chmod_plain"] == "OK");
  BOOST_TEST(report["open_creat_plain"] == "OK");
  for (const char* name : {"chmod_setuid", "chmod_setgid", "fchmod_setuid", "fchmodat_setgid", "fchmodat2_setuid",
                           "open_creat_setuid", "mknod_setgid"})
    BOOST_TEST(report[name] == "EPERM", name << ": " << report[name]);
  BOOST_TEST(report["special_bits"] == "0");
  backend->stop_session(*session);
}

BOOST_AUTO_TEST_CASE(control_the_refused_calls_work_without_the_filter) {
  testing::temp_dir scratch;
  auto report = report_lines(run_on_host(refused_calls_probe, "SCRATCH=" + scratch.str()));
  for (const char* name : {"io_uring_setup", "openat2", "chmod_setuid", "chmod_setgid", "fchmod_setuid",
                           "fchmodat_setgid", "fchmodat2_setuid", "open_creat_setuid", "mknod_setgid",
                           "modify_ldt", "netlink_audit", "netlink_uevent", "netlink_generic"})
    BOOST_TEST(report[name] == "OK", name << ": " << report[name]);
  if (fs::exists("/proc/config.gz"))
    BOOST_TEST(report["config_gz"] == "OK");
  BOOST_TEST(report["special_bits"] != "0");
}

#endif

BOOST_FIXTURE_TEST_CASE(a_dead_sandbox_is_replaced_on_the_next_exec_with_the_workspace_intact, sandbox_fixture) {
  for (bool private_workspace : {true, false}) {
    BOOST_TEST_CONTEXT((private_workspace ? "private workspace" : "host workspace")) {
      auto s = spec(private_workspace ? "dies-private" : "dies-host",
                    private_workspace ? std::string{} : tenant("dead0dead0dead0dead0dead"));
      auto session = start(s);
      BOOST_REQUIRE_EQUAL(run(*session, s, "echo kept > /workspace/file; echo run >> /workspace/runs").exit_code, 0);
      // Killed from outside between two execs: the next exec runs in a fresh sandbox.
      auto first = backend->sandbox_pid(*session);
      BOOST_REQUIRE(first > 0 && ::kill(first, SIGKILL) == 0);
      BOOST_REQUIRE(eventually([&] { return !fs::exists("/proc/" + std::to_string(first)); }));
      auto r = run(*session, s, "cat /workspace/file; echo run >> /workspace/runs; wc -l < /workspace/runs");
      BOOST_TEST(r.exit_code == 0, r.stderr_text);
      BOOST_TEST(r.stdout_text == "kept\n2");
      BOOST_TEST(backend->sandbox_pid(*session) != first);
      // Killed during an exec: that exec reports the death, the next runs once, fresh.
      auto during = std::async(std::launch::async, [&] {
        auto spec_during = s;
        spec_during.cmd = "echo run >> /workspace/runs; touch /workspace/started; sleep 30";
        return backend->exec(*session, spec_during, exec_limits{});
      });
      // The marker is in the workspace: the host folder, or the session folder's.
      BOOST_REQUIRE(eventually([&] {
        std::error_code err;
        auto where = private_workspace ? opts.state_dir + "/sessions" : tenant("dead0dead0dead0dead0dead");
        for (auto it = fs::recursive_directory_iterator{where, err}; it != fs::recursive_directory_iterator{};
             it.increment(err))
          if (it->path().filename() == "started")
            return true;
        return false;
      }));
      ::kill(backend->sandbox_pid(*session), SIGKILL);
      BOOST_REQUIRE(during.wait_for(std::chrono::seconds{20}) == std::future_status::ready);
      auto died = during.get();
      BOOST_TEST(!died.ok());
      auto after = run(*session, s, "cat /workspace/file; wc -l < /workspace/runs");
      BOOST_TEST(after.stdout_text == "kept\n3");
      backend->stop_session(*session);
    }
  }
}

namespace {

/// Runs `fn` in a child process as host user `uid` with the supplementary groups
/// `groups`; returns its exit code.
template <class Fn>
int as_host_user(uint32_t uid, std::vector<gid_t> groups, Fn fn) {
  auto pid = ::fork();
  if (pid == 0) {
    if (::setgroups(groups.size(), groups.data()) != 0 || ::setresgid(uid, uid, uid) != 0
        || ::setresuid(uid, uid, uid) != 0)
      ::_exit(99);
    ::_exit(fn());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 98;
}

/// The errno of reading `path` (0: read), of writing it with `mode` "a".
int try_read(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return errno;
  ::close(fd);
  return 0;
}

int try_append(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND);
  if (fd < 0)
    return errno;
  auto n = ::write(fd, "host\n", 5);
  ::close(fd);
  return n == 5 ? 0 : errno;
}

constexpr uint32_t nobody = 65534;

/// A mount's root: a device other than its parent's.
bool is_mount_point(const std::string& path) {
  struct stat here{}, up{};
  return ::stat(path.c_str(), &here) == 0 && ::stat((path + "/..").c_str(), &up) == 0
         && here.st_dev != up.st_dev;
}

} // namespace

// Plain trees and trees on a quota image alike (an image's root starts as mkfs leaves
// it, 0755 with no ACL: before, `nobody` read a tenant's files there), on first use and
// again after a restart remounts the image.
BOOST_FIXTURE_TEST_CASE(each_workspace_runs_as_its_own_uid_and_its_tree_is_closed_to_other_users, sandbox_fixture) {
  // The trusted host's group keeps access; everyone else is shut out.
  opts.host_gid = 4242;
  make_backend();
  // Every folder above the tenant trees is open to all: only the trees' own
  // permissions can keep another user out.
  fs::create_directories(root + "/workspaces/tenants");
  for (auto dir : {root, root + "/workspaces", root + "/workspaces/tenants"})
    ::chmod(dir.c_str(), 0755);
  for (int quota : {0, 16}) {
    BOOST_TEST_CONTEXT((quota ? "on a quota image" : "plain tree")) {
      auto a_path = tenant(quota ? "a33a33a33a33a33a33a33a33" : "a11a11a11a11a11a11a11a11");
      auto b_path = tenant(quota ? "b44b44b44b44b44b44b44b44" : "b22b22b22b22b22b22b22b22");
      auto a = spec("uid-a", a_path), b = spec("uid-b", b_path);
      a.workspace_quota_mb = b.workspace_quota_mb = quota;
      auto sa = start(a), sb = start(b);
      auto uid_a = run(*sa, a, "id -u; echo secret > /workspace/a.txt; umask 022; echo open > /workspace/open.txt").stdout_text;
      auto uid_b = run(*sb, b, "id -u").stdout_text;
      BOOST_TEST(uid_a != uid_b);
      BOOST_TEST(uid_a == std::to_string(backend->sandbox_uid(*sa)));
      const auto sandbox_a = backend->sandbox_uid(*sa), sandbox_b = backend->sandbox_uid(*sb);
      auto closed = [&](const char* when) {
        BOOST_TEST_CONTEXT(when) {
          if (quota)
            BOOST_TEST(is_mount_point(a_path));
          struct stat st{};
          BOOST_REQUIRE(::stat((a_path + "/a.txt").c_str(), &st) == 0);
          BOOST_TEST(st.st_uid == sandbox_a);
          BOOST_REQUIRE(::stat(a_path.c_str(), &st) == 0);
          BOOST_TEST(st.st_uid == sandbox_a);
          BOOST_TEST((st.st_mode & 07) == 0);
          // Another local user reads nothing, not even a file the tenant left world-readable.
          BOOST_TEST(as_host_user(nobody, {}, [&] { return try_read(a_path + "/open.txt"); }) == EACCES);
          // Neither does the other workspace's uid.
          BOOST_TEST(as_host_user(sandbox_b, {}, [&] { return try_read(a_path + "/a.txt"); }) == EACCES);
          // A non-root member of the host group reads and writes the tenant's files.
          BOOST_TEST(as_host_user(4343, {4242}, [&] { return try_read(a_path + "/a.txt"); }) == 0);
          BOOST_TEST(as_host_user(4343, {4242}, [&] { return try_append(a_path + "/a.txt"); }) == 0);
          BOOST_TEST(as_host_user(4343, {4242}, [&] { return try_append(a_path + "/open.txt"); }) == 0);
        }
      };
      closed("first use");
      backend->stop_session(*sa);
      backend->stop_session(*sb);
      // A restart: the image is unmounted at cleanup and mounted again at the next start.
      backend->cleanup_orphans();
      make_backend();
      auto again = start(a);
      BOOST_TEST(run(*again, a, "cat /workspace/a.txt").stdout_text == "secret\nhost");
      closed("after a restart");
      backend->stop_session(*again);
    }
  }
}

BOOST_FIXTURE_TEST_CASE(workspace_uids_survive_a_restart_and_a_full_range_is_refused, sandbox_fixture) {
  opts.uid_first = 0x71000000u;
  opts.uid_last = opts.uid_first + 1;
  opts.workspace_roots = {root + "/workspaces/tenants"};
  make_backend();
  // A tree of an earlier boxd version: everything owned by 64000.
  auto legacy = tenant("0ld0ld0ld0ld0ld0ld0ld0ld");
  fs::create_directories(legacy + "/sub");
  std::ofstream{legacy + "/sub/kept.txt"} << "kept";
  for (auto& e : fs::recursive_directory_iterator{legacy})
    ::lchown(e.path().c_str(), 64000, 64000);
  ::chown(legacy.c_str(), 64000, 64000);
  auto first = spec("legacy", legacy);
  auto s1 = start(first);
  const auto uid = backend->sandbox_uid(*s1);
  BOOST_TEST(uid >= opts.uid_first);
  BOOST_TEST(uid <= opts.uid_last);
  // Handed over: the tenant owns and writes its old files.
  BOOST_TEST(run(*s1, first, "echo more >> /workspace/sub/kept.txt && cat /workspace/sub/kept.txt").stdout_text
             == "keptmore");
  backend->stop_session(*s1);
  s1.reset(); // a real restart: no session keeps this state folder's host state alive
  // The record (<state>/uids.sqlite) holds the assignment: a new boxd keeps it.
  make_backend();
  auto other = spec("other", tenant("0th0th0th0th0th0th0th0th"));
  auto s2 = start(other);
  BOOST_TEST(backend->sandbox_uid(*s2) != uid);
  auto again = start(first);
  BOOST_TEST(backend->sandbox_uid(*again) == uid);
  // Two uids in the range, both taken: a third workspace is refused.
  auto full = backend->start_session(spec("third", tenant("3rd3rd3rd3rd3rd3rd3rd3rd")));
  BOOST_REQUIRE(!full.ok());
  BOOST_TEST(wire_class(full.error().code) == "BoxCapacityExceededError");
  BOOST_TEST(full.error().message == "Box sandbox uid range " + std::to_string(opts.uid_first) + "-"
                                       + std::to_string(opts.uid_last) + " is exhausted");
  backend->stop_session(*s2);
  backend->stop_session(*again);
}

BOOST_FIXTURE_TEST_CASE(a_host_path_workspace_keeps_its_uid_across_a_restart_and_no_other_gets_it, sandbox_fixture) {
  opts.uid_first = 0x71000010u;
  opts.uid_last = opts.uid_first + 1;
  opts.workspace_roots = {root + "/workspaces/tenants"};
  make_backend();
  // A standard-mode workspace on a host path outside the tenants folder: no scan at
  // start would find its uid; only the record does.
  auto alpha = spec("alpha", root + "/projects/alpha");
  auto s1 = start(alpha);
  const auto uid_a = backend->sandbox_uid(*s1);
  BOOST_TEST(uid_a >= opts.uid_first);
  BOOST_TEST(uid_a <= opts.uid_last);
  BOOST_TEST(run(*s1, alpha, "echo mine > /workspace/file").exit_code == 0);
  struct stat st{};
  BOOST_REQUIRE(::stat((root + "/projects/alpha/file").c_str(), &st) == 0);
  BOOST_TEST(st.st_uid == uid_a);
  backend->stop_session(*s1);
  s1.reset();
  // A real restart, as boxd makes it: a new host state, then the clean-up.
  make_backend();
  backend->cleanup_orphans();
  // The tenant gets the other uid, never alpha's, while alpha's files are owned by it.
  auto beta = spec("beta", tenant("be7abe7abe7abe7abe7abe7a"));
  auto s2 = start(beta);
  BOOST_TEST(backend->sandbox_uid(*s2) != uid_a);
  auto full = backend->start_session(spec("gamma", root + "/projects/gamma"));
  BOOST_REQUIRE(!full.ok());
  BOOST_TEST(wire_class(full.error().code) == "BoxCapacityExceededError");
  BOOST_TEST(full.error().message == "Box sandbox uid range " + std::to_string(opts.uid_first) + "-"
                                       + std::to_string(opts.uid_last) + " is exhausted");
  auto again = start(alpha);
  BOOST_TEST(backend->sandbox_uid(*again) == uid_a);
  BOOST_TEST(run(*again, alpha, "cat /workspace/file").stdout_text.starts_with("mine"));
  backend->stop_session(*s2);
  backend->stop_session(*again);
}

BOOST_FIXTURE_TEST_CASE(no_path_of_boxd_shows_in_the_sandboxs_proc, sandbox_fixture) {
  // Every process's cmdline, environ and mountinfo, as a command inside reads them.
  const std::string dump = "for f in /proc/[0-9]*/cmdline /proc/[0-9]*/environ /proc/[0-9]*/mountinfo; do "
                           "cat $f 2>/dev/null; echo; done | tr '\\0' ' '";
  const auto build_dir = fs::path{opts.init_path.empty() ? BOXRT_TEST_BUILD_DIR : opts.init_path}.parent_path().string();
  auto quota = spec("paths-quota", tenant("9a79a79a79a79a79a79a79a7"));
  quota.workspace_quota_mb = 16;
  for (auto s : {quota, spec("paths-plain", tenant("9b79b79b79b79b79b79b79b7"))}) {
    BOOST_TEST_CONTEXT(s.session_id) {
      auto session = start(s);
      auto seen = run(*session, s, dump).stdout_text;
      BOOST_TEST(seen.find("/.boxrt/init") != std::string::npos); // the probe reads them
      BOOST_TEST(seen.find(opts.state_dir) == std::string::npos);
      BOOST_TEST(seen.find(build_dir) == std::string::npos);
      // A workspace on a quota image is a filesystem of its own: nothing of the host's
      // folders shows at all. A plain host folder shows only its own path (the kernel
      // prints a bind's root within its filesystem: docs/sandbox.md).
      if (s.workspace_quota_mb > 0)
        BOOST_TEST(seen.find(root) == std::string::npos);
      else
        BOOST_TEST(seen.find(root + "/state") == std::string::npos);
      backend->stop_session(*session);
    }
  }
}

BOOST_FIXTURE_TEST_CASE(disk_io_caps_apply_to_the_quota_images_device_only_when_configured, sandbox_fixture) {
  auto quota = spec("io", tenant("10a10a10a10a10a10a10a10a"));
  quota.workspace_quota_mb = 16;
  // Off by default: no caps, and readiness does not claim any.
  {
    auto session = start(quota);
    BOOST_TEST(backend->io_limits(*session).empty());
    backend->stop_session(*session);
    BOOST_TEST(!backend->probe_readiness("", true).details.at("io_limits"));
  }
  opts.io.write_bps = 1048576;
  opts.io.write_iops = 200;
  make_backend();
  auto session = start(quota);
  struct stat st{};
  BOOST_REQUIRE(::stat(quota.host_path.c_str(), &st) == 0);
  // The workspace is the quota image's loop device, and that is what is capped.
  BOOST_TEST(major(st.st_dev) == 7u);
  auto device = std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
  BOOST_TEST(backend->io_limits(*session) == device + " write_bps=1048576 write_iops=200\n");
  // The workspace still works under the caps.
  BOOST_TEST(run(*session, quota, "dd if=/dev/zero of=/workspace/f bs=64k count=4 oflag=direct 2>/dev/null; wc -c < /workspace/f").stdout_text
             == "262144");
  backend->stop_session(*session);
  BOOST_TEST(backend->probe_readiness("", true).details.at("io_limits"));
}

BOOST_FIXTURE_TEST_CASE(a_spec_cannot_smuggle_options_or_walk_back_up_a_host_path, sandbox_fixture) {
  // bwrap reads its options NUL-separated: a NUL inside a path would add options.
  auto s = spec("nul");
  s.mount_path = std::string{"/w\0--share-net", 15};
  auto r = backend->start_session(s);
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST(r.error().message == "paths of the spec must not contain NUL characters");
  auto m = spec("nul-mount");
  m.extra_mounts.push_back(mount_spec{root, std::string{"/x\0--bind\0/\0/host", 17}, mount_mode::ro});
  BOOST_TEST(!backend->start_session(m).ok());
  // A host path is walked physically, so ".." in it would not be what a check of its
  // text saw: refused.
  auto up = spec("dotdot", tenant("d0d0d0d0d0d0d0d0d0d0d0d0") + "/../ws-other");
  auto u = backend->start_session(up);
  BOOST_REQUIRE(!u.ok());
  BOOST_TEST(u.error().message.find("Invalid argument") != std::string::npos, u.error().message);
}

BOOST_FIXTURE_TEST_CASE(a_mount_target_inside_another_mount_or_the_machinery_is_refused, sandbox_fixture) {
  // The driver makes each target by path before the sandbox's root is in place. A target
  // below another mount passes through what a command may have swapped for a link
  // (rename the folder above a mount point, link it to the staging folder): refused
  // before anything starts, with a reason.
  auto data = root + "/data";
  fs::create_directories(data);
  auto refused = [&](const std::string& target, const std::string& why) {
    auto s = spec("nested", tenant("4e4e4e4e4e4e4e4e4e4e4e4e"));
    s.extra_mounts.push_back(mount_spec{data, target, mount_mode::rw});
    // The same refusal from the spec alone, before anything is touched: the supervisor
    // asks this first, so such a spec never replaces a running session.
    auto early = backend->check_spec(s);
    BOOST_TEST(early.message.find(why) != std::string::npos, early.message);
    auto r = backend->start_session(s);
    BOOST_REQUIRE(!r.ok());
    BOOST_TEST(r.error().message.find(why) != std::string::npos, r.error().message);
    BOOST_TEST(r.error().to_wire().rfind("BoxValidationError: ", 0) == 0, r.error().to_wire());
  };
  refused("/workspace/a/b", "extra_mounts[0].mount_path /workspace/a/b overlaps mount_path /workspace");
  refused("/", "extra_mounts[0].mount_path / is reserved inside the sandbox");
  refused("/proc/sys", "is reserved inside the sandbox");
  refused("/dev", "is reserved inside the sandbox");
  refused("/.boxrt/io", "is reserved inside the sandbox");
  // Nothing of the refused specs was made: no session folder, no workspace folder.
  BOOST_TEST(!fs::exists(tenant("4e4e4e4e4e4e4e4e4e4e4e4e")));
  // Two extra mounts inside each other, either way round.
  auto s = spec("nested-extra");
  s.extra_mounts.push_back(mount_spec{data, "/data", mount_mode::ro});
  s.extra_mounts.push_back(mount_spec{data, "/data/inner", mount_mode::ro});
  BOOST_TEST(!backend->start_session(s).ok());
  std::swap(s.extra_mounts[0], s.extra_mounts[1]);
  BOOST_TEST(!backend->start_session(s).ok());
  // Side by side they are fine.
  s.extra_mounts[0].mount_path = "/data2";
  std::ofstream{data + "/seen"} << "x";
  auto ok = start(s);
  BOOST_TEST(run(*ok, s, "ls /data /data2").stdout_text.find("seen") != std::string::npos);
  backend->stop_session(*ok);
}

BOOST_FIXTURE_TEST_CASE(a_skills_link_left_in_the_workspace_puts_nothing_on_the_host, sandbox_fixture) {
  // The skills view's target is the one left below a writable mount; a running sandbox
  // cannot replace it (it is a mount point there), but its folder may have been made a
  // link while no sandbox ran. Wherever the driver then puts the view, the host's own
  // mounts and files stay as they were.
  auto ws = tenant("5f5f5f5f5f5f5f5f5f5f5f5f");
  auto decoy = root + "/decoy";
  fs::create_directories(ws);
  fs::create_directories(decoy);
  fs::create_symlink(decoy, ws + "/.skills");
  auto s = spec("skills-link", ws);
  auto started = backend->start_session(s);
  if (started.ok()) {
    auto r = backend->exec(**started, s, exec_limits{});
    (void)r;
    backend->stop_session(**started);
  }
  BOOST_TEST(mounts_under(decoy).empty());
  BOOST_TEST(fs::is_empty(decoy));
  BOOST_TEST(fs::is_symlink(ws + "/.skills"));
}

BOOST_FIXTURE_TEST_CASE(every_writable_tmpfs_is_bounded_in_bytes_and_inodes_and_dev_takes_no_files, sandbox_fixture) {
  // Files in a tmpfs cost memory the sandbox is charged for: a full tmpfs must answer
  // ENOSPC, not take the session down through its memory limit.
  const std::string fill = R"(
import errno, os, sys
for d in ('/tmp', '/home', '/dev/shm'):
    try:
        with open(d + '/big', 'wb') as f:
            for _ in range(int(sys.argv[1])):
                f.write(b'x' * 1048576)
        print(d, 'bytes', 'fit')
    except OSError as e:
        print(d, 'bytes', errno.errorcode[e.errno])
    if os.path.exists(d + '/big'):
        os.unlink(d + '/big')
    n = 0
    try:
        while n < 40000:
            open('%s/f%d' % (d, n), 'w').close()
            n += 1
        print(d, 'files', 'fit')
    except OSError as e:
        print(d, 'files', errno.errorcode[e.errno], n)
    # The three folders share one tmpfs: what one took is given back before the next.
    for i in range(n):
        os.unlink('%s/f%d' % (d, i))
try:
    open('/dev/planted', 'w').close()
    print('/dev', 'files', 'fit')
except OSError as e:
    print('/dev', 'files', errno.errorcode[e.errno])
)";
  for (int64_t memory_mb : {256, 64}) {
    BOOST_TEST_CONTEXT("memory_mb " << memory_mb) {
      auto s = spec("ephemeral-" + std::to_string(memory_mb));
      s.memory_mb = memory_mb;
      auto session = start(s);
      // Writes twice the memory limit's worth; inodes up to 40,000 files.
      auto cmd = "cat > /tmp/fill.py <<'EOF'\n" + fill + "\nEOF\npython3 /tmp/fill.py " + std::to_string(memory_mb * 2);
      auto r = run(*session, s, cmd);
      BOOST_TEST(r.exit_code == 0, r.stderr_text);
      BOOST_TEST(r.stderr_text.find("out of memory") == std::string::npos);
      for (const char* d : {"/tmp", "/home", "/dev/shm"}) {
        BOOST_TEST(r.stdout_text.find(std::string{d} + " bytes ENOSPC") != std::string::npos, d << ": " << r.stdout_text);
        BOOST_TEST(r.stdout_text.find(std::string{d} + " files ENOSPC") != std::string::npos, d << ": " << r.stdout_text);
      }
      BOOST_TEST(r.stdout_text.find("/dev files EROFS") != std::string::npos, r.stdout_text);
      // The session is still there to use.
      BOOST_TEST(run(*session, s, "echo alive").stdout_text == "alive");
      backend->stop_session(*session);
    }
  }
}

BOOST_FIXTURE_TEST_CASE(a_tree_too_deep_for_a_path_is_removed_with_its_session_and_at_restart, sandbox_fixture) {
  // 4,000 levels: paths twice PATH_MAX long and more levels than a process may hold
  // descriptors open, so only an iterative walk by descriptor can remove it.
  const std::string deep = "python3 -c \"import os\nos.chdir('/workspace')\nfor _ in range(4000):\n"
                           "    os.mkdir('d'); os.chdir('d')\nopen('bottom', 'w').write('x')\"";
  auto sessions = opts.state_dir + "/sessions";
  auto count = [&] {
    std::error_code err;
    return std::distance(fs::directory_iterator{sessions, err}, fs::directory_iterator{});
  };
  // The soft descriptor limit a service manager gives boxd.
  struct nofile_limit {
    rlimit saved{};
    nofile_limit() {
      ::getrlimit(RLIMIT_NOFILE, &saved);
      rlimit low{1024, saved.rlim_max};
      ::setrlimit(RLIMIT_NOFILE, &low);
    }
    ~nofile_limit() { ::setrlimit(RLIMIT_NOFILE, &saved); }
  } limit;
  auto s = spec("deep");
  s.timeout_sec = 60;
  auto session = start(s);
  BOOST_REQUIRE_EQUAL(run(*session, s, deep).exit_code, 0);
  BOOST_REQUIRE_EQUAL(count(), 1);
  backend->stop_session(*session);
  BOOST_TEST(count() == 0);
  // The same tree left by a crashed run goes at the next start.
  auto left = start(s);
  BOOST_REQUIRE_EQUAL(run(*left, s, deep).exit_code, 0);
  left->interrupt(); // the sandbox dies as in a crash; its folder stays
  backend.reset();
  BOOST_REQUIRE_EQUAL(count(), 1);
  make_backend();
  backend->cleanup_orphans();
  BOOST_TEST(count() == 0);
}

BOOST_AUTO_TEST_SUITE_END()
