// Backend selection: bwrap by default ("", auto, local), nsjail or the unsandboxed
// process backend only by name, the scripted backend for tests. A backend that cannot
// run here is reported under its own name with the reason, never replaced by another.
#include "backends/registry.hpp"

#include <string_view>

#include "backends/sandbox/sandbox.hpp"
#include "backends/mount_policy.hpp"
#include "backends/nsjail/nsjail.hpp"
#include "backends/process/process_backend.hpp"
#include "backends/testing/scripted.hpp"
#include "messages/base/pytext.hpp"

namespace boxrt {

sandbox_options sandbox_options_for(const box_config& config, const host_options& host) {
  auto local = resolve_local(config.local);
  sandbox_options o;
  o.state_dir = state_dir_of(local);
  o.skills_tenants_dir = local.skills_root + "/tenants";
  o.skills_quota_mb = local.skills_quota_mb;
  if (!local.default_workspace.empty())
    o.workspace_roots.push_back(local.default_workspace + "/tenants");
  o.uid_first = host.uid_first;
  o.uid_last = host.uid_last;
  o.host_gid = host.host_gid;
  o.listen_host = host.listen_host;
  o.network = config.network;
  if (!host.helper_dir.empty())
    o.init_path = host.helper_dir + "/boxrt-init";
  o.io.read_bps = config.limits.io_read_bps;
  o.io.write_bps = config.limits.io_write_bps;
  o.io.read_iops = config.limits.io_read_iops;
  o.io.write_iops = config.limits.io_write_iops;
  o.warm_pool = static_cast<int>(config.limits.warm_pool);
  if (!host.cluster_node.empty()) {
    o.cgroup_tag = host.cluster_node;
    o.images_dir = cluster_images_dir_of(local);
    o.multi_mount_protection = true;
    o.reserve_uid = host.reserve_uid;
    o.release_uid = host.release_uid;
    o.warm_pool = 0;
  }
  return o;
}

backend_choice select_backend(const box_config& config, const host_options& host) {
  auto requested = py::strip(config.backend);
  if (requested == "scripted")
    return {std::make_shared<scripted_backend>(config.scripted), "scripted", ""};
  auto local = resolve_local(config.local);
  auto state = state_dir_of(local);
  // nsjail: the same warm sandbox backend as bwrap, with nsjail as its driver.
  auto nsjail = [&]() -> backend_choice {
    auto o = sandbox_options_for(config, host);
    o.driver = sandbox_driver::nsjail;
    o.nsjail_path = locate_nsjail(local.nsjail_path, host.helper_dir.empty() ? own_exe_dir() : host.helper_dir);
    auto b = std::make_shared<sandbox_backend>(o);
    if (auto why = b->unavailable_reason(); !why.empty())
      return {nullptr, "nsjail", "nsjail backend unavailable: " + why};
    return {b, "nsjail", ""};
  };
  bool automatic = requested.empty() || requested == "auto" || requested == "local";
  if (automatic || requested == "bwrap") {
    auto b = std::make_shared<sandbox_backend>(sandbox_options_for(config, host));
    auto why = b->unavailable_reason();
    // `auto` takes bwrap only when a probe sandbox really runs; then nsjail if it is
    // there. Never the unisolated process backend.
    if (why.empty() && automatic)
      why = b->self_test();
    if (why.empty())
      return {b, "bwrap", ""};
    backend_choice none{nullptr, "bwrap", "bwrap backend unavailable: " + why};
    if (automatic)
      if (auto n = nsjail(); n.backend)
        return n;
    return none;
  }
  if (requested == "nsjail")
    return nsjail();
  if (requested == "process")
    return {std::make_shared<process_backend>(state + "/process"), "process", ""};
  std::string name{requested};
  return {nullptr, name,
          "LangBot Box backend \"" + name
            + "\" not found (known backends: auto, bwrap, nsjail, process, scripted)"};
}

std::string backend_unavailable_message() {
  return "LangBot Box backend unavailable. Install and start Docker or nsjail before using "
         "exec.";
}

} // namespace boxrt
