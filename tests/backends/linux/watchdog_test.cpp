// boxrt-watchdog with real processes in a real cgroup (v1 pids, as this machine kind has;
// root): while the deadline is renewed nothing is touched; once it passes, every process
// of the node's groups is killed and the recorded mounts are detached, also when the
// process that renews it is stopped with SIGSTOP (which is why the watchdog exists).
#include "backends/linux/watchdog.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

using namespace boxrt;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

const std::string pids_root = "/sys/fs/cgroup/pids";

boost::test_tools::assertion_result can_run(boost::unit_test::test_unit_id) {
  return {::geteuid() == 0 && fs::is_directory(pids_root)};
}

struct watchdog_fixture {
  watchdog_fixture() {
    char tmpl[] = "/tmp/boxrt-watchdog-XXXXXX";
    dir = ::mkdtemp(tmpl);
    group = pids_root + "/boxrt-watchdog-test-" + std::to_string(::getpid());
    fs::create_directories(group + "/session-1");
    fs::create_directories(dir + "/records");
    fs::create_directories(dir + "/mnt");
    BOOST_REQUIRE(::mount("boxrt-test", (dir + "/mnt").c_str(), "tmpfs", 0, "size=64k") == 0);
    std::ofstream{dir + "/records/mnt"} << dir + "/mnt\n" << dir + "/image.ext4\n";
  }
  ~watchdog_fixture() {
    for (pid_t p : children) {
      ::kill(p, SIGKILL);
      ::waitpid(p, nullptr, 0);
    }
    ::umount2((dir + "/mnt").c_str(), MNT_DETACH);
    std::error_code err;
    fs::remove(group + "/session-1", err);
    fs::remove(group, err);
    fs::remove_all(dir, err);
  }

  /// A process sleeping in the node's group; returns a pidfd of it.
  int sandboxed_sleeper() {
    pid_t p = ::fork();
    if (p == 0) {
      std::ofstream{group + "/session-1/cgroup.procs"} << ::getpid();
      ::execl("/bin/sleep", "sleep", "60", nullptr);
      ::_exit(127);
    }
    children.push_back(p);
    int fd = static_cast<int>(::syscall(SYS_pidfd_open, p, 0));
    // In its group before the test goes on.
    for (int i = 0; i < 500; ++i) {
      std::ifstream procs{group + "/session-1/cgroup.procs"};
      for (long q; procs >> q;)
        if (q == p)
          return fd;
      std::this_thread::sleep_for(2ms);
    }
    BOOST_FAIL("the sleeper never joined its group");
    return fd;
  }

  static bool exits_within(int pidfd, std::chrono::milliseconds limit) {
    pollfd p{pidfd, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(limit.count())) == 1;
  }

  bool mounted() const {
    struct stat a{}, b{};
    return ::stat((dir + "/mnt").c_str(), &a) == 0 && ::stat(dir.c_str(), &b) == 0 && a.st_dev != b.st_dev;
  }

  std::unique_ptr<watchdog> start() {
    auto program = fs::path{BOXRT_TEST_BUILD_DIR}.parent_path() / "boxrt-watchdog";
    auto w = watchdog::start(program.string(), {group}, dir + "/records");
    BOOST_REQUIRE_MESSAGE(w, (w ? "" : w.error().message));
    return std::move(w.value());
  }

  /// Until the watchdog has fenced `n` times (bounded).
  static bool fenced(const watchdog& w, int64_t n) {
    for (int i = 0; i < 500 && w.fences() < n; ++i)
      std::this_thread::sleep_for(10ms);
    return w.fences() >= n;
  }

  std::string dir, group;
  std::vector<pid_t> children;
};

} // namespace

BOOST_AUTO_TEST_SUITE(watchdog_suite, *boost::unit_test::precondition(can_run))

