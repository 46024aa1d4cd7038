#include "net/etcd/client.hpp"

#include <charconv>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/beast/ssl.hpp>
#include <simdjson.h>

#include "messages/base/base64.hpp"
#include "messages/base/json.hpp"

namespace boxrt::net::etcd {

namespace beast = boost::beast;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using simdjson::dom::element;
using simdjson::dom::object;

namespace {

box_error unavailable(std::string text) {
  return box_error{ec::runtime_unavailable, std::move(text)};
}

/// The gateway writes 64-bit integers as JSON strings (proto3 JSON), and leaves zero
/// values out.
int64_t int_field(object obj, const char* name) {
  element v;
  if (obj[name].get(v) != simdjson::SUCCESS)
    return 0;
  int64_t n = 0;
  std::string_view s;
  if (v.get_string().get(s) == simdjson::SUCCESS) {
    std::from_chars(s.data(), s.data() + s.size(), n);
    return n;
  }
  if (v.get_int64().get(n) == simdjson::SUCCESS)
    return n;
  return 0;
}

int64_t header_revision(object obj) {
  object header;
  if (obj["header"].get_object().get(header) != simdjson::SUCCESS)
    return 0;
  return int_field(header, "revision");
}

result<key_value> decode_kv(object kv) {
  key_value out;
  std::string_view k, v;
  if (kv["key"].get_string().get(k) != simdjson::SUCCESS)
    return unavailable("etcd sent a key-value without a key");
  auto key = base64_decode(k);
  if (!key)
    return unavailable("etcd sent a key that is not base64");
  out.key = std::move(*key);
  if (kv["value"].get_string().get(v) == simdjson::SUCCESS) {
    auto value = base64_decode(v);
    if (!value)
      return unavailable("etcd sent a value that is not base64");
    out.value = std::move(*value);
  }
  out.create_revision = int_field(kv, "create_revision");
  out.mod_revision = int_field(kv, "mod_revision");
  out.version = int_field(kv, "version");
  out.lease = int_field(kv, "lease");
  return out;
}

result<std::vector<key_value>> decode_kvs(object range) {
  std::vector<key_value> out;
  simdjson::dom::array kvs;
  if (range["kvs"].get_array().get(kvs) != simdjson::SUCCESS)
    return out;
  for (auto item : kvs) {
    object kv;
    if (item.get_object().get(kv) != simdjson::SUCCESS)
      return unavailable("etcd sent a malformed key-value");
    auto decoded = decode_kv(kv);
    if (!decoded)
      return decoded.error();
    out.push_back(std::move(decoded.value()));
  }
  return out;
}

/// The end of the range of keys that start with `prefix` (etcd's "prefix + 1").
std::string prefix_end(std::string_view prefix) {
  std::string end{prefix};
  while (!end.empty()) {
    auto& c = reinterpret_cast<unsigned char&>(end.back());
    if (c < 0xff) {
      ++c;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0'); // every key
}

} // namespace

struct parsed_reply {
  simdjson::dom::parser parser;
  object obj;
};

namespace {

result<std::unique_ptr<parsed_reply>> parse(const std::string& text) {
  auto p = std::make_unique<parsed_reply>();
  element root;
  if (p->parser.parse(text).get(root) != simdjson::SUCCESS || root.get_object().get(p->obj) != simdjson::SUCCESS)
    return unavailable("etcd sent a reply that is not a JSON object");
  return p;
}

} // namespace

client::client(options o) : opts_(std::move(o)) {
  if (!opts_.tls)
    return;
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  beast::error_code ec;
  ctx->set_verify_mode(asio::ssl::verify_peer, ec);
  if (!ec)
    ctx->load_verify_file(opts_.tls->ca_file, ec);
  if (!ec)
    ctx->use_certificate_chain_file(opts_.tls->certificate, ec);
  if (!ec)
    ctx->use_private_key_file(opts_.tls->key, asio::ssl::context::pem, ec);
  if (ec) {
    tls_error_ = "the etcd client certificate, key or CA cannot be loaded: " + ec.message();
    return;
  }
  tls_context_ = ctx;
}

result<std::string> client::post(std::string_view path, const std::string& body) {
  namespace http = beast::http;
  const auto n = opts_.endpoints.size();
  if (n == 0)
    return unavailable("etcd has no endpoint configured");
  const auto deadline = std::chrono::steady_clock::now() + opts_.timeout;
  std::string why;
  // The member that answered last goes first. Only a request that never reached a member
  // (no connection) moves on to the next: once it is written, etcd may have applied it,
  // and sending it again could apply it twice (a create would find its own key).
  for (size_t i = 0; i < n; ++i) {
    const size_t at = (preferred_ + i) % n;
    const auto& url = opts_.endpoints[at];
    auto note = [&](const std::string& text) { why += (why.empty() ? "" : "; ") + url + ": " + text; };
    const bool tls = url.starts_with("https://");
    if (!tls && !url.starts_with("http://")) {
      note("an endpoint is http://HOST:PORT or https://HOST:PORT");
      continue;
    }
    if (tls && !tls_context_) {
      note(tls_error_.empty() ? "an https:// endpoint needs a client certificate (cluster.etcd.tls)" : tls_error_);
      continue;
    }
    auto hostport = url.substr(tls ? 8 : 7);
    while (!hostport.empty() && hostport.back() == '/')
      hostport.pop_back();
    auto colon = hostport.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      note("no port");
      continue;
    }
    auto host = hostport.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
      host = host.substr(1, host.size() - 2);
    auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero())
      break;
    // Each remaining member gets an equal share of what is left to connect in; the one
    // that answers then has the rest for the exchange.
    auto connect_budget = left / static_cast<long>(n - i);
    asio::io_context io;
    beast::tcp_stream plain{io};
    std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> secure;
    if (tls) {
      secure = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(
        io, *std::static_pointer_cast<asio::ssl::context>(tls_context_));
      ::SSL_set_tlsext_host_name(secure->native_handle(), host.c_str());
      secure->set_verify_callback(asio::ssl::host_name_verification(host));
    }
    beast::tcp_stream& stream = tls ? beast::get_lowest_layer(*secure) : plain;
    tcp::resolver resolver{io};
    beast::error_code ec;
    http::request<http::string_body> req{http::verb::post, std::string{path}, 11};
    req.set(http::field::host, hostport);
    req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> res;
    res.body_limit(64u << 20);
    const char* step = "resolve";
    bool written = false;
    // The name lookup runs under the same bound as the rest (never a blocking getaddrinfo).
    asio::steady_timer resolve_timer{io};
    resolve_timer.expires_after(connect_budget);
    resolve_timer.async_wait([&](beast::error_code e) {
      if (!e)
        resolver.cancel();
    });
    // Written, then read, on the TLS layer when there is one.
    auto exchange = [&](auto& s) {
      step = "write";
      written = true;
      stream.expires_at(std::chrono::steady_clock::now() + (deadline - std::chrono::steady_clock::now()));
      http::async_write(s, req, [&](beast::error_code e, size_t) {
        if ((ec = e))
          return;
        step = "read";
        http::async_read(s, buffer, res, [&](beast::error_code e, size_t) { ec = e; });
      });
    };
    resolver.async_resolve(host, hostport.substr(colon + 1), [&](beast::error_code e, tcp::resolver::results_type r) {
      resolve_timer.cancel();
      if ((ec = e))
        return;
      step = "connect";
      stream.expires_after(connect_budget);
      stream.async_connect(r, [&](beast::error_code e, const tcp::endpoint&) {
        if ((ec = e))
          return;
        if (!tls) {
          exchange(plain);
          return;
        }
        // Nothing is sent before the handshake: a member that fails it has seen nothing.
        step = "TLS handshake";
        secure->async_handshake(asio::ssl::stream_base::client, [&](beast::error_code e) {
          if ((ec = e))
            return;
          exchange(*secure);
        });
      });
    });
    io.run();
    if (ec) {
      if (written)
        return unavailable("etcd at " + url + " did not answer " + std::string{path} + " (" + step + ": "
                           + ec.message() + "); whether it was applied is unknown");
      note(std::string{step} + ": " + ec.message());
      continue;
    }
    preferred_ = at;
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    auto reply = res.release();
    if (reply.result() != http::status::ok) {
      // The gateway's error object: {"error", "message", "code"}.
      std::string message = reply.body();
      if (auto p = parse(reply.body())) {
        std::string_view m;
        if ((*p)->obj["message"].get_string().get(m) == simdjson::SUCCESS)
          message = std::string{m};
      }
      return unavailable("etcd refused " + std::string{path} + ": " + message);
    }
    return std::move(reply.body());
  }
  return unavailable("etcd is not reachable: " + (why.empty() ? std::string{"no time left"} : why));
}

result<std::unique_ptr<parsed_reply>> client::call(std::string_view path, const std::string& body) {
  auto text = post(path, body);
  if (!text)
    return text.error();
  return parse(*text);
}

result<std::optional<key_value>> client::get(std::string_view key) {
  json::writer w;
  w.begin_object().key("key").value(base64_encode(key)).end_object();
  auto p = call("/v3/kv/range", w.take());
  if (!p)
    return p.error();
  auto kvs = decode_kvs((*p)->obj);
  if (!kvs)
    return kvs.error();
  if (kvs->empty())
    return std::optional<key_value>{};
  return std::optional<key_value>{std::move(kvs->front())};
}

result<std::vector<key_value>> client::list(std::string_view prefix) {
  if (prefix.empty())
    return box_error{ec::validation, "an etcd prefix must not be empty"};
  json::writer w;
  w.begin_object()
    .key("key").value(base64_encode(prefix))
    .key("range_end").value(base64_encode(prefix_end(prefix)))
    .end_object();
  auto p = call("/v3/kv/range", w.take());
  if (!p)
    return p.error();
  return decode_kvs((*p)->obj);
}

result<int64_t> client::put(std::string_view key, std::string_view value, int64_t lease) {
  json::writer w;
  w.begin_object().key("key").value(base64_encode(key)).key("value").value(base64_encode(value));
  if (lease != 0)
    w.key("lease").value(std::to_string(lease));
  w.end_object();
  auto p = call("/v3/kv/put", w.take());
  if (!p)
    return p.error();
  auto revision = header_revision((*p)->obj);
  if (revision == 0)
    return unavailable("etcd sent a put reply without a header");
  return revision;
}

namespace {

/// One transaction: compare `key`'s create revision with `revision`, then put
/// `put_key` = `value` (with `lease`) on success, read `key` on failure.
std::string txn_body(std::string_view key, int64_t revision, std::string_view put_key, std::string_view value,
                     int64_t lease) {
  json::writer w;
  w.begin_object();
  w.key("compare").begin_array().begin_object();
  w.key("key").value(base64_encode(key)).key("target").value("CREATE").key("result").value("EQUAL");
  w.key("create_revision").value(std::to_string(revision));
  w.end_object().end_array();
  w.key("success").begin_array().begin_object().key("request_put").begin_object();
  w.key("key").value(base64_encode(put_key)).key("value").value(base64_encode(value));
  if (lease != 0)
    w.key("lease").value(std::to_string(lease));
  w.end_object().end_object().end_array();
  w.key("failure").begin_array().begin_object().key("request_range").begin_object();
  w.key("key").value(base64_encode(key));
  w.end_object().end_object().end_array();
  w.end_object();
  return w.take();
}

bool succeeded(object obj) {
  bool ok = false;
  return obj["succeeded"].get_bool().get(ok) == simdjson::SUCCESS && ok;
}

} // namespace

result<create_outcome> client::create(std::string_view key, std::string_view value, int64_t lease) {
  auto p = call("/v3/kv/txn", txn_body(key, 0, key, value, lease));
  if (!p)
    return p.error();
  create_outcome out;
  out.revision = header_revision((*p)->obj);
  if (out.revision == 0)
    return unavailable("etcd sent a transaction reply without a header");
  out.created = succeeded((*p)->obj);
  if (!out.created) {
    simdjson::dom::array responses;
    if ((*p)->obj["responses"].get_array().get(responses) == simdjson::SUCCESS)
      for (auto r : responses) {
        object range;
        if (r["response_range"].get_object().get(range) != simdjson::SUCCESS)
          continue;
        auto kvs = decode_kvs(range);
        if (!kvs)
          return kvs.error();
        if (!kvs->empty())
          out.existing = std::move(kvs->front());
      }
  }
  return out;
}

result<bool> client::put_fenced(std::string_view guard, int64_t epoch, std::string_view key, std::string_view value) {
  if (epoch <= 0)
    return false;
  auto p = call("/v3/kv/txn", txn_body(guard, epoch, key, value, 0));
  if (!p)
    return p.error();
  if (header_revision((*p)->obj) == 0)
    return unavailable("etcd sent a transaction reply without a header");
  return succeeded((*p)->obj);
}

result<bool> client::erase(std::string_view key) {
  json::writer w;
  w.begin_object().key("key").value(base64_encode(key)).end_object();
  auto p = call("/v3/kv/deleterange", w.take());
  if (!p)
    return p.error();
  return int_field((*p)->obj, "deleted") > 0;
}

result<int64_t> client::grant(std::chrono::milliseconds ttl) {
  auto seconds = std::max<int64_t>(1, (ttl.count() + 999) / 1000);
  json::writer w;
  w.begin_object().key("TTL").value(std::to_string(seconds)).end_object();
  auto p = call("/v3/lease/grant", w.take());
  if (!p)
    return p.error();
  auto id = int_field((*p)->obj, "ID");
  if (id == 0)
    return unavailable("etcd granted no lease");
  return id;
}

result<std::chrono::milliseconds> client::keep_alive(int64_t lease) {
  json::writer w;
  w.begin_object().key("ID").value(std::to_string(lease)).end_object();
  auto p = call("/v3/lease/keepalive", w.take());
  if (!p)
    return p.error();
  // {"result": {"ID", "TTL"}}; a lease that is gone comes back without a TTL.
  object result_obj;
  if ((*p)->obj["result"].get_object().get(result_obj) != simdjson::SUCCESS)
    return unavailable("etcd sent a keep-alive reply without a result");
  return std::chrono::milliseconds{int_field(result_obj, "TTL") * 1000};
}

box_error client::revoke(int64_t lease) {
  json::writer w;
  w.begin_object().key("ID").value(std::to_string(lease)).end_object();
  auto text = post("/v3/lease/revoke", w.take());
  if (!text && text.error().message.find("lease not found") == std::string::npos)
    return text.error();
  return {};
}

kv::connector connector(options o) {
  return {[o = std::move(o)](std::chrono::milliseconds cap) -> std::unique_ptr<kv::store> {
    auto capped = o;
    capped.timeout = std::min(capped.timeout, cap);
    return std::make_unique<client>(std::move(capped));
  }};
}

} // namespace boxrt::net::etcd
