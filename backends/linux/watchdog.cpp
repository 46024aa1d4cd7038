#include "backends/linux/watchdog.hpp"

#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "backends/linux/helper.hpp"

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
  unique_fd fd{::memfd_create("boxrt-watchdog", MFD_CLOEXEC)};
  if (!fd || ::ftruncate(fd.get(), sizeof(watchdog_page)) != 0)
    return box_error{ec::box_error, std::string{"cannot make the watchdog's page: "} + std::strerror(errno)};
  void* map = ::mmap(nullptr, sizeof(watchdog_page), PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (map == MAP_FAILED)
    return box_error{ec::box_error, std::string{"cannot map the watchdog's page: "} + std::strerror(errno)};
  std::unique_ptr<watchdog> w{new watchdog};
  w->page_ = new (map) watchdog_page{};
  std::vector<std::string> args{program, "--parent", std::to_string(::getpid()), "--records", records_dir};
  for (auto& d : cgroup_dirs) {
    args.push_back("--cgroup");
    args.push_back(d);
  }
  // A host helper like the network stack's: only the page handed over, killed and
  // reaped with this object.
  auto helper = helper_process::start(args, {{fd.get(), 3}});
  if (!helper)
    return helper.error();
  w->process_ = std::move(helper.value());
  return w;
}

watchdog::~watchdog() {
  process_.reset();
  if (page_) {
    page_->~watchdog_page();
    ::munmap(page_, sizeof(watchdog_page));
  }
}

pid_t watchdog::pid() const {
  return process_ ? process_->pid() : -1;
}

} // namespace boxrt
