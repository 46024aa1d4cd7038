#include "app/boxd_config.hpp"

#include <fstream>
#include <tuple>
#include <sstream>

#include <simdjson.h>

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
  auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size())
    return config_error("listen address must be HOST:PORT, got \"" + std::string{text} + "\"");
  auto host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  auto port_text = text.substr(colon + 1);
  unsigned long port = 0;
  for (char c : port_text) {
    if (c < '0' || c > '9')
      return config_error("listen port must be a number, got \"" + std::string{port_text} + "\"");
    port = port * 10 + static_cast<unsigned long>(c - '0');
    if (port > 65535)
      return config_error("listen port must be between 0 and 65535");
  }
  out.host = std::string{host};
  out.port = static_cast<uint16_t>(port);
  return {};
}

box_error read_string(object obj, const char* key, std::string& out) {
  element v;
  if (obj[key].get(v) != simdjson::SUCCESS || v.is_null())
    return {};
  std::string_view s;
  if (v.get_string().get(s) != simdjson::SUCCESS)
    return config_error(std::string{"server."} + key + " must be a string");
  out = std::string{s};
  return {};
}

box_error read_size(object obj, const char* key, size_t min, size_t max, size_t& out) {
  element v;
  if (obj[key].get(v) != simdjson::SUCCESS || v.is_null())
    return {};
  int64_t n = 0;
  if (v.is_bool() || v.get_int64().get(n) != simdjson::SUCCESS)
    return config_error(std::string{"server."} + key + " must be an integer");
  if (n < static_cast<int64_t>(min) || n > static_cast<int64_t>(max))
    return config_error(std::string{"server."} + key + " must be between " + std::to_string(min)
                        + " and " + std::to_string(max));
  out = static_cast<size_t>(n);
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
box_error read_uid_range(object obj, net::server_options& out) {
  element v;
  if (obj["sandbox_uid_range"].get(v) != simdjson::SUCCESS || v.is_null())
    return {};
  auto range = decode_uid_range(v);
  if (!range)
    return config_error("server.sandbox_uid_range must be [FIRST, LAST] with 1 <= FIRST <= LAST <= 4294967294");
  std::tie(out.sandbox_uid_first, out.sandbox_uid_last) = *range;
  return {};
}

box_error apply_server(element section, net::server_options& out) {
  object obj;
  if (section.get_object().get(obj) != simdjson::SUCCESS)
    return config_error("server must be an object");
  std::string listen;
  if (auto err = read_string(obj, "listen", listen))
    return err;
  if (!listen.empty())
    if (auto err = parse_listen(listen, out))
      return err;
  if (auto err = read_string(obj, "control_token", out.control_token))
    return err;
  if (auto err = read_string(obj, "trusted_instance_uuid", out.trusted_instance))
    return err;
  if (auto err = read_string(obj, "transfer_dir", out.transfer_dir))
    return err;
  if (auto err = read_size(obj, "max_connections", 1, 100000, out.max_connections))
    return err;
  if (auto err = read_size(obj, "max_inflight", 1, 4096, out.max_inflight))
    return err;
  if (auto err = read_size(obj, "max_message_bytes", 1024, 268435456, out.max_message_bytes))
    return err;
  if (auto err = read_size(obj, "max_outbound_bytes", 65536, size_t{1} << 40,
                           out.max_outbound_bytes))
    return err;
  if (auto err = read_size(obj, "max_outbound_frames", 16, 10000000, out.max_outbound_frames))
    return err;
  if (auto err = read_size(obj, "outbound_stall_ms", 100, 3600000, out.outbound_stall_ms))
    return err;
  if (auto err = read_size(obj, "max_pending_handshakes", 1, 100000, out.max_pending_handshakes))
    return err;
  if (auto err = read_size(obj, "handshake_timeout_ms", 100, 600000, out.handshake_timeout_ms))
    return err;
  if (auto err = read_size(obj, "reserved_fds", 0, 1000000, out.reserved_fds))
    return err;
  if (auto err = read_size(obj, "io_threads", 1, 64, out.io_threads))
    return err;
  if (auto err = read_size(obj, "io_spin_us", 0, 10000, out.io_spin_us))
    return err;
  if (auto err = read_size(obj, "relay_attach_wait_ms", 0, 3600000, out.relay_attach_wait_ms))
    return err;
  if (auto err = read_uid_range(obj, out))
    return err;
  if (element v; obj["host_gid"].get(v) == simdjson::SUCCESS && !v.is_null()) {
    int64_t gid = 0;
    if (v.is_bool() || v.get_int64().get(gid) != simdjson::SUCCESS || gid < 0 || gid > 4294967294LL)
      return config_error("server.host_gid must be an integer between 0 and 4294967294");
    out.host_gid = gid;
  }
  if (element v; obj["compression"].get(v) == simdjson::SUCCESS && !v.is_null()) {
    if (v.get_bool().get(out.compression) != simdjson::SUCCESS)
      return config_error("server.compression must be a boolean");
  }
  if (element v; obj["log_format"].get(v) == simdjson::SUCCESS && !v.is_null()) {
    std::string_view format;
    if (v.get_string().get(format) != simdjson::SUCCESS || (format != "text" && format != "json"))
      return config_error("server.log_format must be \"text\" or \"json\"");
    out.log_json = format == "json";
  }
  if (element v; obj["testing"].get(v) == simdjson::SUCCESS && !v.is_null()) {
    if (v.get_bool().get(out.testing) != simdjson::SUCCESS)
      return config_error("server.testing must be a boolean");
  }
  return {};
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
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    auto value = [&](const char* flag) -> result<std::string> {
      if (i + 1 >= args.size())
        return config_error(std::string{flag} + " needs a value");
      return args[++i];
    };
    if (a == "--config") {
      auto v = value("--config");
      if (!v)
        return v.error();
      config_file = v.value();
    } else if (a.rfind("--config=", 0) == 0) {
      config_file = a.substr(9);
    } else if (a == "--listen") {
      auto v = value("--listen");
      if (!v)
        return v.error();
      listen_override = v.value();
    } else if (a.rfind("--listen=", 0) == 0) {
      listen_override = a.substr(9);
    } else if (a == "--init-state") {
      cfg.init_state = true;
    } else {
      return config_error("unknown argument \"" + a
                          + "\" (usage: boxd [--config FILE] [--listen HOST:PORT] [--init-state])");
    }
  }
  // LANGBOT_BOX_CONFIG first, a config file over it: the file is the operator's intent.
  if (auto text = env("LANGBOT_BOX_CONFIG"); !py::strip(text).empty()) {
    auto merged = decode_text(text, [&](const element& root) { return decode_box_config(root, cfg.box); });
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
          if (auto err = apply_server(field.value, next.server))
            return err;
        } else if (field.key == "box") {
          auto merged = decode_box_config(field.value, next.box);
          if (!merged)
            return merged.error();
          next.box = merged.value();
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
  if (auto dir = env("LANGBOT_PLUGIN_FILE_STORAGE_DIR"); !dir.empty())
    cfg.server.transfer_dir = dir;
  else if (env("LANGBOT_PLUGIN_RUNTIME_PROFILE") == "shared")
    cfg.server.transfer_dir = "/tmp/lbp-rpc";
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

} // namespace boxrt
