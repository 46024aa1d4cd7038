// The per-node watchdog of a cluster node (docs/cluster.md "Failing closed"): a stopped
// process cannot fence itself, so boxd starts `boxrt-watchdog`, a small program that
// holds no listening socket and shares one page with boxd: the deadline until which
// boxd's lease is proven (CLOCK_BOOTTIME nanoseconds). When the deadline passes without
// a newer one, the watchdog kills every process in the node's cgroup subtrees and
// unmounts the quota images boxd's mount records name, before etcd can expire the lease,
// and again at every tick while it stays passed. When boxd itself is gone (killed) it
// fences once more and ends.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "messages/error.hpp"

namespace boxrt {

class helper_process;

static_assert(std::atomic<int64_t>::is_always_lock_free, "the page is shared between processes");

/// The shared page (boxrt-watchdog reads the same layout).
struct watchdog_page {
  std::atomic<int64_t> deadline_ns{0};  // 0 = no deadline: never fence
  std::atomic<int64_t> fenced_ns{0};    // when it last fenced (0 = never)
  std::atomic<int64_t> fences{0};
};

class watchdog {
 public:
  /// Starts `program` watching the processes of `cgroup_dirs` (recursively) and the mounts
  /// recorded in `records_dir`. It ends after boxd does, fencing once more. The page
  /// reaches it as descriptor 3, and nothing else of boxd's.
  static result<std::unique_ptr<watchdog>> start(const std::string& program, const std::vector<std::string>& cgroup_dirs,
                                                 const std::string& records_dir);
  ~watchdog();
  watchdog(const watchdog&) = delete;
  watchdog& operator=(const watchdog&) = delete;

  /// The new deadline (CLOCK_BOOTTIME nanoseconds); 0 = none: only before the node has
  /// ever served.
  void set_deadline(int64_t boot_ns) { page_->deadline_ns.store(boot_ns); }
  /// Fence now (a lease found lost early): a deadline long past.
  void fence_now() { page_->deadline_ns.store(1); }
  /// How many times it has fenced.
  int64_t fences() const { return page_->fences.load(); }
  pid_t pid() const;

  /// CLOCK_BOOTTIME now, in nanoseconds.
  static int64_t now_ns();

 private:
  watchdog() = default;
  watchdog_page* page_ = nullptr;
  std::unique_ptr<helper_process> process_;
};

} // namespace boxrt
