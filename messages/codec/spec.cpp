// Decoders of the sandbox requests: box specs, the facts admission checks, process
// specs and the action context.
#include "messages/codec/reader.hpp"

namespace boxrt {

using namespace codec_detail;

result<box_spec> decode_box_spec(const element& data, bool require_cmd) {
  object obj;
  if (data.get_object().get(obj) != ok)
    return box_error{ec::validation, "spec must be an object"};
  reader r{obj, ec::validation};
  // The reference reads data["session_id"] before it validates anything.
  if (!r.has("session_id"))
    return box_error{ec::key, "'session_id'"};
  box_spec spec;

  if (auto err = r.stripped("cmd", spec.cmd))
    return *err;

  // workdir falls back to a non-blank mount_path when absent, null or "".
  auto raw_workdir = lookup(obj, "workdir");
  std::string_view workdir_text;
  const bool workdir_unset =
    !raw_workdir || raw_workdir->is_null()
    || (raw_workdir->get_string().get(workdir_text) == ok && workdir_text.empty());
  if (workdir_unset) {
    auto raw_mount = lookup(obj, "mount_path");
    std::string_view mount_text;
    if (raw_mount && raw_mount->get_string().get(mount_text) == ok && !strip(mount_text).empty())
      spec.workdir = std::string{mount_text};
    else if (raw_workdir && !raw_workdir->is_null())
      spec.workdir.clear();
  } else if (auto err = r.str("workdir", spec.workdir)) {
    return *err;
  }
  spec.workdir = std::string{strip(spec.workdir)};
  if (!spec.workdir.starts_with('/'))
    return r.fail("workdir must be an absolute path inside the sandbox");

  // Python's int has no top: a timeout beyond 64 bits is as long as the longest, and
  // the ceiling (box.limits.max_timeout_sec) clamps it like any other.
  if (auto v = r.get("timeout_sec"); v && read_int(*v, spec.timeout_sec) == int_read::overflow)
    spec.timeout_sec = INT64_MAX;
  else if (auto err = r.integer("timeout_sec", spec.timeout_sec, bound::gt, 0))
    return *err;

  if (auto err = r.enumeration("network", spec.network, network_values))
    return *err;

  if (auto err = r.req_id("session_id", spec.session_id))
    return *err;

  if (auto err = read_env(r, "env", spec.env))
    return *err;

  if (auto err = r.str("image", spec.image))
    return *err;

  if (auto err = r.str("host_path", spec.host_path))
    return *err;
  if (r.get("host_path")) {
    spec.host_path = std::string{strip(spec.host_path)};
    if (!is_absolute_host_path(spec.host_path))
      return r.fail("host_path must be an absolute host path");
  }

  if (auto err = r.enumeration("host_path_mode", spec.host_path_mode, mount_values))
    return *err;

  if (auto err = r.stripped("mount_path", spec.mount_path))
    return *err;
  if (!spec.mount_path.starts_with('/'))
    return r.fail("mount_path must be an absolute path inside the sandbox");

  if (auto mounts = r.get("extra_mounts")) {
    array arr;
    if (mounts->get_array().get(arr) != ok)
      return r.fail("extra_mounts must be a list");
    size_t i = 0;
    for (element item : arr) {
      mount_spec m;
      if (auto err = decode_mount(item, i, m))
        return *err;
      spec.extra_mounts.push_back(std::move(m));
      ++i;
    }
  }

  if (auto err = r.stripped("skill_name", spec.skill_name))
    return *err;
  if (!spec.skill_name.empty() && !valid_skill_name(spec.skill_name))
    return r.fail("skill_name can only contain up to 64 letters, numbers, hyphens and underscores");

  if (auto err = r.boolean("persistent", spec.persistent))
    return *err;

  if (auto err = r.number("cpus", spec.cpus, bound::gt, 0))
    return *err;
  if (auto err = r.at_most("cpus", spec.cpus, resource_bounds::cpus()))
    return *err;

  if (auto err = r.integer("memory_mb", spec.memory_mb, bound::at_least, 32))
    return *err;
  if (auto err = r.at_most("memory_mb", spec.memory_mb, resource_bounds::memory_mb))
    return *err;

  if (auto err = r.integer("pids_limit", spec.pids_limit, bound::at_least, 1))
    return *err;
  if (auto err = r.at_most("pids_limit", spec.pids_limit, resource_bounds::pids_limit))
    return *err;

  if (auto err = r.boolean("read_only_rootfs", spec.read_only_rootfs))
    return *err;

  if (auto err = r.integer("workspace_quota_mb", spec.workspace_quota_mb, bound::ge, 0))
    return *err;
  if (auto err = r.at_most("workspace_quota_mb", spec.workspace_quota_mb, resource_bounds::quota_mb))
    return *err;

  if (!spec.host_path.empty() && spec.host_path_mode != mount_mode::none
      && spec.workdir != spec.mount_path && !spec.workdir.starts_with(spec.mount_path + "/"))
    return r.fail("workdir must stay under mount_path when host_path is provided");

  if (require_cmd && spec.cmd.empty())
    return r.fail("cmd must not be empty");
  return spec;
}

payload_facts extract_payload_facts(const element& data) {
  payload_facts facts;
  object obj;
  if (data.get_object().get(obj) != ok)
    return facts;
  static constexpr std::string_view host_controlled[] = {
    "backend",     "entitlement",  "entitlement_revision", "managed_sandbox",
    "max_managed_processes", "max_sessions", "plan", "subscription"};
  for (auto key : host_controlled)
    if (lookup(obj, key))
      facts.host_controlled_keys.emplace_back(key);
  std::sort(facts.host_controlled_keys.begin(), facts.host_controlled_keys.end());

  if (auto v = lookup(obj, "session_id"); v && !v->is_null()) {
    facts.has_session_id = true;
    facts.session_id = raw_text(*v);
  }
  if (auto v = lookup(obj, "network"); v && !v->is_null()) {
    std::string_view s;
    const bool off = v->get_string().get(s) == ok && (s.empty() || s == "off");
    facts.network_not_off = !off;
  }
  if (auto v = lookup(obj, "mount_path"); v && !v->is_null())
    facts.mount_path = raw_text(*v);
  if (auto v = lookup(obj, "host_path"); v && !v->is_null())
    facts.host_path = raw_text(*v);
  if (auto v = lookup(obj, "timeout_sec"); v && !v->is_null()) {
    int64_t ignored = 0;
    facts.timeout_not_int = read_int(*v, ignored) == int_read::not_int;
  }
  return facts;
}

result<process_spec> decode_process_spec(const element& data) {
  object obj;
  if (data.get_object().get(obj) != ok)
    return box_error{ec::validation, "spec must be an object"};
  reader r{obj, ec::validation};
  process_spec spec;

  if (auto err = r.stripped("process_id", spec.process_id))
    return *err;
  if (!valid_process_id(spec.process_id))
    return r.fail(
      "process_id can only contain up to 128 letters, numbers, dots, hyphens and underscores");

  if (auto err = r.req_id("command", spec.command))
    return *err;

  if (auto err = r.strings("args", spec.args))
    return *err;

  if (auto err = read_env(r, "env", spec.env))
    return *err;

  if (auto err = r.stripped("cwd", spec.cwd))
    return *err;
  if (!spec.cwd.starts_with('/'))
    return r.fail("cwd must be an absolute path inside the sandbox");

  if (auto err = r.integer("memory_mb", spec.memory_mb, bound::ge, 0))
    return *err;
  if (auto err = r.at_most("memory_mb", spec.memory_mb, resource_bounds::memory_mb))
    return *err;
  return spec;
}

result<action_context> decode_action_context(const element& ctx) {
  object obj;
  if (ctx.get_object().get(obj) != ok || json::python::stand_in(ctx))
    return box_error{ec::envelope, "context must be an object"};
  reader r{obj, ec::envelope};
  action_context out;

  if (auto err = read_tenant_ids(r, out))
    return *err;

  // InstallationBinding names the generation execution_generation (an alias).
  const bool has_placement = r.get("placement_generation").has_value();
  const bool has_execution = r.get("execution_generation").has_value();
  if (auto err = r.integer("placement_generation", out.placement_generation, bound::ge, 1))
    return *err;
  if (has_execution) {
    int64_t execution = 0;
    if (auto err = r.integer("execution_generation", execution, bound::ge, 1))
      return *err;
    if (has_placement && execution != out.placement_generation)
      return r.fail("execution_generation must equal placement_generation");
    out.placement_generation = execution;
  }

  if (auto v = r.get("installation_uuid")) {
    std::string installation;
    if (auto err = r.as_str("installation_uuid", *v, installation))
      return *err;
    if (strip(installation).empty())
      return r.fail("installation_uuid must not be empty");
  }

  if (r.get("runtime_revision")) {
    int64_t revision = 0;
    if (auto err = r.integer("runtime_revision", revision, bound::ge, 1))
      return *err;
  }

  if (r.get("artifact_digest")) {
    std::string digest;
    if (auto err = r.str("artifact_digest", digest))
      return *err;
    const bool hex64 = digest.size() == 64
                       && std::all_of(digest.begin(), digest.end(), [](char c) {
                            return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                          });
    if (!hex64)
      return r.fail("artifact_digest must be 64 lower-case hex characters");
  }

  if (r.get("entitlement_revision")) {
    if (auto err = r.integer("entitlement_revision", out.entitlement_revision, bound::ge, 0))
      return *err;
  }

  if (auto err = r.forbid_extra({"instance_uuid", "workspace_uuid", "placement_generation",
                                 "installation_uuid", "runtime_revision", "artifact_digest",
                                 "execution_generation", "entitlement_revision"}))
    return *err;
  return out;
}

} // namespace boxrt
