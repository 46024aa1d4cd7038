// The seccomp program: its shape, and what a child that loads it can and cannot do.
#include "backends/linux/seccomp.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <fcntl.h>
#include <fstream>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <string>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include "temp_dir.hpp"

using namespace boxrt;

namespace {

/// Exit codes of the filtered child: 0 when every check held, else the failing step.
enum step : int {
  all_held = 0,
  no_new_privs_failed = 10,
  load_failed = 11,
  unshare_allowed = 12,
  mount_allowed = 13,
  clone_newuser_allowed = 14,
  clone3_not_enosys = 15,
  getpid_broken = 16,
  file_write_broken = 17,
  fork_broken = 18,
};

const char* step_name(int code) {
  switch (code) {
    case all_held: return "all checks held";
    case no_new_privs_failed: return "PR_SET_NO_NEW_PRIVS failed";
    case load_failed: return "loading the filter failed";
    case unshare_allowed: return "unshare(CLONE_NEWNS) was not refused with EPERM";
    case mount_allowed: return "mount was not refused with EPERM";
    case clone_newuser_allowed: return "clone(CLONE_NEWUSER) was not refused with EPERM";
    case clone3_not_enosys: return "clone3 did not fail with ENOSYS";
    case getpid_broken: return "getpid failed";
    case file_write_broken: return "writing a file failed";
    case fork_broken: return "a plain fork failed";
    default: return "unexpected exit";
  }
}

/// Ends a child created by a clone the filter should have refused.
void end_stray(long ret) {
  if (ret == 0)
    ::_exit(0);
  if (ret > 0)
    ::waitpid(static_cast<pid_t>(ret), nullptr, 0);
}

/// Runs in the forked child: async-signal-safe calls only.
[[noreturn]] void filtered_child(const std::string& program, const char* mount_target,
                                 const char* file) {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    ::_exit(no_new_privs_failed);
  sock_fprog prog{};
  prog.len = static_cast<unsigned short>(program.size() / sizeof(sock_filter));
  prog.filter = reinterpret_cast<sock_filter*>(const_cast<char*>(program.data()));
  if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0)
    ::_exit(load_failed);
  if (::unshare(CLONE_NEWNS) == 0 || errno != EPERM)
    ::_exit(unshare_allowed);
  if (::mount("none", mount_target, "tmpfs", 0, nullptr) == 0 || errno != EPERM)
    ::_exit(mount_allowed);
  auto ret = ::syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
  if (ret >= 0 || errno != EPERM) {
    end_stray(ret);
    ::_exit(clone_newuser_allowed);
  }
  // struct clone_args, version 0: flags, pidfd, child_tid, parent_tid, exit_signal, ...
  uint64_t args[8] = {0, 0, 0, 0, SIGCHLD, 0, 0, 0};
  ret = ::syscall(SYS_clone3, args, sizeof args);
  if (ret >= 0 || errno != ENOSYS) {
    end_stray(ret);
    ::_exit(clone3_not_enosys);
  }
  if (::getpid() <= 1)
    ::_exit(getpid_broken);
  auto fd = ::open(file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || ::write(fd, "ok", 2) != 2 || ::close(fd) != 0)
    ::_exit(file_write_broken);
  auto pid = ::fork();
  if (pid == 0)
    ::_exit(0);
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
    ::_exit(fork_broken);
  ::_exit(all_held);
}

} // namespace

BOOST_AUTO_TEST_SUITE(seccomp_suite)

BOOST_AUTO_TEST_CASE(program_is_whole_bpf_instructions_and_built_once) {
  auto first = seccomp_program();
  BOOST_REQUIRE_MESSAGE(first.ok(), (first.ok() ? std::string{} : first.error().message));
  BOOST_TEST(!first->empty());
  BOOST_TEST(first->size() % sizeof(sock_filter) == 0u);
  auto second = seccomp_program();
  BOOST_REQUIRE(second.ok());
  BOOST_TEST(*first == *second);
}

BOOST_AUTO_TEST_CASE(blocked_list_names_the_unconditional_refusals) {
  auto names = seccomp_blocked_syscalls();
  auto has = [&](const char* n) { return std::find(names.begin(), names.end(), n) != names.end(); };
  for (auto n : {"ptrace", "mount", "umount2", "unshare", "setns", "bpf", "pivot_root",
                 "chroot", "open_tree", "move_mount", "keyctl", "personality", "modify_ldt"})
    BOOST_TEST(has(n), n);
  BOOST_TEST(!has("clone")); // refused only with CLONE_NEW* flags
  BOOST_REQUIRE(!names.empty());
  BOOST_TEST(names.back() == "clone3");
#if defined(__x86_64__)
  BOOST_TEST(names.size() == 47u); // all 46 exist on x86_64, plus clone3
  BOOST_TEST(has("iopl"));
#endif
}

BOOST_AUTO_TEST_CASE(a_filtered_child_cannot_mount_or_unshare_but_still_works) {
  auto program = seccomp_program();
  BOOST_REQUIRE(program.ok());
  testing::temp_dir dir;
  auto target = dir.str("mnt");
  auto file = dir.str("written");
  BOOST_REQUIRE(::mkdir(target.c_str(), 0700) == 0);
  auto pid = ::fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0)
    filtered_child(*program, target.c_str(), file.c_str());
  int status = 0;
  BOOST_REQUIRE(::waitpid(pid, &status, 0) == pid);
  // Only a broken filter lets the mount through; do not leave it behind.
  ::umount2(target.c_str(), MNT_DETACH);
  BOOST_REQUIRE(WIFEXITED(status));
  BOOST_TEST(WEXITSTATUS(status) == all_held, step_name(WEXITSTATUS(status)));
  std::ifstream in{file};
  std::string text;
  in >> text;
  BOOST_TEST(text == "ok");
}

/// The control below needs root: elsewhere unshare fails without any filter.
boost::test_tools::assertion_result running_as_root(boost::unit_test::test_unit_id) {
  return {::geteuid() == 0};
}

// The control: the filtered child's refusals come from the filter, not the host.
BOOST_AUTO_TEST_CASE(without_the_filter_the_same_call_succeeds_as_root,
                     *boost::unit_test::precondition(running_as_root)) {
  auto pid = ::fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0)
    ::_exit(::unshare(CLONE_NEWNS) == 0 ? 0 : 1);
  int status = 0;
  BOOST_REQUIRE(::waitpid(pid, &status, 0) == pid);
  BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0));
}

BOOST_AUTO_TEST_SUITE_END()
