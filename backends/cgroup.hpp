// Per-sandbox resource limits through cgroup v1 (memory, pids, cpu), the mechanism that
// works on this host class (backends-and-skills.md F3: cgroup v2 offers no controllers
// here). Every group lives under `<controller>/<base>/`, where `<base>` names one boxd's
// state directory, so a boxd only ever touches its own groups.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "messages/error.hpp"

namespace boxrt {

struct cgroup_limits {
  int64_t memory_bytes = 0; // 0 = no memory limit
  int64_t pids = 0;         // 0 = no pids limit
  double cpus = 0;          // 0 = no cpu quota
};

class cgroup_v1 {
 public:
  /// Groups are created under `<root>/<controller>/<base>`.
  cgroup_v1(std::string root, std::string base);

  /// True when memory, pids and cpu hierarchies exist and a test group can be created
  /// and limited in each (so limits would really hold). `why` says what failed.
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

    /// SIGKILLs every process in the group until it is empty (bounded). Blocking.
    void kill_all() const;

    /// One round of SIGKILL to every process now in the group; never waits.
    void signal_all() const;

    /// kill_all, then removes the group directories. Idempotent.
    void destroy();

    std::string name() const { return name_; }

   private:
    friend class cgroup_v1;
    group() = default;
    std::vector<std::string> dirs_; // memory, pids, cpu (as created)
    std::vector<int> join_fds_;
    std::string memory_dir_;
    std::string pids_dir_;
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

 private:
  std::string controller_dir(const char* controller) const;

  std::string root_;
  std::string base_;
};

} // namespace boxrt
