// Workspace namespaces and collision-free physical session ids (protocol.md §4.1).
#include "messages/tenancy.hpp"

#include <openssl/evp.h>

#include "messages/base/hex.hpp"
#include "messages/base/json.hpp"
#include "messages/base/pytext.hpp"

namespace boxrt {

namespace {

bool is_safe_char(char c) noexcept {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'
         || c == '.' || c == '-';
}

} // namespace

std::string sha256_hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr) != 1)
    return {};
  return hex_of({reinterpret_cast<const char*>(md), len});
}

std::string workspace_key(std::string_view instance_uuid, std::string_view workspace_uuid) {
  std::string key;
  key.reserve(instance_uuid.size() + 1 + workspace_uuid.size());
  key.append(instance_uuid).push_back('\0');
  key.append(workspace_uuid);
  return key;
}

std::optional<std::pair<std::string_view, std::string_view>> split_workspace_key(std::string_view key) {
  auto sep = key.find('\0');
  if (sep == std::string_view::npos)
    return std::nullopt;
  return std::pair{key.substr(0, sep), key.substr(sep + 1)};
}

std::string box_namespace(std::string_view instance_uuid, std::string_view workspace_uuid) {
  return "ws-" + sha256_hex(workspace_key(instance_uuid, workspace_uuid)).substr(0, 24);
}

std::string runtime_namespace(std::string_view instance_uuid, std::string_view workspace_uuid,
                              int64_t generation) {
  return box_namespace(instance_uuid, workspace_uuid) + "-g" + std::to_string(generation);
}

result<std::string> safe_session_suffix(std::string_view logical) {
  const std::string_view stripped = py::strip(logical);
  if (stripped.empty())
    return box_error{ec::value, "Box session_id must not be empty"};
  std::string safe;
  safe.reserve(stripped.size());
  bool in_run = false;
  for (char c : stripped) {
    if (is_safe_char(c)) {
      safe += c;
      in_run = false;
    } else if (!in_run) {
      safe += '-';
      in_run = true;
    }
  }
  size_t first = safe.find_first_not_of('-');
  if (first == std::string::npos)
    return box_error{ec::value, "Box session_id must contain a valid character"};
  size_t last = safe.find_last_not_of('-');
  safe = safe.substr(first, last - first + 1);
  // '~' is never produced by sanitising, so a suffixed id cannot equal a plain one.
  if (safe != stripped)
    safe += "~" + sha256_hex(stripped).substr(0, 8);
  return safe;
}

result<std::string> physical_session_id(std::string_view instance_uuid,
                                        std::string_view workspace_uuid, int64_t generation,
                                        std::string_view logical) {
  auto suffix = safe_session_suffix(logical);
  if (!suffix)
    return suffix.error();
  return runtime_namespace(instance_uuid, workspace_uuid, generation) + "-" + suffix.value();
}

} // namespace boxrt
