// A small Beast HTTP/WebSocket client for wire tests: raw frames (text and binary),
// handshake refusals with their status and body, close codes, and reply parsing.
// Every operation has a time limit, so a broken server fails a test instead of hanging it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>  // before Boost 1.74 asio: awaitable.hpp needs std::exchange
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <simdjson.h>

#include "messages/base/python_json.hpp"

namespace boxrt::test {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;

/// The longest any single client operation may take.
inline constexpr auto io_time_limit = std::chrono::seconds{30};

using header_list = std::vector<std::pair<std::string, std::string>>;

namespace detail {

/// Runs `ioc` until the operation started by `start` completes, and returns its error.
/// On timeout `abort` cancels the I/O, the handler is drained, and this throws.
template <class Start, class Abort>
beast::error_code run_op(asio::io_context& ioc, Start&& start, Abort&& abort) {
  auto result = std::make_shared<std::optional<beast::error_code>>();
  start([result](beast::error_code ec, auto&&...) { *result = ec; });
  ioc.restart();
  ioc.run_for(io_time_limit);
  if (!*result) {
    abort();
    ioc.restart();
    ioc.run();
    throw std::runtime_error("test client: operation timed out");
  }
  return **result;
}

} // namespace detail

struct http_reply {
  unsigned status = 0;
  std::string content_type;
  std::string body;
};

/// One request over a fresh connection to 127.0.0.1:`port`.
inline http_reply http_request(uint16_t port, http::verb method, const std::string& target,
                               const header_list& headers = {}) {
  asio::io_context ioc;
  beast::tcp_stream stream{ioc};
  auto abort = [&] { stream.close(); };
  auto ec = detail::run_op(
    ioc,
    [&](auto handler) {
      stream.async_connect(tcp::endpoint{asio::ip::make_address("127.0.0.1"), port}, handler);
    },
    abort);
  if (ec)
    throw std::runtime_error("test client: connect: " + ec.message());
  http::request<http::string_body> req{method, target, 11};
  req.set(http::field::host, "127.0.0.1");
  for (const auto& [k, v] : headers)
    req.set(k, v);
  req.prepare_payload();
  ec = detail::run_op(ioc, [&](auto handler) { http::async_write(stream, req, handler); }, abort);
  if (ec)
    throw std::runtime_error("test client: http write: " + ec.message());
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  ec = detail::run_op(ioc, [&](auto handler) { http::async_read(stream, buffer, res, handler); },
                      abort);
  if (ec)
    throw std::runtime_error("test client: http read: " + ec.message());
  http_reply out;
  out.status = res.result_int();
  out.content_type = std::string{res[http::field::content_type]};
  out.body = res.body();
  return out;
}

inline http_reply http_get(uint16_t port, const std::string& target,
                           const header_list& headers = {}) {
  return http_request(port, http::verb::get, target, headers);
}

/// One response envelope as received (seq_id and data kept as raw JSON text).
struct wire_reply {
  std::string seq_id;
  int64_t code = -1;
  std::string message;
  std::string data;
  std::string chunk_status;
  std::string raw;
};

inline wire_reply parse_reply(const std::string& text) {
  simdjson::dom::parser parser;
  simdjson::dom::object obj;
  // A reply echoes a seq_id as the request wrote it, which may be a number only
  // Python's json reads (NaN, an integer beyond 64 bits): read those through the
  // rewrite and take the echo from the text.
  std::optional<boxrt::json::python::rewritten> strict;
  if (parser.parse(text).get_object().get(obj) != simdjson::SUCCESS) {
    strict = boxrt::json::python::rewrite(text);
    if (!strict || parser.parse(strict->text).get_object().get(obj) != simdjson::SUCCESS)
      throw std::runtime_error("test client: reply is not a JSON object: " + text);
  }
  wire_reply r;
  r.raw = text;
  simdjson::dom::element e;
  if (strict && !strict->members.empty() && text.starts_with("{\"seq_id\":"))
    r.seq_id = std::string{strict->members.front().raw};
  else if (obj.at_key("seq_id").get(e) == simdjson::SUCCESS)
    r.seq_id = simdjson::minify(e);
  int64_t code = -1;
  if (obj.at_key("code").get_int64().get(code) == simdjson::SUCCESS)
    r.code = code;
  std::string_view s;
  if (obj.at_key("message").get_string().get(s) == simdjson::SUCCESS)
    r.message = std::string{s};
  if (obj.at_key("data").get(e) == simdjson::SUCCESS)
    r.data = simdjson::minify(e);
  if (obj.at_key("chunk_status").get_string().get(s) == simdjson::SUCCESS)
    r.chunk_status = std::string{s};
  return r;
}

/// Renders one request envelope; `context` "" leaves it out.
inline std::string request_text(int64_t seq_id, std::string_view action,
                                std::string_view data = "{}", std::string_view context = "") {
  std::string out = "{\"seq_id\":" + std::to_string(seq_id) + ",\"action\":\"";
  out.append(action).append("\",\"data\":").append(data);
  if (!context.empty())
    out.append(",\"context\":").append(context);
  out += "}";
  return out;
}

/// A tenant context of instance-a.
inline std::string context_json(std::string_view workspace, int64_t generation = 1,
                                std::string_view instance = "instance-a") {
  std::string out = "{\"instance_uuid\":\"";
  out.append(instance).append("\",\"workspace_uuid\":\"").append(workspace);
  out.append("\",\"placement_generation\":").append(std::to_string(generation)).append("}");
  return out;
}

struct ws_options {
  std::string token;  // X-LangBot-Box-Control-Token; "" = header not sent
  /// X-LangBot-Instance-Id; nullopt = header not sent.
  std::optional<std::string> instance = std::string{"instance-a"};
  bool deflate = false;  // offer permessage-deflate
  std::string target = "/rpc/ws";
  header_list extra_headers;
  /// Split outgoing messages into frames of at most this many bytes (0 = one frame).
  size_t fragment_bytes = 0;
  /// SO_RCVBUF set before connecting (0 = the kernel's), so a client that stops
  /// reading leaves replies queued in the server rather than in its own kernel.
  int receive_buffer_bytes = 0;
};

class ws_client {
 public:
  /// Connects and attempts the upgrade. A refused upgrade does not throw: is_open() is
  /// false and http_status()/http_body() tell what the server answered.
  explicit ws_client(uint16_t port, ws_options opts = {}) : ws_{ioc_} {
    auto abort = [this] { beast::get_lowest_layer(ws_).close(); };
    if (opts.receive_buffer_bytes > 0) {
      auto& sock = beast::get_lowest_layer(ws_).socket();
      sock.open(tcp::v4());
      sock.set_option(asio::socket_base::receive_buffer_size{opts.receive_buffer_bytes});
    }
    auto ec = detail::run_op(
      ioc_,
      [&](auto handler) {
        beast::get_lowest_layer(ws_).async_connect(
          tcp::endpoint{asio::ip::make_address("127.0.0.1"), port}, handler);
      },
      abort);
    if (ec)
      throw std::runtime_error("test client: connect: " + ec.message());
    if (opts.deflate) {
      websocket::permessage_deflate pmd;
      pmd.client_enable = true;
      ws_.set_option(pmd);
    }
    ws_.set_option(websocket::stream_base::decorator([opts](websocket::request_type& req) {
      if (!opts.token.empty())
        req.set("X-LangBot-Box-Control-Token", opts.token);
      if (opts.instance)
        req.set("X-LangBot-Instance-Id", *opts.instance);
      for (const auto& [k, v] : opts.extra_headers)
        req.set(k, v);
    }));
    ws_.read_message_max(size_t{64} << 20);
    if (opts.fragment_bytes > 0) {
      ws_.auto_fragment(true);
      ws_.write_buffer_bytes(opts.fragment_bytes);
    } else {
      ws_.auto_fragment(false);
    }
    ec = detail::run_op(
      ioc_,
      [&](auto handler) { ws_.async_handshake(response_, "127.0.0.1", opts.target, handler); },
      abort);
    open_ = !ec;
    if (ec && ec != websocket::error::upgrade_declined)
      throw std::runtime_error("test client: handshake: " + ec.message());
  }

