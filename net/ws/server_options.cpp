#include "net/ws/server_options.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "messages/base/pytext.hpp"
#include "net/ws/handshake.hpp"

namespace boxrt::net {

namespace {

/// "localhost", 127.0.0.0/8, ::1 or an IPv4-mapped 127.0.0.0/8 address (brackets allowed).
bool loopback_host(std::string host) {
  std::string lower;
  for (char c : host)
    lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (lower == "localhost")
    return true;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  in_addr v4{};
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1)
    return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (::inet_pton(AF_INET6, host.c_str(), &v6) != 1)
    return false;
  if (IN6_IS_ADDR_LOOPBACK(&v6))
    return true;
  return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
}

} // namespace

stream_params stream_settings(const server_options& opts) {
  constexpr int64_t sdk_frame_bytes = 1 << 20;  // the SDK's MAX_STREAM_FRAME_BYTES
  constexpr int64_t envelope_bytes = 512;       // seq_id, code, message, index, keys
  const int64_t frame = std::min<int64_t>(sdk_frame_bytes, static_cast<int64_t>(opts.max_message_bytes));
  stream_params p;
  p.keepalive_ms = static_cast<int64_t>(opts.stream_keepalive_ms);
  p.max_output_bytes = static_cast<int64_t>(opts.max_stream_output_bytes);
  p.stop_grace_ms = static_cast<int64_t>(opts.stream_stop_grace_ms);
  p.max_chunk_bytes = std::clamp<int64_t>((frame - envelope_bytes) / 6, 4, 128 * 1024);
  return p;
}

std::string validate(const server_options& opts) {
  const auto& token = opts.control_token;
  if (!token.empty()) {
    bool space = false;
    for (size_t i = 0; i < token.size() && !space;)
      space = py::isspace(py::decode_utf8(token, i));
    if (py::code_points(token) < 32 || space)
      return "LANGBOT_BOX_CONTROL_TOKEN must be a non-whitespace secret of at least 32 characters";
  } else if (!loopback_host(opts.host)) {
    return "a control token is required to listen on a non-loopback address " + opts.host;
  }
  return {};
}

} // namespace boxrt::net
