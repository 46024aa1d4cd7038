// The one renderer of health, readiness, backend info and status replies.
#include "net/rpc/render.hpp"

#include "actors/admission.hpp"
#include "messages/base/version.hpp"

namespace boxrt::net {

void name_or_null(json::writer& w, const std::string& name) {
  if (name.empty())
    w.null();
  else
    w.value(name);
}

bool instance_ready(const instance_settings& s) {
  return s.probed && s.ready;
}

void write_readiness(json::writer& w, const instance_settings& s) {
  const bool admission = s.config.admission_mode();
  w.begin_object();
  w.key("ready").value(instance_ready(s));
  w.key("mode").value(admission ? "grant_enforced" : "standard");
  w.key("backend").begin_object();
  w.key("name");
  name_or_null(w, s.backend_name);
  if (admission) {
    auto it = s.checks.find("backend_available");
    w.key("available").value(s.probed && it != s.checks.end() && it->second);
    w.key("details").begin_object();
    for (const auto& [key, value] : s.backend_report.details)
      w.key(key).value(value);
    for (const auto& [key, value] : s.backend_report.text_details)
      w.key(key).value(value);
    w.key("limits_mechanism");
    name_or_null(w, s.backend_report.limits_mechanism);
    w.end_object();
  } else {
    w.key("available").value(s.probed && s.backend_available);
  }
  w.end_object();
  w.key("checks").begin_object();
  for (const auto& [key, value] : s.checks)
    w.key(key).value(s.probed && value);
  w.end_object();
  if (admission)
    w.key("unsafe_soft_storage_limits").value(s.unsafe_soft_storage);
  if (!s.readiness_error.empty())
    w.key("error").value(s.readiness_error);
  w.end_object();
}

std::string backend_info_json(const instance_settings& s) {
  json::writer w;
  w.begin_object();
  w.key("name");
  name_or_null(w, s.backend_name);
  w.key("available").value(s.probed && s.backend_available);
  w.end_object();
  return w.take();
}

std::string status_json(const status_info& x) {
  json::writer w;
  w.begin_object();
  w.key("backend").begin_object();
  w.key("name");
  name_or_null(w, x.backend_name);
  w.key("available").value(x.backend_available);
  w.end_object();
  w.key("active_sessions").value(x.active_sessions);
  w.key("managed_processes").value(x.managed_processes);
  w.key("session_ttl_sec").value(x.session_ttl_sec);
  w.key("limits").begin_object();
  w.key("max_sessions").value(x.limits.max_sessions);
  w.key("max_managed_processes").value(x.limits.max_managed_processes);
  w.key("max_completed_processes").value(x.limits.max_completed_processes);
  w.key("max_admission_records").value(x.limits.max_admission_records);
  w.key("max_rpc_file_bytes").value(x.limits.max_rpc_file_bytes);
  w.end_object();
  w.key("capacity").begin_object();
  w.key("limit").value(x.capacity_limit);
  w.key("used").value(x.capacity_used);
  w.key("remaining").value(x.capacity_remaining);
  w.end_object();
  // boxrt's addition: what each session of this placement uses (null = unknown).
  auto number_or_null = [&w](int64_t v) {
    if (v < 0)
      w.null();
    else
      w.value(v);
  };
  w.key("session_stats").begin_array();
  for (const auto& s : x.sessions) {
    w.begin_object();
    w.key("session_id").value(s.session_id);
    w.key("backend");
    if (s.backend_name.empty())
      w.null();
    else
      w.value(s.backend_name);
    w.key("cpu_seconds");
    if (s.cpu_usec < 0)
      w.null();
    else
      w.value(static_cast<double>(s.cpu_usec) / 1e6);
    w.key("memory_bytes");
    number_or_null(s.memory_bytes);
    w.key("workspace_bytes");
    number_or_null(s.workspace_bytes);
    w.end_object();
  }
  w.end_array();
  w.end_object();
  return w.take();
}

std::string storage_json(const storage_report& x) {
  json::writer w;
  w.begin_object();
  int64_t total = 0;
  for (const auto& d : x.directories)
    if (d.kind == "root" && __builtin_add_overflow(total, d.size_bytes, &total))
      total = INT64_MAX;
  w.key("size_bytes").value(total);
  w.key("directories").begin_array();
  for (const auto& d : x.directories) {
    w.begin_object();
    w.key("key").value(d.key);
    w.key("path").value(d.path);
    w.key("kind").value(d.kind);
    w.key("exists").value(d.exists);
    w.key("size_bytes").value(d.size_bytes);
    w.key("file_count").value(d.file_count);
    w.key("error_count").value(d.error_count);
    if (!d.parent_key.empty())
      w.key("parent_key").value(d.parent_key);
    w.key("scope").value(d.scope);
    w.end_object();
  }
  w.end_array();
  w.key("active_sessions").value(x.active_sessions);
  w.key("managed_processes").value(x.managed_processes);
  w.end_object();
  return w.take();
}

probe_body render_probe(bool live, const std::optional<health_info>& info, uint64_t connections,
                        const std::string& node_id) {
  json::writer w;
  probe_body out;
  w.begin_object();
  if (live) {
    // Liveness means the actor core answers; no host paths or error texts here.
    w.key("live").value(info.has_value());
    w.key("version").value(version_line());
    // This node's cluster id (docs/cluster.md); null for a boxd without a cluster.
    if (node_id.empty())
      w.key("node_id").null();
    else
      w.key("node_id").value(node_id);
    out.ok = info.has_value();
  } else {
    // Nothing is ready before the directory's first probe has finished.
    const auto& st = info ? info->settings : instance_settings{};
    bool ready = instance_ready(st);
    bool admission = st.admission_mode || st.config.admission_mode();
    w.key("ready").value(ready);
    w.key("mode").value(admission ? "grant_enforced" : "standard");
    w.key("backend").begin_object();
    w.key("name").value(st.backend_name);
    w.key("available").value(st.probed && st.backend_available);
    w.end_object();
    w.key("checks").begin_object();
    if (st.checks.empty())
      w.key("backend_available").value(st.probed && st.backend_available);
    for (const auto& [name, ok] : st.checks)
      w.key(name).value(st.probed && ok);
    w.end_object();
    // A refused config value, named with the validator's text (other reasons may hold
    // host paths; they are in the log and the readiness error).
    if (auto why = configuration_error(st.config); !ready && !why.empty())
      w.key("error").value(why);
    out.ok = ready;
  }
  w.key("resources").begin_object();
  w.key("sessions").value(info ? info->sessions : int64_t{0});
  w.key("connections").value(connections);
  w.end_object();
  w.end_object();
  out.json = w.take();
  return out;
}

} // namespace boxrt::net
