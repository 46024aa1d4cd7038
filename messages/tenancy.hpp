// Workspace namespaces and the logical -> physical session-id mapping (protocol.md
// §4.1), made collision-free as the contract (§2, §4.6) requires.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "messages/error.hpp"

namespace boxrt {

/// Lower-case hex SHA-256 of `data`.
std::string sha256_hex(std::string_view data);

/// The key of one workspace of one instance: instance + "\0" + workspace (the
/// directory's map key, the admission store's record key). Both ids are at most 256
/// characters and hold no NUL (messages/codec), so the key splits back unambiguously.
std::string workspace_key(std::string_view instance_uuid, std::string_view workspace_uuid);

/// The instance and workspace of a workspace_key; nullopt when `key` is not one.
std::optional<std::pair<std::string_view, std::string_view>> split_workspace_key(std::string_view key);

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
