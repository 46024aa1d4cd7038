#include "app/boxd_config.hpp"

#include <filesystem>
#include <fstream>
#include <tuple>
#include <sstream>

#include <simdjson.h>

#include "app/config_block.hpp"
#include "messages/base/pytext.hpp"
#include "messages/codec.hpp"
#include "messages/codec_text.hpp"
#include "messages/base/json.hpp"

namespace boxrt {

namespace {

using simdjson::dom::element;
using simdjson::dom::object;

box_error config_error(std::string text) {
  return box_error{ec::value, std::move(text)};
}

/// "HOST:PORT" or "[v6]:PORT"; port 0 picks a free one.
box_error parse_listen(std::string_view text, net::server_options& out) {
  std::string host;
  uint16_t port = 0;
  switch (config::parse_host_port(text, 0, host, port)) {
  case config::address_fault::none:
    break;
  case config::address_fault::shape:
    return config_error("listen address must be HOST:PORT, got \"" + std::string{text} + "\"");
  case config::address_fault::port_not_number:
    return config_error("listen port must be a number, got \"" + std::string{text.substr(text.rfind(':') + 1)} + "\"");
  case config::address_fault::port_range:
    return config_error("listen port must be between 0 and 65535");
  }
  out.host = std::move(host);
  out.port = port;
  return {};
}

} // namespace

std::string subid_overlap(uint32_t first, uint32_t last) {
  for (const char* file : {"/etc/subuid", "/etc/subgid"}) {
    std::ifstream in{file};
    for (std::string line; std::getline(in, line);) {
      auto a = line.find(':'), b = line.rfind(':');
      if (a == std::string::npos || a == b)
        continue;
      uint64_t start = 0, count = 0;
      try {
        start = std::stoull(line.substr(a + 1, b - a - 1));
        count = std::stoull(line.substr(b + 1));
      } catch (const std::exception&) {
        continue;
      }
      if (count == 0)
        continue;
      uint64_t end = start + count - 1;
      if (start <= last && end >= first)
        return std::string{file} + " (" + line.substr(0, a) + ": " + std::to_string(start) + "-" + std::to_string(end) + ")";
    }
  }
  return {};
}

namespace {

/// server.sandbox_uid_range: [first, last], non-root, clear of /etc/subuid and
/// /etc/subgid (uids there belong to users' own containers).
box_error read_uid_range(const config::block& server, net::server_options& out) {
  auto v = server.get("sandbox_uid_range");
  if (!v)
    return {};
  auto range = decode_uid_range(*v);
  if (!range)
    return config_error("server.sandbox_uid_range must be [FIRST, LAST] with 1 <= FIRST <= LAST <= 4294967294");
  std::tie(out.sandbox_uid_first, out.sandbox_uid_last) = *range;
  return {};
}

struct size_key {
  const char* key;
  size_t min, max;
  size_t net::server_options::*field;
};

/// The server block's bounded sizes (read and printed from this one table).
constexpr size_key size_keys[] = {
  {"max_connections", 1, 100000, &net::server_options::max_connections},
  {"max_inflight", 1, 4096, &net::server_options::max_inflight},
  {"max_message_bytes", 1024, 268435456, &net::server_options::max_message_bytes},
  {"max_outbound_bytes", 65536, size_t{1} << 40, &net::server_options::max_outbound_bytes},
  {"max_outbound_frames", 16, 10000000, &net::server_options::max_outbound_frames},
  {"outbound_stall_ms", 100, 3600000, &net::server_options::outbound_stall_ms},
  {"max_pending_handshakes", 1, 100000, &net::server_options::max_pending_handshakes},
  {"handshake_timeout_ms", 100, 600000, &net::server_options::handshake_timeout_ms},
  {"reserved_fds", 0, 1000000, &net::server_options::reserved_fds},
  {"io_threads", 1, 64, &net::server_options::io_threads},
  {"io_spin_us", 0, 10000, &net::server_options::io_spin_us},
  {"relay_attach_wait_ms", 0, 3600000, &net::server_options::relay_attach_wait_ms},
  {"stream_keepalive_ms", 100, 3600000, &net::server_options::stream_keepalive_ms},
  {"max_stream_output_bytes", 1, size_t{1} << 50, &net::server_options::max_stream_output_bytes},
  {"stream_stop_grace_ms", 0, 600000, &net::server_options::stream_stop_grace_ms},
  {"max_file_call_bytes", 1, size_t{64} << 20, &net::server_options::max_file_call_bytes},
  {"max_list_entries", 1, 10000000, &net::server_options::max_list_entries},
};

/// The `server` block: an unknown key is refused with its path (a typo never passes as
/// a default).
box_error apply_server(element section, net::server_options& out, bool& transfer_dir_set) {
  object obj;
  if (section.get_object().get(obj) != simdjson::SUCCESS)
    return config_error("server must be an object");
  config::block server{obj, "server.", ec::value};
  for (auto field : obj) {
    auto known = [&](std::string_view key) {
      for (const auto& k : size_keys)
        if (key == k.key)
          return true;
      for (std::string_view k : {"listen", "control_token", "trusted_instance_uuid", "transfer_dir",
                                 "sandbox_uid_range", "host_gid", "compression", "log_format", "testing",
                                 "audit_log", "audit_commands", "audit_max_bytes", "audit_files"})
        if (key == k)
          return true;
      return false;
    };
    if (!known(field.key))
      return config_error("unknown key server." + std::string{field.key}
                          + " (docs/configuration.md lists the server keys)");
  }
  std::string listen;
  if (auto err = server.string("listen", listen))
    return err;
  if (!listen.empty())
    if (auto err = parse_listen(listen, out))
      return err;
  for (auto [key, field] : {std::pair{"control_token", &out.control_token},
                            std::pair{"trusted_instance_uuid", &out.trusted_instance},
                            std::pair{"transfer_dir", &out.transfer_dir}})
    if (auto err = server.string(key, *field))
      return err;
  transfer_dir_set = transfer_dir_set || server.get("transfer_dir").has_value();
  for (const auto& k : size_keys)
    if (auto err = server.size(k.key, k.min, k.max, out.*(k.field)))
      return err;
  if (auto err = read_uid_range(server, out))
    return err;
  if (auto v = server.get("host_gid")) {
    int64_t gid = 0;
    if (v->is_bool() || v->get_int64().get(gid) != simdjson::SUCCESS || gid < 0 || gid > 4294967294LL)
      return config_error("server.host_gid must be an integer between 0 and 4294967294");
    out.host_gid = gid;
  }
  if (auto err = server.boolean("compression", out.compression))
    return err;
  if (auto err = server.string("audit_log", out.audit.path))
    return err;
  if (auto err = server.boolean("audit_commands", out.audit.commands))
    return err;
  size_t audit_bytes = out.audit.max_bytes, audit_files = out.audit.files;
  if (auto err = server.size("audit_max_bytes", 4096, size_t{1} << 40, audit_bytes))
    return err;
  if (auto err = server.size("audit_files", 1, 1000, audit_files))
    return err;
  out.audit.max_bytes = audit_bytes;
  out.audit.files = static_cast<uint32_t>(audit_files);
  if (auto v = server.get("log_format")) {
    std::string_view format;
    if (v->get_string().get(format) != simdjson::SUCCESS || (format != "text" && format != "json"))
      return config_error("server.log_format must be \"text\" or \"json\"");
    out.log_json = format == "json";
  }
  return server.boolean("testing", out.testing);
}

/// A `box` block's keys boxd does not use: each named once, as a warning.
void note_ignored(const element& box, std::string_view where, boxd_config& cfg) {
  for (auto& key : ignored_box_keys(box)) {
    cfg.warnings.push_back(std::string{where} + ": " + key + " is not a key boxd uses; ignored");
    cfg.ignored.push_back(std::move(key));
  }
}

bool truthy(std::string_view v) {
  std::string lower;
  for (char c : py::strip(v))
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return lower == "1" || lower == "true" || lower == "yes" || lower == "on";
}

} // namespace

boxd_config default_boxd_config() {
  boxd_config out;
  out.server.host = "127.0.0.1";
  out.server.port = 5410;
  out.server.transfer_dir = "data/temp/lbp";
  out.box.backend = "auto";
  out.box.local.host_root = default_host_root;
  return out;
}

result<boxd_config> load_boxd_config(const std::vector<std::string>& args,
                                     std::string (*env)(const char*)) {
  auto cfg = default_boxd_config();
  std::string config_file;
  std::string listen_override;
  bool transfer_dir_set = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    auto value = [&](const char* flag) -> result<std::string> {
      if (i + 1 >= args.size())
        return config_error(std::string{flag} + " needs a value");
      return args[++i];
    };
    // --flag VALUE or --flag=VALUE
    auto flag = [&](const char* name, std::string& out) -> std::optional<box_error> {
      std::string_view arg{a};
      std::string_view n{name};
      if (arg == n) {
        auto v = value(name);
        if (!v)
          return v.error();
        out = v.value();
        return box_error{};
      }
      if (arg.size() > n.size() && arg.substr(0, n.size()) == n && arg[n.size()] == '=') {
        out = std::string{arg.substr(n.size() + 1)};
        return box_error{};
      }
      return std::nullopt;
    };
    if (a == "--help" || a == "-h") {
      cfg.command = boxd_command::help;
      return cfg;
    }
    if (a == "--version") {
      cfg.command = boxd_command::version;
      return cfg;
    }
    std::optional<box_error> taken;
    if ((taken = flag("--config", config_file)) || (taken = flag("--listen", listen_override))
        || (taken = flag("--data-dir", cfg.data_dir))) {
      if (*taken)
        return *taken;
    } else if ((taken = flag("--check-config", config_file))) {
      if (*taken)
        return *taken;
      cfg.command = boxd_command::check_config;
    } else if (a == "--init-state") {
      cfg.init_state = true;
    } else {
      return config_error("unknown argument \"" + a + "\" (boxd --help lists the options)");
    }
  }
  cfg.config_file = config_file;
  // LANGBOT_BOX_CONFIG first, a config file over it: the file is the operator's intent.
  if (auto text = env("LANGBOT_BOX_CONFIG"); !py::strip(text).empty()) {
    auto merged = decode_text(text, [&](const element& root) {
      note_ignored(root, "LANGBOT_BOX_CONFIG", cfg);
      return decode_box_config(root, cfg.box);
    });
    if (merged)
      cfg.box = merged.value();
    else
      cfg.warnings.push_back("LANGBOT_BOX_CONFIG ignored: " + merged.error().message);
  }
  if (!config_file.empty()) {
    std::ifstream in{config_file};
    if (!in)
      return config_error("cannot read config file " + config_file);
    std::stringstream buf;
    buf << in.rdbuf();
    auto text = buf.str();
    auto outcome = decode_text(text, [&](const element& root) -> result<boxd_config> {
      object obj;
      if (root.get_object().get(obj) != simdjson::SUCCESS)
        return config_error("config file must hold a JSON object");
      auto next = cfg;
      for (auto field : obj) {
        if (field.key == "server") {
          if (auto err = apply_server(field.value, next.server, transfer_dir_set))
            return err;
        } else if (field.key == "box") {
          note_ignored(field.value, config_file, next);
          auto merged = decode_box_config(field.value, next.box);
          if (!merged)
            return merged.error();
          next.box = merged.value();
          // boxd's own file is the operator's: a policy the validator refuses stops boxd
          // here (a box_init's fails closed instead, as the reference's does).
          object box_obj;
          if (!next.box.admission_error.empty() && field.value.get_object().get(box_obj) == simdjson::SUCCESS
              && box_obj["admission"].error() == simdjson::SUCCESS)
            return config_error("box.admission: " + next.box.admission_error);
        } else if (field.key == "cluster") {
          auto cluster = decode_cluster_config(field.value);
          if (!cluster)
            return cluster.error();
          next.cluster = cluster.value();
        } else {
          return config_error("unknown config section \"" + std::string{field.key}
                              + "\" (expected server, box, cluster)");
        }
      }
      return next;
    });
    if (!outcome)
      return box_error{outcome.error().code, config_file + ": " + outcome.error().message};
    cfg = outcome.value();
  }
  if (auto token = env("LANGBOT_BOX_CONTROL_TOKEN"); !token.empty())
    cfg.server.control_token = token;
  if (auto trusted = env("LANGBOT_BOX_TRUSTED_INSTANCE_UUID"); !py::strip(trusted).empty())
    cfg.server.trusted_instance = std::string{py::strip(trusted)};
  // --data-dir unless a config named the workspace root itself.
  if (!cfg.data_dir.empty() && (cfg.box.local.host_root.empty() || cfg.box.local.host_root == default_host_root))
    cfg.box.local.host_root = (std::filesystem::path{cfg.data_dir} / "box").string();
  if (auto dir = env("LANGBOT_PLUGIN_FILE_STORAGE_DIR"); !dir.empty())
    cfg.server.transfer_dir = dir;
  else if (env("LANGBOT_PLUGIN_RUNTIME_PROFILE") == "shared")
    cfg.server.transfer_dir = "/tmp/lbp-rpc";
  else if (!transfer_dir_set) {
    // Beside the data: <host_root>/../temp/lbp ("data/temp/lbp" for the default).
    std::filesystem::path root{host_root_of(cfg.box.local)};
    if (!root.has_filename())
      root = root.parent_path();
    cfg.server.transfer_dir = (root.parent_path() / "temp" / "lbp").string();
  }
  cfg.unsafe_soft_storage = truthy(env("LANGBOT_BOX_ALLOW_UNSAFE_SOFT_STORAGE_LIMITS"));
  if (cfg.unsafe_soft_storage)
    cfg.warnings.push_back("LANGBOT_BOX_ALLOW_UNSAFE_SOFT_STORAGE_LIMITS is set: the four storage "
                           "readiness checks are forced true");
  if (!listen_override.empty())
    if (auto err = parse_listen(listen_override, cfg.server))
      return err;
  // In a cluster the uids are allocated cluster-wide, from cluster.uid_range.
  if (cfg.cluster.enabled) {
    cfg.server.sandbox_uid_first = cfg.cluster.uid_first;
    cfg.server.sandbox_uid_last = cfg.cluster.uid_last;
  }
  if (auto why = net::validate(cfg.server); !why.empty())
    return config_error(why);
  if (auto clash = subid_overlap(cfg.server.sandbox_uid_first, cfg.server.sandbox_uid_last); !clash.empty())
    return config_error("server.sandbox_uid_range " + std::to_string(cfg.server.sandbox_uid_first) + "-"
                          + std::to_string(cfg.server.sandbox_uid_last) + " overlaps " + clash);
  return cfg;
}

