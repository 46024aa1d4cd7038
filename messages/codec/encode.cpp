// Encoders of the reply shapes, and the canonical JSON of an entitlement snapshot.
#include "messages/codec/reader.hpp"

namespace boxrt {

using namespace codec_detail;

namespace {

// -- encoding helpers ----------------------------------------------------------------

void string_or_null(json::writer& w, const std::string& s) {
  if (s.empty())
    w.null();
  else
    w.value(s);
}

/// `key` and a map as an object, in the map's (bytewise sorted) order.
template <class Map>
void map_object(json::writer& w, std::string_view key, const Map& map) {
  w.key(key).begin_object();
  for (const auto& [k, v] : map)
    w.key(k).value(v);
  w.end_object();
}

/// host_path (string or null), host_path_mode, mount_path: a session's or a spec's
/// workspace mount, in the reference's key order.
template <class T>
void host_mount_fields(json::writer& w, const T& x) {
  w.key("host_path");
  string_or_null(w, x.host_path);
  w.key("host_path_mode").value(to_string(x.host_path_mode));
  w.key("mount_path").value(x.mount_path);
}

/// persistent to workspace_quota_mb: a session's or a spec's shape, in the reference's
/// key order.
template <class T>
void shape_fields(json::writer& w, const T& x) {
  w.key("persistent").value(x.persistent);
  w.key("cpus").value(x.cpus);
  w.key("memory_mb").value(x.memory_mb);
  w.key("pids_limit").value(x.pids_limit);
  w.key("read_only_rootfs").value(x.read_only_rootfs);
  w.key("workspace_quota_mb").value(x.workspace_quota_mb);
}

void string_array(json::writer& w, std::string_view key, const std::vector<std::string>& xs) {
  w.key(key).begin_array();
  for (const auto& x : xs)
    w.value(x);
  w.end_array();
}

} // namespace

// -- encoders --------------------------------------------------------------------------

void encode(json::writer& w, const session_info& x) {
  w.begin_object();
  w.key("session_id").value(x.session_id);
  w.key("backend_name").value(x.backend_name);
  w.key("backend_session_id").value(x.backend_session_id);
  w.key("image").value(x.image);
  w.key("network").value(to_string(x.network));
  host_mount_fields(w, x);
  shape_fields(w, x);
  w.key("created_at").value(iso_utc_z(x.created_at));
  w.key("last_used_at").value(iso_utc_z(x.last_used_at));
  if (!x.managed_processes.empty()) {
    w.key("managed_processes").begin_object();
    for (const auto& p : x.managed_processes) {
      w.key(p.process_id);
      encode(w, p);
    }
    w.end_object();
    for (const auto& p : x.managed_processes)
      if (p.process_id == "default") {
        w.key("managed_process");
        encode(w, p);
      }
  }
  w.end_object();
}

void encode(json::writer& w, const exec_result& x) {
  w.begin_object();
  w.key("session_id").value(x.session_id);
  w.key("backend_name").value(x.backend_name);
  w.key("status").value(to_string(x.status));
  w.key("exit_code");
  if (x.status == exec_status::timed_out)
    w.null();
  else
    w.value(x.exit_code);
  w.key("stdout").value(x.stdout_text);
  w.key("stderr").value(x.stderr_text);
  w.key("duration_ms").value(x.duration_ms);
  w.end_object();
}

void encode(json::writer& w, const process_info& x) {
  const bool exited = x.status == process_status::exited;
  std::vector<std::string> env_keys = x.env_keys;
  std::sort(env_keys.begin(), env_keys.end());
  w.begin_object();
  w.key("session_id").value(x.session_id);
  w.key("process_id").value(x.process_id);
  w.key("status").value(to_string(x.status));
  w.key("command").value(x.command);
  string_array(w, "args", x.args);
  w.key("cwd").value(x.cwd);
  string_array(w, "env_keys", env_keys);
  w.key("attached").value(x.attached);
  w.key("started_at").value(iso_utc_z(x.started_at));
  w.key("exited_at");
  if (exited)
    w.value(iso_utc_z(x.exited_at));
  else
    w.null();
  w.key("exit_code");
  if (exited)
    w.value(x.exit_code);
  else
    w.null();
  w.key("stderr_preview").value(x.stderr_preview);
  w.end_object();
}

void encode(json::writer& w, const grant_receipt& x) {
  w.begin_object();
  w.key("installed").value(true);
  w.key("workspace_uuid").value(x.workspace_uuid);
  w.key("execution_generation").value(x.execution_generation);
  w.key("entitlement_revision").value(x.entitlement_revision);
  w.key("max_sessions").value(x.max_sessions);
  w.key("max_managed_processes").value(x.max_managed_processes);
  w.key("expires_at").value(iso_utc_offset(x.expires_at));
  w.end_object();
}

void encode(json::writer& w, const revocation_receipt& x) {
  w.begin_object();
  w.key("revoked").value(true);
  w.key("workspace_uuid").value(x.workspace_uuid);
  w.key("entitlement_revision").value(x.entitlement_revision);
  w.end_object();
}

void encode(json::writer& w, const entitlement_receipt& x) {
  w.begin_object();
  w.key("accepted").value(true);
  w.key("workspace_uuid").value(x.workspace_uuid);
  w.key("entitlement_revision").value(x.entitlement_revision);
  w.key("revoked_sessions").value(x.revoked_sessions);
  w.end_object();
}

void encode(json::writer& w, const box_spec& x) {
  w.begin_object();
  w.key("cmd").value(x.cmd);
  w.key("workdir").value(x.workdir);
  w.key("timeout_sec").value(x.timeout_sec);
  w.key("network").value(to_string(x.network));
  w.key("session_id").value(x.session_id);
  map_object(w, "env", x.env);
  w.key("image").value(x.image);
  host_mount_fields(w, x);
  w.key("extra_mounts").begin_array();
  for (const auto& m : x.extra_mounts) {
    w.begin_object();
    w.key("host_path").value(m.host_path);
    w.key("mount_path").value(m.mount_path);
    w.key("mode").value(to_string(m.mode));
    w.key("content_digest");
    string_or_null(w, m.content_digest);
    w.key("manifest_path");
    string_or_null(w, m.manifest_path);
    w.end_object();
  }
  w.end_array();
  w.key("skill_name");
  string_or_null(w, x.skill_name);
  shape_fields(w, x);
  w.end_object();
}

void encode(json::writer& w, const entitlement_snapshot& x) {
  w.begin_object();
  w.key("instance_uuid").value(x.instance_uuid);
  w.key("workspace_uuid").value(x.workspace_uuid);
  w.key("entitlement_revision").value(x.entitlement_revision);
  w.key("status").value(to_string(x.status));
  w.key("not_before").value(x.not_before);
  w.key("expires_at").value(x.expires_at);
  map_object(w, "features", x.features);
  map_object(w, "limits", x.limits);
  w.key("plan_name");
  string_or_null(w, x.plan_name);
  for (auto [key, value] : {std::pair{"subscription_started_at", x.subscription_started_at},
                            std::pair{"plan_revision", x.plan_revision},
                            std::pair{"monthly_bonus_credits", x.monthly_bonus_credits}}) {
    w.key(key);
    if (value < 0)
      w.null();
    else
      w.value(value);
  }
  w.end_object();
}

std::string canonical_json(const entitlement_snapshot& x) {
  // Keys in sorted order; std::map already sorts features and limits bytewise, which
  // is code-point order for UTF-8.
  json::writer w;
  w.begin_object();
  w.key("entitlement_revision").value(x.entitlement_revision);
  w.key("expires_at").value(x.expires_at);
  map_object(w, "features", x.features);
  w.key("instance_uuid").value(x.instance_uuid);
  map_object(w, "limits", x.limits);
  if (x.monthly_bonus_credits >= 0)
    w.key("monthly_bonus_credits").value(x.monthly_bonus_credits);
  w.key("not_before").value(x.not_before);
  if (!x.plan_name.empty())
    w.key("plan_name").value(x.plan_name);
  if (x.plan_revision >= 0)
    w.key("plan_revision").value(x.plan_revision);
  w.key("status").value(to_string(x.status));
  if (x.subscription_started_at >= 0)
    w.key("subscription_started_at").value(x.subscription_started_at);
  w.key("workspace_uuid").value(x.workspace_uuid);
  w.end_object();
  return w.take();
}

} // namespace boxrt
