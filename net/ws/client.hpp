// A small synchronous Action-RPC client over WebSocket, for boxctl, tests and tools.
// Beast stays inside net/ws/client.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace boxrt::net {

struct client_options {
  std::string url = "ws://127.0.0.1:5410";  // ws://HOST:PORT[/rpc/ws]
  std::string token;                          // X-LangBot-Box-Control-Token ("" = none)
  std::string instance = "boxctl";            // X-LangBot-Instance-Id
};

/// One decoded response envelope.
struct rpc_response {
  int64_t seq_id = 0;
  int64_t code = 0;
  std::string message;
  std::string data_json;  // the `data` object as JSON text
};

class rpc_client {
 public:
  rpc_client();
  ~rpc_client();
  rpc_client(rpc_client&&) noexcept;
  rpc_client& operator=(rpc_client&&) noexcept;

  /// Opens the WebSocket; throws std::runtime_error naming the failure (HTTP 401 included).
  void connect(const client_options& opts);

  /// Sends one request and waits for the response with the same seq_id.
  /// `data_json` must be a JSON object; `context_json` "" means no context.
  rpc_response call(const std::string& action, const std::string& data_json,
                    const std::string& context_json = "");

  /// A streamed action (box_exec_stream, docs/streaming.md) as LangBot's SDK calls one:
  /// with flow control, acknowledging every 4 frames. `on_frame` gets each data frame's
  /// `data` as JSON text; the returned response is the error that ended the stream, or
  /// success with the last data frame (the result) as its data.
  rpc_response call_stream(const std::string& action, const std::string& data_json,
                           const std::string& context_json,
                           const std::function<void(const std::string&)>& on_frame);

  /// Sends raw text as one frame (tests of malformed input).
  void send_text(const std::string& text);

  /// Reads one frame (blocking).
  std::string read_text();

  void close();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
  int64_t next_seq_ = 1;
};

/// One plain HTTP GET of `path` on the server of opts.url, with the control token as a
/// bearer token when there is one (GET /metrics). Throws std::runtime_error when the
/// server cannot be reached.
struct http_reply {
  unsigned status = 0;
  std::string body;
};
http_reply http_get(const client_options& opts, const std::string& path);

/// Parses "ws://HOST:PORT[/path]" into host, port and path ("/rpc/ws" when none).
bool parse_ws_url(const std::string& url, std::string& host, std::string& port, std::string& path);

} // namespace boxrt::net