std::string boxd_usage() {
  return R"(usage: boxd [OPTIONS]

Runs boxrt's sandbox runtime: LangBot's Box Action-RPC on ws://HOST:PORT/rpc/ws,
/healthz, /readyz and /metrics on the same port.

options:
  --config FILE        a JSON file {"server": {...}, "box": {...}, "cluster": {...}}
                       (docs/configuration.md); without it, the embedded default
  --listen HOST:PORT   where to listen (default 127.0.0.1:5410; port 0 picks one)
  --data-dir DIR       the data folder: workspaces and state under DIR/box, uploads
                       under DIR/temp/lbp (default ./data)
  --check-config FILE  print the effective configuration, defaults and ignored keys
                       included, and exit: 0 when boxd would start with it, 2 when not
  --init-state         start with empty admission state where its database is missing
  --version            print the version and exit
  -h, --help           print this and exit

environment: LANGBOT_BOX_CONTROL_TOKEN, LANGBOT_BOX_TRUSTED_INSTANCE_UUID,
LANGBOT_BOX_CONFIG, LANGBOT_PLUGIN_FILE_STORAGE_DIR, LANGBOT_PLUGIN_RUNTIME_PROFILE,
LANGBOT_BOX_ALLOW_UNSAFE_SOFT_STORAGE_LIMITS (docs/configuration.md).
)";
}

