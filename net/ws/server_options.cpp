#include "net/ws/server_options.hpp"

#include <arpa/inet.h>

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
