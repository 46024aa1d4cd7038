#include "app/boxd_config.hpp"

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

/// The `server` block: unknown keys are ignored (the operator's view will refuse them).
box_error apply_server(element section, net::server_options& out) {
  object obj;
  if (section.get_object().get(obj) != simdjson::SUCCESS)
    return config_error("server must be an object");
  config::block server{obj, "server.", ec::value};
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
  struct size_key {
    const char* key;
    size_t min, max;
    size_t* field;
  };
  for (const auto& k : {size_key{"max_connections", 1, 100000, &out.max_connections},
                        size_key{"max_inflight", 1, 4096, &out.max_inflight},
                        size_key{"max_message_bytes", 1024, 268435456, &out.max_message_bytes},
                        size_key{"max_outbound_bytes", 65536, size_t{1} << 40, &out.max_outbound_bytes},
                        size_key{"max_outbound_frames", 16, 10000000, &out.max_outbound_frames},
                        size_key{"outbound_stall_ms", 100, 3600000, &out.outbound_stall_ms},
                        size_key{"max_pending_handshakes", 1, 100000, &out.max_pending_handshakes},
                        size_key{"handshake_timeout_ms", 100, 600000, &out.handshake_timeout_ms},
                        size_key{"reserved_fds", 0, 1000000, &out.reserved_fds},
                        size_key{"io_threads", 1, 64, &out.io_threads},
                        size_key{"io_spin_us", 0, 10000, &out.io_spin_us},
                        size_key{"relay_attach_wait_ms", 0, 3600000, &out.relay_attach_wait_ms},
                        size_key{"stream_keepalive_ms", 100, 3600000, &out.stream_keepalive_ms},
                        size_key{"max_stream_output_bytes", 1, size_t{1} << 50, &out.max_stream_output_bytes},
                        size_key{"stream_stop_grace_ms", 0, 600000, &out.stream_stop_grace_ms},
                        size_key{"max_file_call_bytes", 1, size_t{64} << 20, &out.max_file_call_bytes},
                        size_key{"max_list_entries", 1, 10000000, &out.max_list_entries}})
    if (auto err = server.size(k.key, k.min, k.max, *k.field))
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
  if (auto v = server.get("log_format")) {
    std::string_view format;
    if (v->get_string().get(format) != simdjson::SUCCESS || (format != "text" && format != "json"))
      return config_error("server.log_format must be \"text\" or \"json\"");
    out.log_json = format == "json";
  }
  return server.boolean("testing", out.testing);
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