namespace {

/// Compact JSON from json::writer, indented by two spaces per level.
std::string indent_json(std::string_view in) {
  std::string out;
  int depth = 0;
  bool in_string = false;
  auto newline = [&] {
    out.push_back('\n');
    out.append(static_cast<size_t>(depth) * 2, ' ');
  };
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (in_string) {
      out.push_back(c);
      if (c == '\\' && i + 1 < in.size())
        out.push_back(in[++i]);
      else if (c == '"')
        in_string = false;
      continue;
    }
    switch (c) {
      case '"': in_string = true; out.push_back(c); break;
      case '{':
      case '[':
        out.push_back(c);
        if (i + 1 < in.size() && (in[i + 1] == '}' || in[i + 1] == ']')) {
          out.push_back(in[++i]);
          break;
        }
        ++depth;
        newline();
        break;
      case '}':
      case ']': --depth; newline(); out.push_back(c); break;
      case ',': out.push_back(c); newline(); break;
      case ':': out.append(": "); break;
      default: out.push_back(c);
    }
  }
  out.push_back('\n');
  return out;
}

void write_local(json::writer& w, const local_config& l) {
  w.begin_object();
  w.key("host_root").value(host_root_of(l));
  w.key("default_workspace").value(l.default_workspace);
  w.key("allowed_mount_roots").begin_array();
  for (const auto& r : l.allowed_mount_roots)
    w.value(r);
  w.end_array();
  w.key("skills_root").value(l.skills_root);
  w.key("skills_quota_mb").value(l.skills_quota_mb);
  w.key("nsjail_path").value(l.nsjail_path);
  w.end_object();
}