  ~ws_client() {
    beast::error_code ec;
    beast::get_lowest_layer(ws_).socket().close(ec);
  }

  ws_client(const ws_client&) = delete;
  ws_client& operator=(const ws_client&) = delete;

  bool is_open() const { return open_; }
  unsigned http_status() const { return response_.result_int(); }
  const std::string& http_body() const { return response_.body(); }
  const websocket::response_type& http_response() const { return response_; }

  /// Sends one TEXT message; returns the error (a server that hung up gives one).
  beast::error_code try_send(std::string_view text, bool binary = false) {
    ws_.binary(binary);
    return detail::run_op(
      ioc_, [&](auto handler) { ws_.async_write(asio::buffer(text.data(), text.size()), handler); },
      [this] { beast::get_lowest_layer(ws_).close(); });
  }

  void send(std::string_view text) {
    if (auto ec = try_send(text))
      throw std::runtime_error("test client: send: " + ec.message());
  }

  void send_binary(std::string_view bytes) {
    if (auto ec = try_send(bytes, true))
      throw std::runtime_error("test client: send binary: " + ec.message());
  }

  void request(int64_t seq_id, std::string_view action, std::string_view data = "{}",
               std::string_view context = "") {
    send(request_text(seq_id, action, data, context));
  }

  /// The next message, or nullopt once the connection is closed (see close_code()).
  std::optional<std::string> read() {
    beast::flat_buffer buffer;
    auto ec = detail::run_op(ioc_, [&](auto handler) { ws_.async_read(buffer, handler); },
                             [this] { beast::get_lowest_layer(ws_).close(); });
    if (ec) {
      open_ = false;
      last_error_ = ec;
      return std::nullopt;
    }
    return beast::buffers_to_string(buffer.data());
  }

  /// The next reply; throws when the connection closes first.
  wire_reply read_reply() {
    auto text = read();
    if (!text)
      throw std::runtime_error("test client: connection closed while waiting for a reply: "
                               + last_error_.message());
    return parse_reply(*text);
  }

  /// One request and its reply (nothing else may be in flight on this connection).
  wire_reply call(int64_t seq_id, std::string_view action, std::string_view data = "{}",
                  std::string_view context = "") {
    request(seq_id, action, data, context);
    return read_reply();
  }

  /// Reads until the server closes; returns its close code (0 when it sent no close frame).
  /// Messages that arrive before the close are collected in `before`.
  uint16_t wait_closed(std::vector<std::string>* before = nullptr) {
    while (auto text = read())
      if (before)
        before->push_back(std::move(*text));
    return ws_.reason().code;
  }

  const websocket::close_reason& close_reason() const { return ws_.reason(); }
  beast::error_code last_error() const { return last_error_; }

  /// Closes cleanly (1000).
  void close() {
    if (!open_)
      return;
    open_ = false;
    detail::run_op(ioc_, [&](auto handler) { ws_.async_close(websocket::close_code::normal, handler); },
                   [this] { beast::get_lowest_layer(ws_).close(); });
  }

 private:
  asio::io_context ioc_;
  websocket::stream<beast::tcp_stream> ws_;
  websocket::response_type response_;
  bool open_ = false;
  beast::error_code last_error_;
};

} // namespace boxrt::test
