// The template namespace and detached tmpfs mounts (namespaces.hpp).
#include "backends/sandbox/namespaces.hpp"

#include "backends/linux/quota.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

namespace boxrt::sandbox_detail {

namespace {

bool at_or_below(const std::string& p, const std::string& base) {
  return p == base || (base == "/" ? p.starts_with("/") : p.starts_with(base + "/"));
}

} // namespace

result<unique_fd> detached_tmpfs(const std::string& options, unsigned attrs) {
  unique_fd fs{::fsopen("tmpfs", FSOPEN_CLOEXEC)};
  if (!fs)
    return make_box_error(ec::box_error, std::string{"cannot create a tmpfs: "} + std::strerror(errno));
  std::istringstream in{options};
  std::string option;
  while (std::getline(in, option, ',')) {
    auto eq = option.find('=');
    int rc = eq == std::string::npos
               ? ::fsconfig(fs.get(), FSCONFIG_SET_FLAG, option.c_str(), nullptr, 0)
               : ::fsconfig(fs.get(), FSCONFIG_SET_STRING, option.substr(0, eq).c_str(), option.c_str() + eq + 1, 0);
    if (rc != 0)
      return make_box_error(ec::box_error, "cannot set tmpfs option " + option + ": " + std::strerror(errno));
  }
  if (::fsconfig(fs.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0)
    return make_box_error(ec::box_error, std::string{"cannot create a tmpfs: "} + std::strerror(errno));
  unique_fd mnt{::fsmount(fs.get(), FSMOUNT_CLOEXEC, attrs)};
  if (!mnt)
    return make_box_error(ec::box_error, std::string{"cannot create a tmpfs: "} + std::strerror(errno));
  return mnt;
}

std::vector<std::string> mounts_to_leave_out(const std::vector<std::string>& keep) {
  std::vector<std::string> out;
  for (auto& point : mount_points()) {
    if (point == "/")
      continue;
    bool needed = false;
    for (auto& k : keep)
      needed = needed || at_or_below(point, k) || at_or_below(k, point);
    if (!needed && std::find(out.begin(), out.end(), point) == out.end())
      out.push_back(point);
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.size() > b.size(); });
  return out;
}

result<unique_fd> make_template_namespace(const std::vector<std::string>& leave_out, const std::string& init_dir,
                                          int init_image) {
  struct stat image{};
  if (::fstat(init_image, &image) != 0)
    return make_box_error(ec::box_error, std::string{"cannot read boxrt-init's image: "} + std::strerror(errno));
  ::mkdir(init_dir.c_str(), 0755);
  const std::string options = "size=" + std::to_string(image.st_size + 65536) + ",nr_inodes=16,mode=0755";
  const std::string init_file = init_dir + "/init";
  std::vector<const char*> points;
  for (auto& p : leave_out)
    points.push_back(p.c_str());
  int ready[2], hold[2];
  if (::pipe2(ready, O_CLOEXEC) != 0)
    return make_box_error(ec::box_error, std::string{"cannot create a pipe: "} + std::strerror(errno));
  if (::pipe2(hold, O_CLOEXEC) != 0) {
    ::close(ready[0]);
    ::close(ready[1]);
    return make_box_error(ec::box_error, std::string{"cannot create a pipe: "} + std::strerror(errno));
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    // System calls only: the caller may have other threads.
    ::close(ready[0]);
    ::close(hold[1]);
    char status = 1;
    auto fail = [&](char why) {
      status = why;
      (void)!::write(ready[1], &status, 1);
      ::_exit(1);
    };
    if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
      fail(2);
    for (const char* p : points)
      ::umount2(p, MNT_DETACH | UMOUNT_NOFOLLOW); // one inside a detached one is gone already
    if (::mount("boxrt-init", init_dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) != 0)
      fail(3);
    int out = ::open(init_file.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0555);
    if (out < 0)
      fail(4);
    for (off_t at = 0; at < image.st_size;)
      if (::sendfile(out, init_image, &at, static_cast<size_t>(image.st_size - at)) <= 0)
        fail(5);
    if (::fchmod(out, 0555) != 0 || ::close(out) != 0)
      fail(5);
    if (::mount(nullptr, init_dir.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0)
      fail(6);
    status = 0;
    (void)!::write(ready[1], &status, 1);
    // Held until boxd has the namespace by descriptor.
    char c;
    while (::read(hold[0], &c, 1) < 0 && errno == EINTR) {
    }
    ::_exit(0);
  }
  ::close(ready[1]);
  ::close(hold[0]);
  unique_fd hold_end{hold[1]};
  if (pid < 0) {
    ::close(ready[0]);
    return make_box_error(ec::box_error, std::string{"cannot fork: "} + std::strerror(errno));
  }
  char status = 1;
  ssize_t n;
  while ((n = ::read(ready[0], &status, 1)) < 0 && errno == EINTR) {
  }
  ::close(ready[0]);
  unique_fd ns;
  if (n == 1 && status == 0)
    ns.reset(::open(("/proc/" + std::to_string(pid) + "/ns/mnt").c_str(), O_RDONLY | O_CLOEXEC));
  hold_end.reset();
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  if (n != 1 || status != 0)
    return make_box_error(ec::box_error, "cannot make the sandboxes' mount namespace (step " + std::to_string(status) + ")");
  if (!ns)
    return make_box_error(ec::box_error, std::string{"cannot hold the sandboxes' mount namespace: "} + std::strerror(errno));
  return ns;
}

} // namespace boxrt::sandbox_detail