BOOST_FIXTURE_TEST_CASE(a_renewed_deadline_touches_nothing_and_a_passed_one_fences, watchdog_fixture) {
  int sleeper = sandboxed_sleeper();
  auto w = start();
  // Renewed ahead every 20 ms for half a second: the sandbox lives, the mount stays.
  for (int i = 0; i < 25; ++i) {
    w->set_deadline(watchdog::now_ns() + 200'000'000);
    std::this_thread::sleep_for(20ms);
  }
  BOOST_TEST(!exits_within(sleeper, 0ms));
  BOOST_TEST(mounted());
  BOOST_TEST(w->fences() == 0);
  // Not renewed: once it passes, the group's processes die and the image is detached.
  BOOST_TEST(exits_within(sleeper, 5000ms));
  BOOST_TEST(fenced(*w, 1));
  BOOST_TEST(!mounted());
  ::close(sleeper);
}

BOOST_FIXTURE_TEST_CASE(a_stopped_renewer_is_fenced_by_the_watchdog, watchdog_fixture) {
  int sleeper = sandboxed_sleeper();
  auto w = start();
  // The renewer is another process sharing the page (as boxd's renewing thread would
  // be); SIGSTOP freezes it, and the watchdog alone acts.
  pid_t renewer = ::fork();
  if (renewer == 0) {
    for (;;) {
      w->set_deadline(watchdog::now_ns() + 150'000'000);
      ::usleep(20'000);
    }
  }
  children.push_back(renewer);
  std::this_thread::sleep_for(300ms);
  BOOST_TEST(!exits_within(sleeper, 0ms));
  ::kill(renewer, SIGSTOP);
  BOOST_TEST(exits_within(sleeper, 5000ms));
  BOOST_TEST(fenced(*w, 1));
  BOOST_TEST(!mounted());
  ::close(sleeper);
}

BOOST_FIXTURE_TEST_CASE(a_fork_chain_in_the_group_is_killed_too, watchdog_fixture) {
  // Each process starts the next and exits at once: a pid read from cgroup.procs is often
  // gone by the time it is signalled. The watchdog rounds until the group lists nothing.
  pid_t chain = ::fork();
  if (chain == 0) {
    std::ofstream{group + "/session-1/cgroup.procs"} << ::getpid();
    ::execl("/bin/sh", "sh", "-c", "f() { f & exit 0; }; f", nullptr);
    ::_exit(127);
  }
  children.push_back(chain);
  int sleeper = sandboxed_sleeper();
  auto w = start();
  w->fence_now();
  BOOST_TEST(exits_within(sleeper, 5000ms));
  BOOST_TEST(fenced(*w, 1));
  // The group empties and stays empty.
  bool empty = false;
  for (int i = 0; i < 500 && !empty; ++i) {
    std::ifstream procs{group + "/session-1/cgroup.procs"};
    long p = 0;
    empty = !(procs >> p);
    if (!empty)
      std::this_thread::sleep_for(10ms);
  }
  BOOST_TEST(empty);
  ::close(sleeper);
}

BOOST_FIXTURE_TEST_CASE(when_boxd_is_killed_the_watchdog_fences_and_ends, watchdog_fixture) {
  int sleeper = sandboxed_sleeper();
  // "boxd": a process that starts the watchdog with a far deadline, then is killed.
  int ready[2];
  BOOST_REQUIRE(::pipe(ready) == 0);
  pid_t boxd = ::fork();
  if (boxd == 0) {
    auto program = fs::path{BOXRT_TEST_BUILD_DIR}.parent_path() / "boxrt-watchdog";
    auto w = watchdog::start(program.string(), {group}, dir + "/records");
    if (!w)
      ::_exit(1);
    (*w)->set_deadline(watchdog::now_ns() + 3'600'000'000'000LL);
    (void)!::write(ready[1], "r", 1);
    for (;;)
      ::pause();
  }
  children.push_back(boxd);
  char c = 0;
  BOOST_REQUIRE(::read(ready[0], &c, 1) == 1);
  BOOST_TEST(!exits_within(sleeper, 0ms));
  ::kill(boxd, SIGKILL);
  BOOST_TEST(exits_within(sleeper, 5000ms));
  for (int i = 0; i < 500 && mounted(); ++i)
    std::this_thread::sleep_for(10ms);
  BOOST_TEST(!mounted());
  ::close(ready[0]);
  ::close(ready[1]);
  ::close(sleeper);
}

BOOST_AUTO_TEST_SUITE_END()
