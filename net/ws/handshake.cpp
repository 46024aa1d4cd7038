#include "net/ws/handshake.hpp"

#include <vector>

#include <openssl/crypto.h>

#include "messages/base/json.hpp"
#include "messages/base/pytext.hpp"

namespace boxrt::net {

bool constant_time_equal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

bool valid_instance_id(std::string_view id) {
  auto alnum = [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
  };
  if (id.empty() || id.size() > 128 || !alnum(id.front()))
    return false;
  for (char c : id)
    if (!alnum(c) && c != '.' && c != '_' && c != ':' && c != '-')
      return false;
  return true;
}

std::optional<std::string> percent_decode(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    if (i + 2 >= in.size())
      return std::nullopt;
    int hi = json::hex_digit(in[i + 1]);
    int lo = json::hex_digit(in[i + 2]);
    if (hi < 0 || lo < 0)
      return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

std::optional<std::pair<std::string, std::string>> relay_target(std::string_view path) {
  constexpr std::string_view prefix = "/v1/sessions/";
  if (path.substr(0, prefix.size()) != prefix)
    return std::nullopt;
  path.remove_prefix(prefix.size());
  std::vector<std::string_view> parts;
  while (parts.size() <= 4) {
    auto slash = path.find('/');
    parts.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos)
      break;
    path.remove_prefix(slash + 1);
  }
  for (auto part : parts)
    if (part.empty())
      return std::nullopt;
  if (parts.size() < 3 || parts.size() > 4 || parts[1] != "managed-process" || parts.back() != "ws")
    return std::nullopt;
  auto session = percent_decode(parts[0]);
  auto process = parts.size() == 4 ? percent_decode(parts[2]) : std::optional<std::string>{"default"};
  if (!session || !process)
    return std::nullopt;
  return std::pair{std::move(*session), std::move(*process)};
}

std::optional<int64_t> canonical_generation(std::string_view text) {
  text = py::strip(text);
  if (text.empty() || text.size() > 18 || text.front() == '0')
    return std::nullopt;
  int64_t n = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return std::nullopt;
    n = n * 10 + (c - '0');
  }
  return n;
}

bool offers_mcp(std::string_view header) {
  while (!header.empty()) {
    auto comma = header.find(',');
    if (py::strip(header.substr(0, comma)) == "mcp")
      return true;
    if (comma == std::string_view::npos)
      break;
    header.remove_prefix(comma + 1);
  }
  return false;
}

std::optional<std::string> check_relay_headers(const relay_headers& h, std::string_view token,
                                               std::string_view pinned, std::string session,
                                               std::string process, relay_request& out) {
  if (!token.empty() && (!h.token || !constant_time_equal(*h.token, token)))
    return "missing or wrong control token";
  auto instance = std::string{py::strip(h.instance)};
  if (!valid_instance_id(instance))
    return "missing or malformed instance id";
  // The relay never pins: an RPC handshake must have done so.
  if (pinned.empty() || !constant_time_equal(pinned, instance))
    return "instance " + instance + " is not the pinned instance";
  auto workspace = std::string{py::strip(h.workspace)};
  const size_t chars = py::code_points(workspace);
  if (chars == 0 || chars > 256)
    return "missing or oversized workspace id";
  auto generation = canonical_generation(h.generation);
  if (!generation)
    return "malformed placement generation";
  out.instance_uuid = std::move(instance);
  out.workspace_uuid = std::move(workspace);
  out.generation = *generation;
  out.session_id = std::move(session);
  out.process_id = std::move(process);
  return std::nullopt;
}

} // namespace boxrt::net
