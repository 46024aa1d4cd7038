// Per-sandbox resource limits through cgroups: v2 where the unified hierarchy delegates
// memory, pids and cpu, else v1 (the mechanism that works on this host class,
// backends-and-skills.md F3: v2 offers no controllers here). Every group lives under
// `<base>/`, which names one boxd's state directory, so a boxd only touches its own
// groups: `<root>/<controller>/<base>/<name>` on v1, `<root>/<base>/<name>` on v2.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/readiness_keys.hpp"
#include "messages/error.hpp"

namespace boxrt {

/// Disk I/O caps on one block device (0 = none).
struct io_caps {
  int64_t read_bps = 0;
  int64_t write_bps = 0;
  int64_t read_iops = 0;
  int64_t write_iops = 0;
  bool any() const { return read_bps > 0 || write_bps > 0 || read_iops > 0 || write_iops > 0; }
};

struct cgroup_limits {
  int64_t memory_bytes = 0; // 0 = no memory limit
  int64_t pids = 0;         // 0 = no pids limit
  double cpus = 0;          // 0 = no cpu quota
  /// The group also gets the io (v2) or blkio (v1) controller, for limit_io().
  bool io = false;
};

class cgroup_tree {
 public:
  enum class version { v1, v2 };

  /// Groups are created under `<root>/<controller>/<base>` (v1) or `<root>/<base>` (v2).
  cgroup_tree(std::string root, std::string base, version v = version::v1);

  /// v2 when `<root>/cgroup.controllers` offers memory, pids and cpu; else v1.
  static version detect(const std::string& root);

  version kind() const { return version_; }

  /// "cgroup_v2" or "cgroup_v1": what enforces the limits (readiness reports it).
  const char* mechanism() const { return version_ == version::v2 ? readiness::cgroup_v2 : "cgroup_v1"; }

  /// True when the hierarchy exists and a test group can be created and limited (so
  /// limits would really hold). `why` says what failed.
  bool usable(std::string* why = nullptr) const;

  /// One session's group in each controller.
  class group {
   public:
    ~group();
    group(const group&) = delete;
    group& operator=(const group&) = delete;

    /// Open `cgroup.procs` descriptors (O_CLOEXEC): a forked child writes "0" to each
    /// to join before it execs (async-signal-safe).
    const std::vector<int>& join_fds() const { return join_fds_; }
    /// Closes the join descriptors once the child has started.
    void close_join_fds();

    /// The kernel's count of out-of-memory kills in this group.
    int64_t oom_kills() const;

    /// CPU time used by the group's processes so far, in microseconds (cpu.stat on v2,
    /// cpuacct.usage on v1); -1 when the hierarchy has no CPU accounting.
    int64_t cpu_usec() const;

    /// Memory charged to the group now (memory.current, memory.usage_in_bytes); -1 when
    /// unreadable.
    int64_t memory_bytes() const;

    /// Caps the group's I/O on the block device `major`:`minor` (io.max on v2, the
    /// blkio.throttle files on v1, which throttle direct and synchronous I/O but not
    /// buffered writeback). Needs cgroup_limits::io.
    box_error limit_io(unsigned major, unsigned minor, const io_caps& caps) const;

    /// The group's I/O caps as the kernel reports them, one "MAJ:MIN key=value ..." line
    /// per device ("" when none).
    std::string io_limits() const;

    /// SIGKILLs every process in the group until it is empty (bounded). Blocking.
    void kill_all() const;

    /// One round of SIGKILL to every process now in the group; never waits.
    void signal_all() const;

    /// Processes in the group now, and its pids limit as the kernel reports it ("" when
    /// unreadable): what readiness checks to show the limits really apply.
    size_t process_count() const;
    std::string pids_max() const;

    /// kill_all, then removes the group directories. Idempotent.
    void destroy();

    std::string name() const { return name_; }

   private:
    friend class cgroup_tree;
    group() = default;
    std::vector<std::string> dirs_; // memory, pids, cpu (v1) or the one group (v2)
    std::vector<int> join_fds_;
    std::string memory_dir_;
    std::string pids_dir_;
    std::string io_dir_;
    /// Where CPU time is counted: the group itself on v2; on v1 the cpuacct group
    /// (a hierarchy of its own, or shared with cpu); "" when there is none.
    std::string cpuacct_dir_;
    bool v2_ = false;
    std::string name_;
    bool destroyed_ = false;
  };

  /// Creates `<base>/<name>` in every controller and applies `limits`.
  result<std::unique_ptr<group>> create(const std::string& name, const cgroup_limits& limits) const;

  /// Removes every group under `<base>` (their processes killed first): what a crashed
  /// earlier run of the same boxd left behind.
  void remove_all() const;

  /// Removes the `<base>` folders when no group is left in them (boxd shutdown).
  void remove_base() const;

  /// `<base>` in every hierarchy (they may not exist yet): what the watchdog empties.
  std::vector<std::string> base_dirs() const;

 private:
  std::string controller_dir(const char* controller) const;

  std::string root_;
  std::string base_;
  version version_;
};

} // namespace boxrt
