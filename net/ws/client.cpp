#include "net/ws/client.hpp"

#include <chrono>
#include <stdexcept>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <simdjson.h>

namespace boxrt::net {

namespace beast = boost::beast;
namespace websocket = beast::websocket;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

struct rpc_client::impl {
  asio::io_context io;
  websocket::stream<tcp::socket> ws{io};
  simdjson::dom::parser parser;
  bool open = false;
};

bool parse_ws_url(const std::string& url, std::string& host, std::string& port, std::string& path) {
  std::string rest = url;
  if (rest.rfind("ws://", 0) == 0)
    rest = rest.substr(5);
  else if (rest.find("://") != std::string::npos)
    return false;
  auto slash = rest.find('/');
  path = slash == std::string::npos ? "/rpc/ws" : rest.substr(slash);
  auto hostport = rest.substr(0, slash);
  auto colon = hostport.rfind(':');
  if (colon == std::string::npos) {
    host = hostport;
    port = "5410";
  } else {
    host = hostport.substr(0, colon);
    port = hostport.substr(colon + 1);
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return !host.empty() && !port.empty();
}

http_reply http_get(const client_options& opts, const std::string& target) {
  namespace http = beast::http;
  std::string host, port, path;
  if (!parse_ws_url(opts.url, host, port, path))
    throw std::runtime_error("invalid URL " + opts.url + " (expected ws://HOST:PORT)");
  asio::io_context io;
  beast::tcp_stream stream{io};
  tcp::resolver resolver{io};
  beast::error_code ec;
  auto endpoints = resolver.resolve(host, port, ec);
  if (ec)
    throw std::runtime_error("cannot resolve " + host + ": " + ec.message());
  // One deadline for the whole exchange: a server that stalls cannot hang the caller.
  constexpr auto deadline = std::chrono::seconds{10};
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, host + ":" + port);
  if (!opts.token.empty())
    req.set(http::field::authorization, "Bearer " + opts.token);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  const char* step = "connect";
  stream.expires_after(deadline);
  stream.async_connect(endpoints, [&](beast::error_code e, const tcp::endpoint&) {
    if ((ec = e))
      return;
    step = "write";
    http::async_write(stream, req, [&](beast::error_code e, size_t) {
      if ((ec = e))
        return;
      step = "read";
      http::async_read(stream, buffer, res, [&](beast::error_code e, size_t) { ec = e; });
    });
  });
  io.run();
  if (ec)
    throw std::runtime_error("GET " + target + " failed (" + step + "): " + ec.message());
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  return {res.result_int(), std::move(res.body())};
}

rpc_client::rpc_client() : impl_(std::make_unique<impl>()) {
}

rpc_client::~rpc_client() {
  close();
}

rpc_client::rpc_client(rpc_client&&) noexcept = default;
rpc_client& rpc_client::operator=(rpc_client&&) noexcept = default;

void rpc_client::connect(const client_options& opts) {
  std::string host, port, path;
  if (!parse_ws_url(opts.url, host, port, path))
    throw std::runtime_error("invalid URL " + opts.url + " (expected ws://HOST:PORT)");
  tcp::resolver resolver{impl_->io};
  beast::error_code ec;
  auto endpoints = resolver.resolve(host, port, ec);
  if (ec)
    throw std::runtime_error("cannot resolve " + host + ": " + ec.message());
  asio::connect(impl_->ws.next_layer(), endpoints, ec);
  if (ec)
    throw std::runtime_error("cannot connect to " + opts.url + ": " + ec.message());
  impl_->ws.read_message_max(64u << 20);
  impl_->ws.set_option(websocket::stream_base::decorator([opts](websocket::request_type& req) {
    if (!opts.token.empty())
      req.set("X-LangBot-Box-Control-Token", opts.token);
    req.set("X-LangBot-Instance-Id", opts.instance);
  }));
  // The asynchronous handshake hands back the server's response also when the upgrade is
  // declined (the synchronous one does not), so a 401 can be reported as such.
  websocket::response_type res;
  impl_->ws.async_handshake(res, host + ":" + port, path,
                            [&ec](beast::error_code e) { ec = e; });
  impl_->io.restart();
  impl_->io.run();
  if (ec) {
    if (res.result_int() != 0 && res.result_int() != 101)
      throw std::runtime_error("handshake refused: HTTP " + std::to_string(res.result_int()) + " "
                               + std::string{res.reason()});
    throw std::runtime_error("handshake failed: " + ec.message());
  }
  impl_->open = true;
}

void rpc_client::send_text(const std::string& text) {
  impl_->ws.text(true);
  impl_->ws.write(asio::buffer(text));
}

std::string rpc_client::read_text() {
  beast::flat_buffer buf;
  impl_->ws.read(buf);
  return beast::buffers_to_string(buf.data());
}

namespace {

std::string request_text(int64_t seq, const std::string& action, const std::string& data_json,
                         const std::string& context_json, bool flow_control = false) {
  std::string req = "{\"seq_id\":" + std::to_string(seq) + ",\"action\":\"" + action
                    + "\",\"data\":" + data_json;
  if (!context_json.empty())
    req += ",\"context\":" + context_json;
  if (flow_control)
    req += ",\"stream_flow_control\":1";
  req += "}";
  return req;
}

} // namespace

rpc_response rpc_client::call_stream(const std::string& action, const std::string& data_json,
                                     const std::string& context_json,
                                     const std::function<void(const std::string&)>& on_frame) {
  constexpr int64_t ack_every = 4;  // the SDK's STREAM_WINDOW // 2
  auto seq = next_seq_++;
  send_text(request_text(seq, action, data_json, context_json, true));
  rpc_response out;
  out.seq_id = seq;
  for (;;) {
    auto text = read_text();
    simdjson::dom::element root;
    int64_t got = 0;
    if (impl_->parser.parse(text).get(root) != simdjson::SUCCESS
        || root["seq_id"].get_int64().get(got) != simdjson::SUCCESS || got != seq)
      continue;  // the acknowledgements' answers
    if (root["code"].get_int64().get(out.code)) {}
    std::string_view v;
    if (root["message"].get_string().get(v) == simdjson::SUCCESS)
      out.message = std::string{v};
    if (out.code != 0)
      return out;
    if (root["chunk_status"].get_string().get(v) == simdjson::SUCCESS && v == "end")
      return out;
    simdjson::dom::element data;
    if (root["data"].get(data) == simdjson::SUCCESS)
      out.data_json = simdjson::minify(data);
    on_frame(out.data_json);
    int64_t index = 0;
    if (root["stream_index"].get_int64().get(index) == simdjson::SUCCESS && index % ack_every == 0)
      send_text(request_text(next_seq_++, "__stream_ack",
                             "{\"seq_id\":" + std::to_string(seq) + ",\"index\":" + std::to_string(index) + "}",
                             context_json));
  }
}

rpc_response rpc_client::call(const std::string& action, const std::string& data_json,
                              const std::string& context_json) {
  auto seq = next_seq_++;
  send_text(request_text(seq, action, data_json, context_json));
  for (;;) {
    auto text = read_text();
    simdjson::dom::element root;
    if (impl_->parser.parse(text).get(root) != simdjson::SUCCESS)
      continue;
    int64_t got = 0;
    if (root["seq_id"].get_int64().get(got) != simdjson::SUCCESS || got != seq)
      continue;
    rpc_response out;
    out.seq_id = got;
    if (root["code"].get_int64().get(out.code)) {}
    std::string_view msg;
    if (root["message"].get_string().get(msg) == simdjson::SUCCESS)
      out.message = std::string{msg};
    simdjson::dom::element data;
    if (root["data"].get(data) == simdjson::SUCCESS)
      out.data_json = simdjson::minify(data);
    return out;
  }
}

void rpc_client::close() {
  if (!impl_ || !impl_->open)
    return;
  impl_->open = false;
  beast::error_code ec;
  impl_->ws.close(websocket::close_code::normal, ec);
}

} // namespace boxrt::net