void write_admission(json::writer& w, const admission_policy& p) {
  w.begin_object();
  w.key("required").value(p.required);
  w.key("logical_session_id").value(p.logical_session_id);
  w.key("required_backend").value(p.required_backend);
  w.key("max_sessions").value(p.max_sessions);
  w.key("max_managed_processes").value(p.max_managed_processes);
  w.key("max_grant_ttl_sec").value(p.max_grant_ttl_sec);
  w.key("max_timeout_sec").value(p.max_timeout_sec);
  w.key("cpus").value(p.cpus);
  w.key("memory_mb").value(p.memory_mb);
  w.key("pids_limit").value(p.pids_limit);
  w.key("read_only_rootfs").value(p.read_only_rootfs);
  w.key("workspace_quota_mb").value(p.workspace_quota_mb);
  w.key("readiness_cache_sec").value(p.readiness_cache_sec);
  w.key("entitlements_file").value(p.entitlements_file);
  w.end_object();
}

std::string host_port(const std::string& host, uint16_t port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

} // namespace

std::string effective_config(const boxd_config& cfg) {
  json::writer w;
  w.begin_object();
  w.key("config_file").value(cfg.config_file);
  const auto& s = cfg.server;
  w.key("server").begin_object();
  w.key("listen").value(host_port(s.host, s.port));
  w.key("control_token").value(s.control_token.empty() ? "(not set)" : "(set)");
  w.key("trusted_instance_uuid").value(s.trusted_instance);
  w.key("transfer_dir").value(s.transfer_dir);
  for (const auto& k : size_keys)
    w.key(k.key).value(static_cast<uint64_t>(s.*(k.field)));
  w.key("sandbox_uid_range").begin_array().value(static_cast<uint64_t>(s.sandbox_uid_first))
    .value(static_cast<uint64_t>(s.sandbox_uid_last)).end_array();
  w.key("host_gid");
  if (s.host_gid < 0)
    w.null();
  else
    w.value(s.host_gid);
  w.key("compression").value(s.compression);
  w.key("log_format").value(s.log_json ? "json" : "text");
  w.key("audit_log");
  if (s.audit.path.empty())
    w.null();
  else
    w.value(s.audit.path);
  w.key("audit_commands").value(s.audit.commands);
  w.key("audit_max_bytes").value(s.audit.max_bytes);
  w.key("audit_files").value(static_cast<uint64_t>(s.audit.files));
  w.key("testing").value(s.testing);
  w.end_object();
  w.key("box").begin_object();
  w.key("backend").value(cfg.box.backend);
  w.key("limits");
  encode(w, cfg.box.limits);
  w.key("local");
  write_local(w, cfg.box.local);
  w.key("admission");
  write_admission(w, cfg.box.admission);
  // Egress (docs/network.md): the default policy, the profiles, the filter's settings.
  encode(w, cfg.box.network);
  w.end_object();
  w.key("cluster").begin_object();
  w.key("enabled").value(cfg.cluster.enabled);
  if (cfg.cluster.enabled) {
    const auto& c = cfg.cluster;
    w.key("node_id").value(c.node_id);
    w.key("listen").value(host_port(c.listen_host, c.listen_port));
    w.key("advertise").value(host_port(c.advertise_host, c.advertise_port));
    w.key("etcd").begin_object().key("endpoints").begin_array();
    for (const auto& e : c.etcd_endpoints)
      w.value(e);
    w.end_array().key("prefix").value(c.etcd_prefix).end_object();
    w.key("lease_ms").value(c.lease_ms);
    w.key("takeover_wait_ms").value(c.takeover_wait_ms);
    w.key("uid_range").begin_array().value(static_cast<uint64_t>(c.uid_first))
      .value(static_cast<uint64_t>(c.uid_last)).end_array();
  }
  w.end_object();
  w.key("ignored").begin_array();
  for (const auto& k : cfg.ignored)
    w.value(k);
  w.end_array();
  w.key("warnings").begin_array();
  for (const auto& k : cfg.warnings)
    w.value(k);
  w.end_array();
  w.end_object();
  return indent_json(w.take());
}

} // namespace boxrt
