// nsjail's argument list for a warm sandbox: every namespace (nsjail's defaults), the
// workspace uid mapped onto itself, the read-only system folders, the /dev the launcher
// built, the staged host sources and bounded tmpfs mounts in the order of bwrap's list,
// and boxrt-init started from its sealed image, told where its seccomp program waits.
// nsjail's own limits are off: the launcher's rlimits and the session's cgroup apply.
#include "backends/init/init_protocol.hpp"
#include "backends/sandbox/driver_args.hpp"

namespace boxrt::sandbox_detail {

std::vector<std::string> nsjail_args(const args_input& in) {
  const auto& spec = in.spec;
  const auto& opts = in.opts;
  std::vector<std::string> a{opts.nsjail_path};
  auto add = [&](std::initializer_list<std::string> xs) { a.insert(a.end(), xs); };
  auto bind = [&](bool rw, const std::string& from, const std::string& to) {
    add({rw ? "--bindmount" : "--bindmount_ro", from + ":" + to});
  };
  auto id = std::to_string(in.uid);
  add({"--mode", "o", "--quiet", "--log_fd", "2", "--time_limit", "0", "--disable_rlimits"});
  // nsjail's default niceness is 19; bwrap's sandboxes run at boxd's own.
  // procfs mounted in this list's order (nsjail's own --proc_rw comes after every other
  // mount and would cover the files hidden below).
  add({"--hostname", "sandbox", "--cwd", "/", "--disable_proc", "--mount", "none:/proc:proc:rw",
       "--nice_level", "0"});
  add({"--user", id + ":" + id + ":1", "--group", id + ":" + id + ":1"});
  add({"--pass_fd", std::to_string(init_protocol::channel_fd), "--pass_fd",
       std::to_string(init_protocol::control_fd), "--pass_fd", std::to_string(init_protocol::seccomp_fd)});
  if (!spec.read_only_rootfs)
    add({"--rw"});
  for (auto& p : system_paths()) {
    if (p.link.empty())
      bind(false, p.path, p.path);
    else
      add({"--symlink", p.link + ":" + p.path});
  }
  if (in.network)
    bind(false, in.stage_root + "/" + staged_resolv, "/etc/resolv.conf");
  for (auto& f : hidden_proc_files())
    bind(false, "/dev/null", f);
  // The launcher's /dev: device binds on a read-only tmpfs (bwrap's --dev, then
  // --remount-ro); the bounded /dev/shm comes below, from the sources.
  bind(false, in.stage_root + "/" + staged_dev, "/dev");
  int n = 0;
  auto staged = [&] { return in.stage_root + "/" + std::to_string(n++); };
  bind(!(spec.host_path_mode == mount_mode::ro && !spec.host_path.empty()), staged(), spec.mount_path);
  for (auto& m : spec.extra_mounts) {
    if (m.mode == mount_mode::none || is_exec_scoped_mount(spec, m))
      continue;
    bind(m.mode != mount_mode::ro, staged(), m.mount_path);
  }
  // The session's own file system: the views' folders and the io folder.
  const auto& session = in.session_root;
  if (in.skills_view)
    bind(true, session + "/skills", spec.mount_path + "/.skills");
  if (in.artifacts_view)
    bind(true, session + "/artifacts", std::string{artifact_mount_root});
  bind(true, session + "/io", io_in_sandbox);
  auto scratch = staged();
  for (auto& m : ephemeral_mounts(opts, spec.memory_mb))
    bind(true, scratch + "/" + m.folder, m.target);
  add({"--env", std::string{"PATH="} + sandbox_path});
  // init from its sealed copy (opened by nsjail before it enters the namespaces), so no
  // host path of boxd's shows inside; argv[0] is where bwrap places it.
  add({"--execute_fd", "--exec_file", "/proc/self/fd/" + std::to_string(child_init_fd)});
  add({"--", init_in_sandbox, init_protocol::seccomp_flag});
  return a;
}

} // namespace boxrt::sandbox_detail
