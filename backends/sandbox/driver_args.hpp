// What the drivers' argument builders need to know of a sandbox, and nothing else of the
// sandbox backend's internals: where things appear inside every sandbox, the host paths
// every sandbox shows, the bounded tmpfs mounts, the launcher's descriptor numbers, and
// the two argument lists (backends/bwrap/args.cpp, backends/nsjail/args.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/sandbox/sandbox.hpp"
#include "messages/models.hpp"

namespace boxrt::sandbox_detail {

/// Commands see this PATH (the reference's nsjail value).
inline constexpr const char* sandbox_path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Where boxrt-init appears inside every sandbox.
inline constexpr const char* init_in_sandbox = "/.boxrt/init";

/// Where the session's io folder (managed-process FIFOs, exit files, the control FIFOs
/// of boxrt-init) appears inside every sandbox.
inline constexpr const char* io_in_sandbox = "/.boxrt/io";

/// One host system path every sandbox shows read-only: a folder bound as it is, or
/// (merged /usr) a symlink recreated with the host's target.
struct system_path {
  std::string path;
  std::string link; // the symlink's target; "" = bind the folder or file
};

/// /usr, /bin, /sbin, /lib*, then the few /etc entries commands need, as this host has
/// them (missing ones left out).
std::vector<system_path> system_paths();

/// Files of the host's /proc that reveal the host and that no command needs: each is
/// covered with /dev/null inside every sandbox (missing ones left out). Host-wide figures
/// that stay visible by design are listed in docs/sandbox.md's threat model.
std::vector<std::string> hidden_proc_files();

/// The argument lists of the two drivers (backends/bwrap/args.cpp, backends/nsjail/args.cpp).
/// `stage_root`: where the launcher stages the host sources (<stage>/<n>); `session_root`:
/// where it attached the session's own file system (its skills, artifacts and io folders),
/// which also holds the staging folder.
struct args_input {
  const box_spec& spec;
  const sandbox_options& opts;
  const std::string& stage_root;
  const std::string& session_root;
  int seccomp_fd;
  bool network;
  bool skills_view;
  /// Always true today: every sandbox has the artifacts view at artifact_mount_root.
  bool artifacts_view;
  /// The sandbox uid (nsjail maps it onto itself; bwrap's launcher already runs as it).
  uint32_t uid;
  /// boxrt-init in the template namespace: bwrap binds this one copy (read-only) into
  /// every sandbox, so its pages are shared by all of them.
  const std::string& init_file;
};
std::vector<std::string> bwrap_args(const args_input& in);
std::vector<std::string> nsjail_args(const args_input& in);

/// Descriptors of the launcher when it becomes the driver (0-2 are init's stdio).
inline constexpr int child_seccomp_fd = 3;
inline constexpr int child_info_fd = 4;
inline constexpr int child_args_fd = 5;
inline constexpr int child_init_fd = 6;
inline constexpr int child_resolv_fd = 7;

/// The staging folder of the sources, on the session's file system (no file system of its
/// own: each instance costs the kernel a shrinker slot in every memory cgroup).
inline constexpr const char* staged_sources = "stage";

/// Where the nsjail launcher builds the sandbox's /dev (device binds, a read-only tmpfs)
/// and its resolver file, inside the staging folder.
inline constexpr const char* staged_dev = "dev";
inline constexpr const char* staged_resolv = "resolv.conf";

/// The device nodes every sandbox's /dev holds (bwrap's --dev set, without a tty).
inline constexpr const char* sandbox_devices[] = {"null", "zero", "full", "random", "urandom"};

/// One bounded scratch folder of a sandbox: a folder of the one tmpfs the launcher
/// mounts for all of them (bwrap 0.8 can size a tmpfs but not cap its inodes, nor size
/// /dev), bound in at `target`. The tmpfs's size and inodes are the sum of its folders'.
struct ephemeral_mount {
  const char* target;
  const char* folder;
  int64_t bytes;
  int64_t inodes;
  bool shared;  // 1777 (/tmp, /dev/shm); else owned by the sandbox uid, 0755 (/home)
};

/// Inodes per MiB of a bounded tmpfs: each costs kernel memory the size does not count.
inline constexpr int64_t inodes_per_mb = 256;

/// /tmp, /home and /dev/shm with their configured sizes, scaled down together so that
/// they hold at most half of `memory_mb` (at least 1 MiB each). One tmpfs holds all
/// three: its size is their sum, which the three share.
std::vector<ephemeral_mount> ephemeral_mounts(const sandbox_options& o, int64_t memory_mb);

/// The one scratch tmpfs's size and inode cap: the sum of its folders' (a few inodes more
/// for the folders themselves).
struct scratch_bounds {
  int64_t bytes = 0;
  int64_t inodes = 0;
};
scratch_bounds scratch_space(const sandbox_options& o, int64_t memory_mb);

} // namespace boxrt::sandbox_detail
