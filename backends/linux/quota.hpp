// Hard storage quotas through loop-mounted ext4 images (backends-and-skills.md F4): a
// workspace with `workspace_quota_mb > 0` gets an image of that size, mounted at the
// workspace's own host path while any session of it runs, so bytes and inodes are both
// capped and nothing outside can fill up. Images persist across sessions and restarts.
// Mounts are recorded in this boxd's state directory, so a crashed run's leftovers are
// found and unmounted at the next start (never anything another boxd owns).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "messages/error.hpp"

namespace boxrt {

class loop_quota {
 public:
  /// `images_dir` holds the images, `records_dir` one record per live mount.
  loop_quota(std::string images_dir, std::string records_dir);

  /// Images made from now on carry ext4 multi-mount protection (a cluster's shared
  /// images: the kernel refuses a second mount of an image in use on another node).
  void use_multi_mount_protection(bool on) { mmp_ = on; }

  /// Holds one mount; the last lease of a mount point unmounts it.
  class lease {
   public:
    ~lease();
    lease(const lease&) = delete;
    lease& operator=(const lease&) = delete;
    const std::string& mount_point() const { return mount_point_; }

   private:
    friend class loop_quota;
    lease(loop_quota& owner, std::string mount_point)
      : owner_(owner), mount_point_(std::move(mount_point)) {}
    loop_quota& owner_;
    std::string mount_point_;
  };

  /// Mounts the image `name` (created with `size_mb` when missing, its root owned by
  /// `uid`:`gid`) at `mount_point`, or shares the mount already there. An existing
  /// image keeps its size: growing or shrinking a quota needs an operator. An
  /// `ephemeral` image (a session's private workspace) is deleted with its last lease,
  /// and after a crash by cleanup_recorded. Blocking (mkfs, mount): worker pool only.
  result<std::shared_ptr<lease>> acquire(const std::string& name, const std::string& mount_point, int64_t size_mb,
                                         uint32_t uid, uint32_t gid, bool ephemeral = false);

  /// Image names of ephemeral images start with this.
  static constexpr const char* ephemeral_prefix = "session-";

  /// Unmounts every mount recorded by an earlier run (crash leftovers); each image such
  /// a record names gets `e2fsck -p` before it is mounted again (a failure refuses that
  /// workspace with a BoxError and is logged).
  void cleanup_recorded();

  /// Unmounts everything this instance mounted (shutdown).
  void release_all();

  /// True when an image can be created, mounted, filled to ENOSPC and unmounted here;
  /// `why` says what failed. Blocking.
  bool probe(const std::string& scratch_dir, std::string* why = nullptr);

 private:
  void release(const std::string& mount_point);
  box_error mount_image(const std::string& image, const std::string& mount_point);

  std::string images_dir_;
  bool mmp_ = false;
  std::string records_dir_;
  std::mutex mtx_;
  struct mounted {
    int leases = 0;
    std::string image; // deleted with the last lease when not empty (ephemeral)
  };
  /// mount point -> its mount.
  std::map<std::string, mounted> mounts_;
};

/// Every mount point of boxd's own mount namespace, in /proc/self/mountinfo's order.
std::vector<std::string> mount_points();

/// Mount points of boxd's own mount namespace at or below `prefix`, deepest first.
std::vector<std::string> mounts_under(const std::string& prefix);

/// Runs a host tool (mkfs.ext4, mount, umount, ...) and waits; "" on exit 0, else its
/// stderr (or how it failed). Blocking.
std::string run_tool(const std::vector<std::string>& argv);

/// run_tool that also reports the exit status (128 + signal when killed, 127 when it
/// could not start) and returns stdout and stderr's text whatever the status.
std::string run_tool_status(const std::vector<std::string>& argv, int& exit_status);

} // namespace boxrt
