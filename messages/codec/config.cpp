// Decoders of the configuration: runtime limits and the whole box section.
#include "messages/codec/reader.hpp"

#include "messages/network_policy.hpp"

namespace boxrt {

using namespace codec_detail;

namespace {

/// One integer key of a settings block, with its range.
template <class Block>
struct int_key {
  std::string_view name;
  int64_t Block::*field;
  int64_t min;
  int64_t max;
};
using limit_def = int_key<runtime_limits>;

constexpr limit_def limit_defs[] = {
  {"max_sessions", &runtime_limits::max_sessions, 0, 5000},
  {"max_managed_processes", &runtime_limits::max_managed_processes, 0, 1024},
  {"max_completed_processes", &runtime_limits::max_completed_processes, 0, 10000},
  {"max_admission_records", &runtime_limits::max_admission_records, 1, 250000},
  {"max_rpc_file_bytes", &runtime_limits::max_rpc_file_bytes, 1, 104857600},
  {"completed_process_retention_sec", &runtime_limits::completed_process_retention_sec, 0, 86400},
  {"session_ttl_sec", &runtime_limits::session_ttl_sec, 0, 86400},
  {"max_output_bytes", &runtime_limits::max_output_bytes, 1024, 16777216},
  {"max_timeout_sec", &runtime_limits::max_timeout_sec, 1, 86400},
  {"max_sessions_per_workspace", &runtime_limits::max_sessions_per_workspace, 1, 5000},
  {"io_read_bps", &runtime_limits::io_read_bps, 0, int64_t{1} << 40},
  {"io_write_bps", &runtime_limits::io_write_bps, 0, int64_t{1} << 40},
  {"io_read_iops", &runtime_limits::io_read_iops, 0, int64_t{1} << 30},
  {"io_write_iops", &runtime_limits::io_write_iops, 0, int64_t{1} << 30},
  {"max_idle_workspaces", &runtime_limits::max_idle_workspaces, 0, 250000},
  {"warm_pool", &runtime_limits::warm_pool, 0, 16},
  {"action_margin_sec", &runtime_limits::action_margin_sec, 1, 86400},
};

constexpr std::string_view backend_names[] = {"",       "auto",    "local",   "bwrap",
                                              "nsjail", "process", "scripted"};

result<local_config> decode_local(const element& v, const local_config& base) {
  local_config local;
  // The rest of `local` is replaced as a whole, as the reference does; the nsjail
  // program is the operator's choice unless named again.
  local.nsjail_path = base.nsjail_path;
  if (v.is_null())
    return local;
  object o;
  if (v.get_object().get(o) != ok)
    return box_error{ec::value, "box.local must be an object"};
  reader r{o, ec::value, "box.local."};
  if (auto err = r.str("host_root", local.host_root))
    return *err;
  if (auto err = r.str("default_workspace", local.default_workspace))
    return *err;
  if (auto err = r.str("skills_root", local.skills_root))
    return *err;
  if (auto err = r.str("nsjail_path", local.nsjail_path))
    return *err;
  if (auto roots = r.get("allowed_mount_roots")) {
    std::vector<std::string> entries;
    std::string_view s;
    array arr;
    if (roots->get_string().get(s) == ok) {
      size_t start = 0;
      while (start <= s.size()) {
        size_t comma = s.find(',', start);
        if (comma == std::string_view::npos)
          comma = s.size();
        entries.emplace_back(s.substr(start, comma - start));
        start = comma + 1;
      }
    } else if (roots->get_array().get(arr) == ok) {
      if (auto err = r.string_items("allowed_mount_roots", arr, entries))
        return *err;
    } else {
      return r.fail("allowed_mount_roots", "must be a list or a comma-separated string");
    }
    for (auto& entry : entries) {
      auto trimmed = strip(entry);
      if (!trimmed.empty())
        local.allowed_mount_roots.emplace_back(trimmed);
    }
  }
  if (auto err = r.integer("skills_quota_mb", local.skills_quota_mb, bound::ge, 0))
    return *err;
  if (auto err = r.at_most("skills_quota_mb", local.skills_quota_mb, resource_bounds::quota_mb))
    return *err;
  return local;
}

result<scripted_config> decode_scripted(const element& v) {
  scripted_config scripted;
  if (v.is_null())
    return scripted;
  object o;
  if (v.get_object().get(o) != ok)
    return box_error{ec::value, "box.scripted must be an object"};
  reader r{o, ec::value, "box.scripted."};
  if (auto err = r.boolean("available", scripted.available))
    return *err;
  if (auto err = r.strings("ready_keys", scripted.ready_keys))
    return *err;
  return scripted;
}

using egress_limit_def = int_key<network_settings>;

constexpr egress_limit_def egress_limit_defs[] = {
  {"max_connections", &network_settings::max_connections, 1, 65536},
  {"max_connections_total", &network_settings::max_connections_total, 1, 1048576},
  {"max_lookups", &network_settings::max_lookups, 1, 4096},
  {"header_timeout_ms", &network_settings::header_timeout_ms, 100, 300000},
  {"connect_timeout_ms", &network_settings::connect_timeout_ms, 100, 300000},
  {"lookup_timeout_ms", &network_settings::lookup_timeout_ms, 100, 60000},
};

/// box.network_egress: the resolvers and the filter's limits.
maybe_error decode_network_egress(const element& v, network_settings& out) {
  object obj;
  if (v.get_object().get(obj) != ok)
    return box_error{ec::value, "box.network_egress must be an object"};
  for (auto field : obj) {
    const std::string name = "box.network_egress." + std::string{field.key};
    if (field.key == "resolvers") {
      array arr;
      if (field.value.get_array().get(arr) != ok || arr.size() > 8)
        return box_error{ec::value, name + " must be a list of at most 8 IP addresses"};
      out.resolvers.clear();
      for (auto item : arr) {
        std::string_view text;
        auto c = item.get_string().get(text) == ok ? cidr::parse(text) : std::nullopt;
        if (!c || c->prefix != (c->family == 4 ? 32 : 128) || std::string_view{text}.find('/') != std::string_view::npos)
          return box_error{ec::value, name + " must be a list of at most 8 IP addresses"};
        out.resolvers.emplace_back(text);
      }
      continue;
    }
    auto def = std::find_if(std::begin(egress_limit_defs), std::end(egress_limit_defs),
                            [&](const egress_limit_def& d) { return d.name == field.key; });
    if (def == std::end(egress_limit_defs))
      continue;  // reported by ignored_box_keys
    int64_t value = 0;
    if (read_int(field.value, value) != int_read::ok || value < def->min || value > def->max)
      return box_error{ec::value, name + " must be an integer between " + std::to_string(def->min) + " and "
                                    + std::to_string(def->max)};
    out.*(def->field) = value;
  }
  return std::nullopt;
}

/// Adds `path<key>` for each key of `o` not in `known`.
void unknown_keys(const object& o, std::string_view path, std::initializer_list<std::string_view> known,
                  std::vector<std::string>& out) {
  for (auto field : o)
    if (std::find(known.begin(), known.end(), field.key) == known.end())
      out.push_back(std::string{path} + std::string{field.key});
}

} // namespace

void encode(json::writer& w, const runtime_limits& x) {
  w.begin_object();
  for (const auto& d : limit_defs)
    w.key(d.name).value(x.*(d.field));
  w.end_object();
}

void encode(json::writer& w, const network_settings& x) {
  w.key("network_policy");
  x.default_policy.empty() ? w.null() : w.raw(x.default_policy);
  w.key("network_profiles").begin_object();
  for (const auto& [name, policy] : x.profiles)
    w.key(name).raw(policy);
  w.end_object();
  w.key("network_egress").begin_object();
  w.key("resolvers").begin_array();
  for (const auto& r : x.resolvers)
    w.value(r);
  w.end_array();
  for (const auto& d : egress_limit_defs)
    w.key(d.name).value(x.*(d.field));
  w.end_object();
}

std::vector<std::string> ignored_box_keys(const element& data) {
  std::vector<std::string> out;
  object obj;
  if (data.get_object().get(obj) != ok)
    return out;
  unknown_keys(obj, "box.",
               {"backend", "limits", "local", "admission", "scripted", "network_policy", "network_profiles",
                "network_egress"},
               out);
  object sub;
  if (auto v = lookup(obj, "limits"); v && v->get_object().get(sub) == ok)
    for (auto field : sub)
      if (std::none_of(std::begin(limit_defs), std::end(limit_defs),
                       [&](const limit_def& d) { return d.name == field.key; }))
        out.push_back("box.limits." + std::string{field.key});
  if (auto v = lookup(obj, "local"); v && v->get_object().get(sub) == ok)
    unknown_keys(sub, "box.local.",
                 {"host_root", "default_workspace", "skills_root", "nsjail_path", "allowed_mount_roots",
                  "skills_quota_mb"},
                 out);
  if (auto v = lookup(obj, "scripted"); v && v->get_object().get(sub) == ok)
    unknown_keys(sub, "box.scripted.", {"available", "ready_keys"}, out);
  if (auto v = lookup(obj, "network_egress"); v && v->get_object().get(sub) == ok)
    for (auto field : sub)
      if (field.key != "resolvers"
          && std::none_of(std::begin(egress_limit_defs), std::end(egress_limit_defs),
                          [&](const egress_limit_def& d) { return d.name == field.key; }))
        out.push_back("box.network_egress." + std::string{field.key});
  return out;
}

bool known_backend(std::string_view name) {
  return std::find(std::begin(backend_names), std::end(backend_names), name) != std::end(backend_names);
}

box_error check_runtime_limits(const runtime_limits& limits) {
  for (const auto& d : limit_defs) {
    auto v = limits.*(d.field);
    if (v < d.min || v > d.max)
      return make_box_error(ec::validation, "box.limits." + std::string{d.name} + " must be between "
                                              + std::to_string(d.min) + " and " + std::to_string(d.max));
  }
  return {};
}

result<runtime_limits> decode_runtime_limits(const element& data, const runtime_limits& base) {
  object obj;
  if (data.get_object().get(obj) != ok)
    return box_error{ec::value, "box.limits must be an object"};
  // Validate everything into a copy so a failure leaves `base` untouched.
  runtime_limits out = base;
  for (const auto& def : limit_defs) {
    auto v = lookup(obj, def.name);
    if (!v)
      continue;
    const std::string name = "box.limits." + std::string{def.name};
    int64_t value = 0;
    switch (read_int(*v, value)) {
      case int_read::not_int: return box_error{ec::value, name + " must be an integer"};
      case int_read::overflow: value = INT64_MAX; break;
      case int_read::underflow: value = INT64_MIN; break;
      case int_read::ok: break;
    }
    if (value < def.min || value > def.max)
      return box_error{ec::value, name + " must be between " + std::to_string(def.min) + " and "
                                    + std::to_string(def.max)};
    out.*def.field = value;
  }
  return out;
}

result<box_config> decode_box_config(const element& data, const box_config& base) {
  object obj;
  if (data.get_object().get(obj) != ok)
    return box_error{ec::value, "box config must be an object"};
  box_config cfg = base;

  if (auto v = lookup(obj, "backend")) {
    std::string_view s;
    if (v->is_null())
      s = {};
    else if (v->get_string().get(s) != ok)
      return box_error{ec::value, "box.backend must be a string"};
    s = strip(s);
    if (!known_backend(s))
      return box_error{ec::value, "box.backend must be one of: \"\", auto, local, bwrap, nsjail, "
                                  "process, scripted"};
    cfg.backend = std::string{s};
  }

  if (auto v = lookup(obj, "limits"); v && !v->is_null()) {
    auto limits = decode_runtime_limits(*v, base.limits);
    if (!limits)
      return limits.error();
    cfg.limits = limits.value();
  }

  if (auto v = lookup(obj, "local")) {
    auto local = decode_local(*v, base.local);
    if (!local)
      return local.error();
    cfg.local = std::move(local.value());
  }

  if (auto v = lookup(obj, "admission")) {
    cfg.admission = admission_policy{};
    cfg.admission_error.clear();
    if (!v->is_null()) {
      auto policy = decode_admission_policy(*v);
      if (policy) {
        cfg.admission = policy.value();
      } else {
        // Fail closed: admission stays required and reports why it cannot be used.
        cfg.admission.required = true;
        cfg.admission_error = policy.error().message;
      }
    }
  }

  if (auto v = lookup(obj, "scripted")) {
    auto scripted = decode_scripted(*v);
    if (!scripted)
      return scripted.error();
    cfg.scripted = std::move(scripted.value());
  }

  // Egress (docs/network.md): a bad policy is an error naming its path, never ignored.
  if (auto v = lookup(obj, "network_policy")) {
    cfg.network.default_policy.clear();
    if (!v->is_null()) {
      auto p = decode_network_policy(*v, "box.network_policy", ec::value);
      if (!p)
        return p.error();
      cfg.network.default_policy = encode_network_policy(p.value());
    }
  }
  if (auto v = lookup(obj, "network_profiles"); v && !v->is_null()) {
    object profiles;
    if (v->get_object().get(profiles) != ok)
      return box_error{ec::value, "box.network_profiles must be an object of named network policies"};
    cfg.network.profiles.clear();
    for (auto field : profiles) {
      const std::string name{field.key};
      if (name.empty() || name.size() > 128)
        return box_error{ec::value, "box.network_profiles: a profile's name must have 1 to 128 characters"};
      auto p = decode_network_policy(field.value, "box.network_profiles." + name, ec::value);
      if (!p)
        return p.error();
      p->profile = name;
      cfg.network.profiles[name] = encode_network_policy(p.value());
    }
  }
  if (auto v = lookup(obj, "network_egress"); v && !v->is_null())
    if (auto err = decode_network_egress(*v, cfg.network))
      return *err;
  return cfg;
}

} // namespace boxrt
