// bwrap's argument list for a sandbox: its namespaces, the read-only system folders, the
// staged host sources and bounded tmpfs mounts, seccomp from a descriptor, boxrt-init.
#include "backends/sandbox/driver_args.hpp"

namespace boxrt::sandbox_detail {

std::vector<std::string> bwrap_args(const args_input& in) {
  const auto& spec = in.spec;
  const auto& opts = in.opts;
  std::vector<std::string> a{opts.bwrap_path};
  auto add = [&](std::initializer_list<std::string> xs) { a.insert(a.end(), xs); };
  // Every namespace, the network one too: `network: on` gets a stack of its own
  // attached to it (netstack), never the host's network.
  add({"--unshare-all", "--unshare-user", "--disable-userns"});
  // boxrt-init is the sandbox's pid 1 (its reaper, not dumpable), as under nsjail;
  // bwrap's own process stays outside the sandbox's pid namespace.
  add({"--die-with-parent", "--new-session", "--as-pid-1", "--cap-drop", "ALL", "--hostname", "sandbox"});
  add({"--info-fd", std::to_string(child_info_fd)});
  // Merged /usr: /bin and friends are symlinks on the host and stay symlinks here.
  for (auto& p : system_paths())
    add({p.link.empty() ? "--ro-bind" : "--symlink", p.link.empty() ? p.path : p.link, p.path});
  if (in.network)
    add({"--file", std::to_string(child_resolv_fd), "/etc/resolv.conf"});
  add({"--proc", "/proc", "--dev", "/dev"});
  for (auto& f : hidden_proc_files())
    add({"--ro-bind", "/dev/null", f});
  // Host sources arrive staged at <stage>/<n> (see launch), in this order.
  int n = 0;
  auto staged = [&] { return in.stage_root + "/" + std::to_string(n++); };
  add({spec.host_path_mode == mount_mode::ro && !spec.host_path.empty() ? "--ro-bind" : "--bind", staged(),
       spec.mount_path});
  for (auto& m : spec.extra_mounts) {
    if (m.mode == mount_mode::none || is_exec_scoped_mount(spec, m))
      continue;
    add({m.mode == mount_mode::ro ? "--ro-bind" : "--bind", staged(), m.mount_path});
  }
  // The session's own file system: the views' folders and the io folder.
  const auto& session = in.session_root;
  if (in.skills_view)
    add({"--bind", session + "/skills", spec.mount_path + "/.skills"});
  if (in.artifacts_view)
    add({"--bind", session + "/artifacts", std::string{artifact_mount_root}});
  add({"--bind", session + "/io", io_in_sandbox});
  // init: the one copy in the template namespace's own tmpfs (not a bind of the build
  // folder, whose path would show), shared by every sandbox.
  add({"--ro-bind", in.init_file, init_in_sandbox});
  // Bounded tmpfs mounts made by the launcher; /dev itself then turns read-only, so
  // the only writable place below it is the bounded /dev/shm.
  auto scratch = staged();
  for (auto& m : ephemeral_mounts(opts, spec.memory_mb))
    add({"--bind", scratch + "/" + m.folder, m.target});
  add({"--remount-ro", "/dev"});
  if (spec.read_only_rootfs)
    add({"--remount-ro", "/"});
  add({"--seccomp", std::to_string(in.seccomp_fd)});
  add({"--clearenv", "--setenv", "PATH", sandbox_path, "--chdir", "/", init_in_sandbox});
  return a;
}

} // namespace boxrt::sandbox_detail
