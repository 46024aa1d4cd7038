#include "backends/linux/quota.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <vector>

#include <spdlog/spdlog.h>

#include "backends/linux/beneath.hpp"
#include "messages/tenancy.hpp"

extern char** environ;

namespace boxrt {

namespace fs = std::filesystem;

std::string run_tool(const std::vector<std::string>& argv) {
  int status = 0;
  auto out = run_tool_status(argv, status);
  return status == 0 ? std::string{} : out;
}

std::string run_tool_status(const std::vector<std::string>& argv, int& exit_status) {
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0)
    return std::string{"pipe: "} + std::strerror(errno);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  std::vector<char*> args;
  for (auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // boxd blocks SIGINT/SIGTERM in its threads and ignores SIGPIPE: the tool starts
  // with an empty mask and default dispositions instead.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(err_pipe[1]);
  if (rc != 0) {
    ::close(err_pipe[0]);
    exit_status = 127;
    return argv[0] + ": " + std::strerror(rc);
  }
  std::string err;
  char buf[4096];
  for (;;) {
    auto n = ::read(err_pipe[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    if (err.size() < 65536)
      err.append(buf, static_cast<size_t>(n));
  }
  ::close(err_pipe[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  while (!err.empty() && (err.back() == '\n' || err.back() == ' '))
    err.pop_back();
  if (err.empty() && exit_status != 0)
    err = argv[0] + " failed with status " + std::to_string(exit_status);
  return err;
}

std::vector<std::string> mount_points() {
  // mountinfo escapes space, tab, newline and backslash in a path as \ooo.
  auto unescape = [](const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\\' && i + 3 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
        out.push_back(static_cast<char>(std::stoi(s.substr(i + 1, 3), nullptr, 8)));
        i += 3;
      } else {
        out.push_back(s[i]);
      }
    }
    return out;
  };
  std::vector<std::string> out;
  std::ifstream in{"/proc/self/mountinfo"};
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields{line};
    std::string id, parent, devno, root, point;
    fields >> id >> parent >> devno >> root >> point;
    out.push_back(unescape(point));
  }
  return out;
}

std::vector<std::string> mounts_under(const std::string& prefix) {
  std::vector<std::string> out;
  for (auto& point : mount_points())
    if (point == prefix || point.starts_with(prefix + "/"))
      out.push_back(point);
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.size() > b.size(); });
  return out;
}

namespace {

/// Beside an image that an earlier run left mounted: check it before the next mount.
constexpr const char* unclean_suffix = ".unclean";

bool is_mount_point(const std::string& path) {
  auto points = mounts_under(path);
  return std::find(points.begin(), points.end(), path) != points.end();
}

std::string record_name(const std::string& mount_point) {
  return sha256_hex(mount_point).substr(0, 24);
}

box_error unmount(const std::string& mount_point) {
  // The mount point may lie in a tree a tenant can write: it is reached by a walk that
  // follows no link a tenant could have planted, and unmounted through that descriptor.
  auto fd = beneath::open_trusted(mount_point, O_PATH | O_DIRECTORY);
  if (!fd)
    return errno == ENOENT ? box_error{} : make_box_error(ec::box_error, "cannot reach " + mount_point + ": " + std::strerror(errno));
  auto target = "/proc/self/fd/" + std::to_string(fd.get());
  if (::umount2(target.c_str(), 0) == 0 || errno == EINVAL)
    return {};
  // Something still holds it (a process that is exiting): detach lazily; the loop
  // device goes with the last reference.
  if (::umount2(target.c_str(), MNT_DETACH) == 0)
    return {};
  return make_box_error(ec::box_error, "cannot unmount " + mount_point + ": " + std::strerror(errno));
}

} // namespace

loop_quota::loop_quota(std::string images_dir, std::string records_dir)
  : images_dir_(std::move(images_dir)), records_dir_(std::move(records_dir)) {
}

loop_quota::lease::~lease() {
  owner_.release(mount_point_);
}

box_error loop_quota::mount_image(const std::string& image, const std::string& mount_point) {
  auto target = beneath::make_dirs_trusted(mount_point, 0755);
  if (!target)
    return make_box_error(ec::box_error, "cannot create " + mount_point + ": " + std::strerror(errno));
  // Mounted at a folder of boxd's own state first, then moved onto the mount point's
  // descriptor: no path through a tenant's tree is ever looked up by the mount.
  std::error_code err;
  auto stage = records_dir_ + "/.stage-" + record_name(mount_point);
  fs::create_directories(stage, err);
  // nodev/nosuid: nothing on a tenant's image can become a device or gain privileges.
  if (auto e = run_tool({"mount", "-o", "loop,nodev,nosuid", image, stage}); !e.empty()) {
    fs::remove(stage, err);
    return make_box_error(ec::box_error, "cannot mount the quota image of " + mount_point + ": " + e);
  }
  auto moved = ::move_mount(AT_FDCWD, stage.c_str(), target.get(), "", MOVE_MOUNT_T_EMPTY_PATH);
  auto why = errno;
  if (moved != 0)
    ::umount2(stage.c_str(), MNT_DETACH);
  fs::remove(stage, err);
  if (moved != 0)
    return make_box_error(ec::box_error, "cannot mount the quota image of " + mount_point + ": " + std::strerror(why));
  return {};
}

