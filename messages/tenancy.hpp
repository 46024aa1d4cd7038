// Workspace namespaces and the logical -> physical session-id mapping (protocol.md
// §4.1), made collision-free as the contract (§2, §4.6) requires.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "messages/error.hpp"

namespace boxrt {

/// Lower-case hex SHA-256 of `data`.
std::string sha256_hex(std::string_view data);

/// "ws-" + first 24 hex of sha256(instance + "\0" + workspace). Generation-independent.
std::string box_namespace(std::string_view instance_uuid, std::string_view workspace_uuid);

/// box_namespace + "-g" + generation.
std::string runtime_namespace(std::string_view instance_uuid, std::string_view workspace_uuid,
                              int64_t generation);

/// The sanitised form of a logical id: a strip, then each run of characters outside
/// [A-Za-z0-9_.-] becomes "-", then "-" is stripped from both ends. When sanitising
/// changed anything, "~" + the first 8 hex of sha256(stripped original) is appended so
/// two logical ids never share one physical id. Errors (ValueError):
/// "Box session_id must not be empty", "Box session_id must contain a valid character".
result<std::string> safe_session_suffix(std::string_view logical);

/// runtime_namespace + "-" + safe_session_suffix(logical).
result<std::string> physical_session_id(std::string_view instance_uuid,
                                        std::string_view workspace_uuid, int64_t generation,
                                        std::string_view logical);

} // namespace boxrt
