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
  /// `images_dir` holds the images, `records_dir` one record per live mount; `uid` and
  /// `gid` own the root directory of every new image.
  loop_quota(std::string images_dir, std::string records_dir, uint32_t uid, uint32_t gid);

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

  /// Mounts the image `name` (created with `size_mb` when missing) at `mount_point`,
  /// or shares the mount already there. An existing image keeps its size: growing or
  /// shrinking a quota needs an operator. Blocking (mkfs, mount): worker pool only.
  result<std::shared_ptr<lease>> acquire(const std::string& name, const std::string& mount_point,
                                         int64_t size_mb);

  /// Unmounts every mount recorded by an earlier run (crash leftovers).
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
  std::string records_dir_;
  uint32_t uid_;
  uint32_t gid_;
  std::mutex mtx_;
  /// mount point -> live leases.
  std::map<std::string, int> mounts_;
};

/// Mount points of boxd's own mount namespace at or below `prefix`, deepest first.
std::vector<std::string> mounts_under(const std::string& prefix);

/// Runs a host tool (mkfs.ext4, mount, umount, ...) and waits; "" on exit 0, else its
/// stderr (or how it failed). Blocking.
std::string run_tool(const std::vector<std::string>& argv);

} // namespace boxrt
