#include "backends/linux/watchdog.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

extern char** environ;

namespace boxrt {

int64_t watchdog::now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

result<std::unique_ptr<watchdog>> watchdog::start(const std::string& program, const std::vector<std::string>& cgroup_dirs,
                                                  const std::string& records_dir) {
  // Close-on-exec: no sandbox or tool boxd starts may hold it (a tenant with the page
  // could move the deadline); the watchdog gets it as descriptor 3.
  int fd = ::memfd_create("boxrt-watchdog", MFD_CLOEXEC);
  if (fd >= 0 && fd <= 3) { // never 3 itself: dup2 onto itself would keep close-on-exec
    int high = ::fcntl(fd, F_DUPFD_CLOEXEC, 16);
    ::close(fd);
    fd = high;
  }
  if (fd < 0 || ::ftruncate(fd, sizeof(watchdog_page)) != 0) {
    auto why = errno;
    if (fd >= 0)
      ::close(fd);
    return box_error{ec::box_error, std::string{"cannot make the watchdog's page: "} + std::strerror(why)};
  }
  void* map = ::mmap(nullptr, sizeof(watchdog_page), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    auto why = errno;
    ::close(fd);
    return box_error{ec::box_error, std::string{"cannot map the watchdog's page: "} + std::strerror(why)};
  }
  std::unique_ptr<watchdog> w{new watchdog};
  w->page_ = new (map) watchdog_page{};
  std::vector<std::string> args{program, "--parent", std::to_string(::getpid()), "--records", records_dir};
  for (auto& d : cgroup_dirs) {
    args.push_back("--cgroup");
    args.push_back(d);
  }
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fd, 3);
  int rc = ::posix_spawn(&w->pid_, program.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(fd);
  if (rc != 0)
    return box_error{ec::box_error, "cannot start " + program + ": " + std::strerror(rc)};
  return w;
}

watchdog::~watchdog() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  if (page_) {
    page_->~watchdog_page();
    ::munmap(page_, sizeof(watchdog_page));
  }
}

} // namespace boxrt
