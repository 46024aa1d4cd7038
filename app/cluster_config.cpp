#include "app/cluster_config.hpp"

#include <memory>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <unistd.h>

#include <cctype>
#include <tuple>

#include <simdjson.h>

#include "app/config_block.hpp"

namespace boxrt {

namespace {

using simdjson::dom::element;
using simdjson::dom::object;

box_error invalid(std::string text) {
  return box_error{ec::validation, std::move(text)};
}

/// node_id: what other nodes and etcd keys name this node by.
bool valid_node_id(std::string_view s) {
  if (s.empty() || s.size() > 64)
    return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      return false;
  return true;
}

/// "HOST:PORT" with a port 1..65535 ("[v6]:PORT" too).
bool host_port(std::string_view text, std::string& host, uint16_t& port) {
  return config::parse_host_port(text, 1, host, port) == config::address_fault::none;
}

/// {"certificate", "key", "ca_file"}: all three, each a file boxd can read.
box_error tls_at(element v, const std::string& path, cluster_tls& out) {
  object obj;
  if (v.get_object().get(obj) != simdjson::SUCCESS)
    return invalid(path + " must be an object with certificate, key and ca_file");
  config::block tls{obj, path + ".", ec::validation};
  if (auto e = tls.only_keys({"certificate", "key", "ca_file"}))
    return e;
  for (auto [key, field] : {std::pair{"certificate", &out.certificate}, std::pair{"key", &out.key},
                            std::pair{"ca_file", &out.ca_file}})
    if (auto e = tls.string(key, *field, true, config::block::presence::required))
      return invalid(e.message + " (anonymous TLS authenticates no node)");
  return check_tls_files(out, path);
}

} // namespace

box_error check_tls_files(const cluster_tls& out, const std::string& path) {
  for (auto [key, field] : {std::pair{"certificate", &out.certificate}, std::pair{"key", &out.key},
                            std::pair{"ca_file", &out.ca_file}})
    if (field->empty() || ::access(field->c_str(), R_OK) != 0)
      return invalid(path + "." + key + " " + *field + " cannot be read");
  // Loaded here as the TLS layer will load them: a bad file is a start error, never a
  // failure at the first link.
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx{SSL_CTX_new(TLS_method()), SSL_CTX_free};
  if (!ctx)
    return invalid(path + ": cannot create a TLS context");
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), out.certificate.c_str()) != 1)
    return invalid(path + ".certificate " + out.certificate + " is not a PEM certificate chain");
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), out.key.c_str(), SSL_FILETYPE_PEM) != 1)
    return invalid(path + ".key " + out.key + " is not a PEM private key without a passphrase");
  if (SSL_CTX_check_private_key(ctx.get()) != 1)
    return invalid(path + ".key " + out.key + " does not belong to " + out.certificate);
  if (SSL_CTX_load_verify_locations(ctx.get(), out.ca_file.c_str(), nullptr) != 1)
    return invalid(path + ".ca_file " + out.ca_file + " holds no PEM CA certificate");
  ERR_clear_error();
  return {};
}

box_error check_cluster_config(const cluster_config& c) {
  if (!c.enabled)
    return {};
  if (!valid_node_id(c.node_id))
    return invalid("cluster.node_id must be 1-64 letters, digits, '-', '_' or '.'");
  if (c.listen_host.empty() || c.listen_port == 0)
    return invalid("cluster.listen must be HOST:PORT with a port 1-65535");
  if (c.advertise_host.empty() || c.advertise_port == 0)
    return invalid("cluster.advertise must be HOST:PORT with a port 1-65535");
  if (c.etcd_endpoints.empty())
    return invalid("cluster.etcd.endpoints must name at least one etcd member");
  for (auto& url : c.etcd_endpoints)
    if (!(url.starts_with("http://") || url.starts_with("https://")))
      return invalid("cluster.etcd.endpoints must be a list of http:// or https:// URLs");
  auto& p = c.etcd_prefix;
  if (p.empty() || p.front() != '/' || p.back() == '/' || p.size() > 256)
    return invalid("cluster.etcd.prefix must start with '/', not end with one, and be at most 256 characters");
  if (c.etcd_tls)
    if (auto e = check_tls_files(*c.etcd_tls, "cluster.etcd.tls"))
      return e;
  if (auto e = check_tls_files(c.tls, "cluster.tls"))
    return e;
  if (c.lease_ms < 500 || c.lease_ms > 60000)
    return invalid("cluster.lease_ms must be 500-60000");
  if (c.takeover_wait_ms < 0 || c.takeover_wait_ms > 600000)
    return invalid("cluster.takeover_wait_ms must be 0-600000");
  if (c.uid_first < 1 || c.uid_first > c.uid_last || c.uid_last > 4294967294u)
    return invalid("cluster.uid_range must be [FIRST, LAST] with 1 <= FIRST <= LAST <= 4294967294");
  return {};
}

