// The socket-free rules of the HTTP handshakes (protocol.md §1.3 and §1.4): header
// values, instance ids, relay paths, placement generations. Plain C++ (no Beast, no
// CAF), so the fuzz target and the tests reach exactly what the server runs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "messages/requests.hpp"

namespace boxrt::net {

/// Equal-length secrets compared without an early exit.
bool constant_time_equal(std::string_view a, std::string_view b);

/// `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$` (protocol.md §1.3).
bool valid_instance_id(std::string_view id);

/// One path segment with its %XX escapes decoded (as the reference's router does);
/// nullopt for a malformed escape.
std::optional<std::string> percent_decode(std::string_view in);

/// The (physical session id, process id) of a relay path (protocol.md §1.2):
/// `/v1/sessions/{session_id}/managed-process/{process_id}/ws`, or the legacy
/// `/v1/sessions/{session_id}/managed-process/ws` whose process is "default".
std::optional<std::pair<std::string, std::string>> relay_target(std::string_view path);

/// X-LangBot-Placement-Generation (§1.4 check 3): after the strip it parses as an int
/// that formats back to the same text, and is at least 1. Longer than int64 counts as
/// invalid: the reference would accept it here and then fail the fence with the same 401.
std::optional<int64_t> canonical_generation(std::string_view text);

/// True when the client offers `mcp` in Sec-WebSocket-Protocol (a comma-separated list).
bool offers_mcp(std::string_view header);

/// The header values a relay handshake carries (absent headers are nullopt).
struct relay_headers {
  std::optional<std::string_view> token;
  std::string_view instance;
  std::string_view workspace;
  std::string_view generation;
};

/// Checks 1 to 3 of protocol.md §1.4 (the directory runs 4 to 9) for the relay of
/// (`session`, `process`). `token` is the configured control token ("" for none) and
/// `pinned` the pinned instance ("" while none is). Returns why the handshake is
/// refused with 401 (for the log), or nullopt with `out` filled in.
std::optional<std::string> check_relay_headers(const relay_headers& h, std::string_view token,
                                               std::string_view pinned, std::string session,
                                               std::string process, relay_request& out);

} // namespace boxrt::net
