// The `process` backend: runs each exec as a plain host process, WITHOUT any isolation.
// It exists for development on hosts without bwrap or nsjail and is used only when
// configured by name; it never reports an isolation key as ready.
#pragma once

#include <string>

#include "backends/backend.hpp"

namespace boxrt {

/// The host directory an exec of `spec` runs in: the sandbox workdir mapped through
/// the session's mounts (the longest mount_path that is the workdir or one of its
/// parents wins; the main mount is host_path, or "<session_dir>/workspace" without
/// one), else "<session_dir>/root" + workdir.
std::string process_host_workdir(const box_spec& spec, const std::string& session_dir);

class process_backend : public backend {
 public:
  /// `base_dir` holds one directory per session, named "<instance>_<session>_<8 hex>";
  /// an empty `instance_id` picks 12 random hex digits. Logs a warning: nothing is
  /// isolated.
  explicit process_backend(std::string base_dir, std::string instance_id = {});

  std::string name() const override { return "process"; }
  bool isolating() const override { return false; }
  /// Available when the base directory can be created; every isolation key is false.
  readiness_report probe_readiness(const std::string& workspace_path, bool strict) override;
  /// Checks the §10 denylist, creates a missing rw host_path and
  /// "<base>/<instance>_<session>_<8 hex>/{workspace,home,root}".
  result<std::shared_ptr<backend_session>> start_session(const box_spec& spec) override;
  /// Runs `/bin/sh -c "mkdir -p <wd> && cd <wd> && <cmd>"` with env PATH, HOME (the
  /// session's home directory) and spec.env, under spec.timeout_sec.
  result<exec_result> exec(backend_session& session, const box_spec& spec,
                           const exec_limits& limits) override;
  /// `command args...` as a host child in a session of its own (no shell), cwd mapped
  /// as exec maps its workdir, env PATH, HOME and spec.env. No isolation at all.
  result<std::shared_ptr<managed_process>> start_managed_process(backend_session& session,
                                                                 const process_spec& spec) override;
  /// On the host folder the session's mount_path maps to (no isolation, boxd's own uid).
  result<file_result> file_action(backend_session& session, const file_op& op, const files::limits& lim) override;
  /// Ends a running exec and every managed process, and removes the session directory.
  void stop_session(backend_session& session) override;
  /// Removes session directories of other instances from the base directory.
  void cleanup_orphans() override;

  const std::string& base_dir() const noexcept { return base_dir_; }
  const std::string& instance_id() const noexcept { return instance_id_; }

 private:
  std::string base_dir_;
  std::string instance_id_;
};

} // namespace boxrt