result<std::shared_ptr<loop_quota::lease>> loop_quota::acquire(const std::string& name,
                                                                const std::string& mount_point, int64_t size_mb,
                                                                uint32_t uid, uint32_t gid, bool ephemeral) {
  std::lock_guard lock{mtx_};
  auto shared = [&] { return std::shared_ptr<lease>{new lease(*this, mount_point)}; };
  if (auto i = mounts_.find(mount_point); i != mounts_.end()) {
    // Still mounted, unless something took it away meanwhile (a fenced cluster node's
    // watchdog detaches its mounts): then it is mounted again, so that nothing is
    // written to the bare folder below it.
    if (!is_mount_point(mount_point)) {
      auto image = i->second.image.empty() ? images_dir_ + "/" + name + ".ext4" : i->second.image;
      spdlog::warn("quota: the image of {} was unmounted under boxd; mounting it again", mount_point);
      if (auto e = mount_image(image, mount_point))
        return e;
    }
    ++i->second.leases;
    return shared();
  }
  std::error_code err;
  fs::create_directories(images_dir_, err);
  fs::create_directories(records_dir_, err);
  if (!beneath::make_dirs_trusted(mount_point, 0755))
    return make_box_error(ec::box_error, "cannot create " + mount_point + ": " + std::strerror(errno));
  auto image = images_dir_ + "/" + name + ".ext4";
  if (!fs::exists(image)) {
    // Built under a temporary name: a failed mkfs never leaves a half image behind.
    auto tmp = image + ".new";
    fs::remove(tmp, err);
    {
      int fd = ::open(tmp.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
      if (fd < 0)
        return make_box_error(ec::box_error, "cannot create " + tmp + ": " + std::strerror(errno));
      auto ok = ::ftruncate(fd, size_mb * 1048576) == 0;
      ::close(fd);
      if (!ok)
        return make_box_error(ec::box_error, "cannot size " + tmp + ": " + std::strerror(errno));
    }
    auto owner = "root_owner=" + std::to_string(uid) + ":" + std::to_string(gid);
    // Multi-mount protection: a node mounting an image keeps a sequence number in it
    // current, and a mount elsewhere waits it out and is refused while it changes.
    if (mmp_)
      owner += ",mmp_update_interval=1";
    if (auto e = run_tool({"mkfs.ext4", "-q", "-F", "-m", "0", "-O", mmp_ ? "^has_journal,mmp" : "^has_journal", "-E", owner, tmp});
        !e.empty()) {
      fs::remove(tmp, err);
      return make_box_error(ec::box_error, "cannot format the quota image of " + mount_point + ": " + e);
    }
    fs::rename(tmp, image, err);
    if (err)
      return make_box_error(ec::box_error, "cannot create " + image + ": " + err.message());
  }
  // An image that was in use when the machine or boxd went down: a check first (the
  // images have no journal). A failure refuses this workspace, not the whole boxd.
  if (fs::exists(image + unclean_suffix)) {
    int status = 0;
    auto out = run_tool_status({"e2fsck", "-p", image}, status);
    // 0: clean, 1 and 2: errors corrected; anything else needs an operator.
    if (status > 2) {
      spdlog::error("quota: the image of {} needs a manual check (e2fsck -f {}): {}", mount_point, image, out);
      return make_box_error(ec::box_error, "the quota image of " + mount_point
                                             + " was not cleanly unmounted and e2fsck cannot repair it: " + out);
    }
    if (status != 0)
      spdlog::warn("quota: e2fsck repaired the image of {}: {}", mount_point, out);
    fs::remove(image + unclean_suffix, err);
  }
  // The record comes first, so a crash between mount and record cannot hide a mount.
  {
    std::ofstream rec{records_dir_ + "/" + record_name(mount_point)};
    rec << mount_point << "\n" << image << "\n";
  }
  if (!is_mount_point(mount_point))
    if (auto e = mount_image(image, mount_point)) {
      fs::remove(records_dir_ + "/" + record_name(mount_point), err);
      return e;
    }
  mounts_[mount_point] = mounted{1, ephemeral ? image : std::string{}};
  return shared();
}

void loop_quota::release(const std::string& mount_point) {
  std::lock_guard lock{mtx_};
  auto i = mounts_.find(mount_point);
  if (i == mounts_.end() || --i->second.leases > 0)
    return;
  auto image = std::move(i->second.image);
  mounts_.erase(i);
  if (auto e = unmount(mount_point))
    spdlog::warn("quota: {}", e.message);
  std::error_code err;
  if (!image.empty())
    fs::remove(image, err);
  fs::remove(records_dir_ + "/" + record_name(mount_point), err);
}

void loop_quota::cleanup_recorded() {
  std::lock_guard lock{mtx_};
  std::error_code err;
  if (!fs::is_directory(records_dir_, err))
    return;
  for (auto& entry : fs::directory_iterator{records_dir_, err}) {
    if (entry.path().filename().string().starts_with(".stage-")) {
      // A crash between mounting at the stage and moving the mount away.
      ::umount2(entry.path().c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
      fs::remove(entry.path(), err);
      continue;
    }
    std::ifstream in{entry.path()};
    std::string mount_point, image;
    std::getline(in, mount_point);
    std::getline(in, image);
    // The image was mounted when this run ended: it gets a check before its next mount.
    if (!image.empty() && fs::exists(image))
      std::ofstream{image + unclean_suffix} << "left mounted by an earlier run\n";
    if (!mount_point.empty() && is_mount_point(mount_point)) {
      spdlog::info("quota: unmounting {} left by an earlier run", mount_point);
      if (auto e = unmount(mount_point))
        spdlog::warn("quota: {}", e.message);
    }
    fs::remove(entry.path(), err);
  }
  // Private workspaces of sessions that ended with the crash.
  for (auto& entry : fs::directory_iterator{images_dir_, err})
    if (entry.path().filename().string().starts_with(ephemeral_prefix))
      fs::remove(entry.path(), err);
}

void loop_quota::release_all() {
  std::lock_guard lock{mtx_};
  std::error_code err;
  for (auto& [point, m] : mounts_) {
    if (auto e = unmount(point))
      spdlog::warn("quota: {}", e.message);
    if (!m.image.empty())
      fs::remove(m.image, err);
    fs::remove(records_dir_ + "/" + record_name(point), err);
  }
  mounts_.clear();
}

bool loop_quota::probe(const std::string& scratch_dir, std::string* why) {
  auto fail = [&](std::string text) {
    if (why)
      *why = std::move(text);
    return false;
  };
  std::error_code err;
  fs::create_directories(scratch_dir, err);
  auto image = scratch_dir + "/probe.ext4";
  auto point = scratch_dir + "/mnt";
  fs::create_directories(point, err);
  if (err)
    return fail("cannot create " + point + ": " + err.message());
  {
    int fd = ::open(image.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || ::ftruncate(fd, 4 << 20) != 0) {
      if (fd >= 0)
        ::close(fd);
      return fail("cannot create " + image);
    }
    ::close(fd);
  }
  auto cleanup = [&] {
    (void)unmount(point);
    fs::remove_all(scratch_dir, err);
  };
  if (auto e = run_tool({"mkfs.ext4", "-q", "-F", "-m", "0", "-N", "64", "-O", "^has_journal", image}); !e.empty()) {
    cleanup();
    return fail("mkfs.ext4: " + e);
  }
  if (auto e = mount_image(image, point)) {
    cleanup();
    return fail(e.message);
  }
  // Bytes: an 8 MiB write into a 4 MiB image must stop with ENOSPC.
  bool bytes_capped = false;
  {
    int fd = ::open((point + "/fill").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    std::string chunk(1 << 20, 'x');
    for (int i = 0; fd >= 0 && i < 8; ++i)
      if (::write(fd, chunk.data(), chunk.size()) < 0) {
        bytes_capped = errno == ENOSPC;
        break;
      }
    if (fd >= 0)
      ::close(fd);
    ::unlink((point + "/fill").c_str());
  }
  // Inodes: creating more files than the image has inodes must stop with ENOSPC.
  bool inodes_capped = false;
  for (int i = 0; i < 256; ++i) {
    auto f = point + "/i" + std::to_string(i);
    int fd = ::open(f.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) {
      inodes_capped = errno == ENOSPC;
      break;
    }
    ::close(fd);
  }
  cleanup();
  if (!bytes_capped)
    return fail("a loop-mounted ext4 image did not cap bytes");
  if (!inodes_capped)
    return fail("a loop-mounted ext4 image did not cap inodes");
  return true;
}

} // namespace boxrt
