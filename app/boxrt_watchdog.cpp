// boxrt-watchdog: fences a cluster node whose boxd stopped renewing its lease
// (backends/linux/watchdog.hpp, docs/cluster.md "Failing closed"). It holds no socket and
// takes no input but the page boxd shares with it (descriptor 3). Every 10 ms it compares
// the deadline there with CLOCK_BOOTTIME. While the deadline has passed it fences, again
// at every tick: it SIGKILLs every process of the given cgroup folders (recursively,
// rounds until they list none, at most 2 s per tick), each through a pidfd taken only
// after /proc shows the process still in that group (a pid reused by a host process is
// never signalled), and it detaches every mount its records folder names, resolving the
// path without following a link. When boxd is gone it fences once more and exits.
//
//   boxrt-watchdog --parent PID --records DIR [--cgroup DIR]...
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "backends/linux/watchdog.hpp"

namespace {

int64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

/// A cgroup folder, and its path as /proc/<pid>/cgroup shows it ("/boxrt-…/…").
struct group {
  std::string dir;
  std::string relative;
};

/// True when `pid` is now in `g` or below it (one hierarchy line of /proc/<pid>/cgroup).
bool in_group(pid_t pid, const group& g) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/cgroup"};
  for (std::string line; std::getline(in, line);) {
    auto colon = line.find(':', line.find(':') + 1);
    if (colon == std::string::npos)
      continue;
    auto path = line.substr(colon + 1);
    if (path == g.relative || path.starts_with(g.relative + "/"))
      return true;
  }
  return false;
}

/// SIGKILLs the processes `dir` lists and those below it; how many were listed.
size_t kill_group(const std::string& dir, const group& g) {
  size_t listed = 0;
  {
    std::ifstream procs{dir + "/cgroup.procs"};
    for (long p; procs >> p;) {
      if (p <= 1)
        continue;
      ++listed;
      int fd = static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(p), 0));
      if (fd < 0)
        continue; // gone already
      if (in_group(static_cast<pid_t>(p), g))
        ::syscall(SYS_pidfd_send_signal, fd, SIGKILL, nullptr, 0);
      ::close(fd);
    }
  }
  if (DIR* d = ::opendir(dir.c_str())) {
    while (auto* e = ::readdir(d))
      if (e->d_type == DT_DIR && std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
        listed += kill_group(dir + "/" + e->d_name, g);
    ::closedir(d);
  }
  return listed;
}

void unmount_recorded(const std::string& records) {
  DIR* d = ::opendir(records.c_str());
  if (!d)
    return;
  while (auto* e = ::readdir(d)) {
    if (e->d_name[0] == '.')
      continue;
    std::ifstream in{records + "/" + e->d_name};
    std::string point;
    if (!std::getline(in, point) || point.empty() || point.front() != '/')
      continue;
    // The mount point may sit below a tenant's tree: found without following any link,
    // then detached through its descriptor.
    open_how how{};
    how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
    how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    int fd = static_cast<int>(::syscall(SYS_openat2, AT_FDCWD, point.c_str(), &how, sizeof how));
    if (fd < 0)
      continue;
    ::umount2(("/proc/self/fd/" + std::to_string(fd)).c_str(), MNT_DETACH);
    ::close(fd);
  }
  ::closedir(d);
}

void fence(const std::vector<group>& groups, const std::string& records, boxrt::watchdog_page* page) {
  for (auto& g : groups)
    kill_group(g.dir, g);
  if (!records.empty())
    unmount_recorded(records);
  auto until = now_ns() + 2'000'000'000LL;
  while (now_ns() < until) {
    size_t left = 0;
    for (auto& g : groups)
      left += kill_group(g.dir, g);
    if (left == 0)
      break;
    timespec pause{0, 2'000'000};
    ::nanosleep(&pause, nullptr);
  }
  page->fenced_ns.store(now_ns());
  page->fences.fetch_add(1);
}

} // namespace

int main(int argc, char** argv) {
  pid_t parent = 0;
  std::string records;
  std::vector<group> groups;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--parent") {
      parent = static_cast<pid_t>(std::atol(argv[i + 1]));
    } else if (flag == "--records") {
      records = argv[i + 1];
    } else if (flag == "--cgroup") {
      // "/sys/fs/cgroup/<hierarchy>/<relative>": the part after the hierarchy's mount.
      std::string dir = argv[i + 1];
      auto rest = dir.substr(std::min(dir.size(), std::string{"/sys/fs/cgroup/"}.size()));
      auto slash = rest.find('/');
      groups.push_back({dir, slash == std::string::npos ? "/" : rest.substr(slash)});
    } else {
      return 2;
    }
  }
  if (parent <= 0)
    return 2;
  // Only the page (descriptor 3) from boxd.
  ::close_range(4, ~0U, 0);
  void* map = ::mmap(nullptr, sizeof(boxrt::watchdog_page), PROT_READ | PROT_WRITE, MAP_SHARED, 3, 0);
  if (map == MAP_FAILED)
    return 3;
  ::close(3);
  // The last process the out-of-memory killer should pick, and never swapped out.
  if (int fd = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC); fd >= 0) {
    (void)!::write(fd, "-1000", 5);
    ::close(fd);
  }
  ::mlockall(MCL_CURRENT | MCL_FUTURE);
  auto* page = static_cast<boxrt::watchdog_page*>(map);
  for (;;) {
    if (::getppid() != parent) {
      // boxd is gone: whatever it left is fenced once more, then the watchdog ends.
      fence(groups, records, page);
      return 0;
    }
    auto deadline = page->deadline_ns.load();
    if (deadline != 0 && now_ns() >= deadline)
      fence(groups, records, page);
    timespec tick{0, 10'000'000};
    ::nanosleep(&tick, nullptr);
  }
}