result<cluster_config> decode_cluster_config(const element& block) {
  cluster_config c;
  object obj;
  if (block.get_object().get(obj) != simdjson::SUCCESS)
    return invalid("cluster must be an object");
  config::block cluster{obj, "cluster.", ec::validation};
  constexpr auto required = config::block::presence::required;
  if (auto e = cluster.only_keys({"node_id", "listen", "advertise", "etcd", "tls", "lease_ms",
                                  "takeover_wait_ms", "uid_range"}))
    return e;
  c.enabled = true;
  if (auto e = cluster.string("node_id", c.node_id, true, required))
    return e;
  if (!valid_node_id(c.node_id))
    return invalid("cluster.node_id must be 1-64 letters, digits, '-', '_' or '.'");
  std::string listen, advertise;
  if (auto e = cluster.string("listen", listen, true, required))
    return e;
  if (!host_port(listen, c.listen_host, c.listen_port))
    return invalid("cluster.listen must be HOST:PORT with a port 1-65535, got \"" + listen + "\"");
  if (auto e = cluster.string("advertise", advertise, true))
    return e;
  if (advertise.empty())
    advertise = listen;
  if (!host_port(advertise, c.advertise_host, c.advertise_port))
    return invalid("cluster.advertise must be HOST:PORT with a port 1-65535, got \"" + advertise + "\"");
  auto v = cluster.get("etcd");
  if (!v)
    return invalid("cluster.etcd is required");
  object etcd_obj;
  if (v->get_object().get(etcd_obj) != simdjson::SUCCESS)
    return invalid("cluster.etcd must be an object");
  config::block etcd{etcd_obj, "cluster.etcd.", ec::validation};
  if (auto e = etcd.only_keys({"endpoints", "prefix", "tls"}))
    return e;
  simdjson::dom::array endpoints;
  if (element list; etcd_obj["endpoints"].get(list) != simdjson::SUCCESS
                    || list.get_array().get(endpoints) != simdjson::SUCCESS)
    return invalid("cluster.etcd.endpoints must be a list of http:// or https:// URLs");
  for (auto item : endpoints) {
    std::string_view url;
    if (item.get_string().get(url) != simdjson::SUCCESS
        || !(url.starts_with("http://") || url.starts_with("https://")))
      return invalid("cluster.etcd.endpoints must be a list of http:// or https:// URLs");
    std::string host;
    uint16_t port = 0;
    auto rest = url.substr(url.find("://") + 3);
    while (!rest.empty() && rest.back() == '/')
      rest.remove_suffix(1);
    if (!host_port(rest, host, port))
      return invalid("cluster.etcd.endpoints: \"" + std::string{url} + "\" must be SCHEME://HOST:PORT");
    c.etcd_endpoints.emplace_back(url);
  }
  if (c.etcd_endpoints.empty())
    return invalid("cluster.etcd.endpoints must name at least one etcd member");
  if (auto e = etcd.string("prefix", c.etcd_prefix, true, required))
    return e;
  if (c.etcd_prefix.front() != '/' || c.etcd_prefix.back() == '/' || c.etcd_prefix.size() > 256)
    return invalid("cluster.etcd.prefix must start with '/', not end with one, and be at most 256 characters");
  if (auto tls = etcd.get("tls")) {
    cluster_tls t;
    if (auto e = tls_at(*tls, "cluster.etcd.tls", t))
      return e;
    c.etcd_tls = t;
  }
  auto tls = cluster.get("tls");
  if (!tls)
    return invalid("cluster.tls is required: certificate, key and ca_file (anonymous TLS authenticates no node)");
  if (auto e = tls_at(*tls, "cluster.tls", c.tls))
    return e;
  if (auto e = cluster.integer("lease_ms", 500, 60000, c.lease_ms))
    return e;
  if (auto e = cluster.integer("takeover_wait_ms", 0, 600000, c.takeover_wait_ms))
    return e;
  auto uids = cluster.get("uid_range");
  if (!uids)
    return invalid("cluster.uid_range is required: [FIRST, LAST], allocated cluster-wide");
  auto range = decode_uid_range(*uids);
  if (!range)
    return invalid("cluster.uid_range must be [FIRST, LAST] with 1 <= FIRST <= LAST <= 4294967294");
  std::tie(c.uid_first, c.uid_last) = *range;
  return c;
}

std::optional<std::pair<uint32_t, uint32_t>> decode_uid_range(const element& v) {
  simdjson::dom::array range;
  int64_t ends[2] = {0, 0};
  size_t n = 0;
  if (v.get_array().get(range) != simdjson::SUCCESS)
    return std::nullopt;
  for (auto item : range) {
    if (n >= 2 || item.is_bool() || item.get_int64().get(ends[n]) != simdjson::SUCCESS)
      return std::nullopt;
    ++n;
  }
  if (n != 2 || ends[0] < 1 || ends[1] < ends[0] || ends[1] > 4294967294LL)
    return std::nullopt;
  return std::pair{static_cast<uint32_t>(ends[0]), static_cast<uint32_t>(ends[1])};
}

} // namespace boxrt
