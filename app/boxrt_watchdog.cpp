// boxrt-watchdog: fences a cluster node whose boxd stopped renewing its lease
// (backends/linux/watchdog.hpp, docs/cluster.md "Failing closed"). It holds no socket and
// takes no input but the page boxd shares with it. Every 10 ms it compares the deadline
// there with CLOCK_BOOTTIME; once the deadline has passed it SIGKILLs every process in
// the given cgroup folders (recursively), detaches every mount its records folder names,
// kills again until the groups are empty (at most 2 s), then records when it did. It exits
// when boxd does (the sandboxes end with boxd's own launcher).
//
//   boxrt-watchdog --page-fd N --parent PID --records DIR [--cgroup DIR]...
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "backends/linux/watchdog.hpp"

namespace {

int64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

/// SIGKILLs the processes of `dir` and of every group below it; the number it found.
size_t kill_group(const std::string& dir) {
  size_t found = 0;
  {
    std::ifstream procs{dir + "/cgroup.procs"};
    for (long pid; procs >> pid;)
      if (pid > 1 && ::kill(static_cast<pid_t>(pid), SIGKILL) == 0)
        ++found;
  }
  if (DIR* d = ::opendir(dir.c_str())) {
    while (auto* e = ::readdir(d))
      if (e->d_type == DT_DIR && std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
        found += kill_group(dir + "/" + e->d_name);
    ::closedir(d);
  }
  return found;
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
    if (std::getline(in, point) && !point.empty() && point.front() == '/')
      ::umount2(point.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
  }
  ::closedir(d);
}

} // namespace

int main(int argc, char** argv) {
  int page_fd = -1;
  pid_t parent = 0;
  std::string records;
  std::vector<std::string> groups;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--page-fd")
      page_fd = std::atoi(argv[i + 1]);
    else if (flag == "--parent")
      parent = static_cast<pid_t>(std::atol(argv[i + 1]));
    else if (flag == "--records")
      records = argv[i + 1];
    else if (flag == "--cgroup")
      groups.emplace_back(argv[i + 1]);
    else
      return 2;
  }
  if (page_fd < 0 || parent <= 0)
    return 2;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent)
    return 0;
  void* map = ::mmap(nullptr, sizeof(boxrt::watchdog_page), PROT_READ | PROT_WRITE, MAP_SHARED, page_fd, 0);
  if (map == MAP_FAILED)
    return 3;
  ::close(page_fd);
  auto* page = static_cast<boxrt::watchdog_page*>(map);
  int64_t fenced_for = 0; // the deadline already acted on
  for (;;) {
    if (::getppid() != parent)
      return 0;
    auto deadline = page->deadline_ns.load();
    if (deadline != 0 && deadline != fenced_for && now_ns() >= deadline) {
      // One round of SIGKILL, the images detached, then more rounds until the groups are
      // empty (a fork racing the kill shows up in the next one; at most 2 s).
      for (auto& g : groups)
        kill_group(g);
      if (!records.empty())
        unmount_recorded(records);
      auto until = now_ns() + 2'000'000'000LL;
      while (now_ns() < until) {
        size_t left = 0;
        for (auto& g : groups)
          left += kill_group(g);
        if (left == 0)
          break;
        timespec pause{0, 5'000'000};
        ::nanosleep(&pause, nullptr);
      }
      fenced_for = deadline;
      page->fenced_ns.store(now_ns());
      page->fences.fetch_add(1);
    }
    timespec tick{0, 10'000'000};
    ::nanosleep(&tick, nullptr);
  }
}
