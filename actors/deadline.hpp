// How long a request between boxd's actors may take (docs/architecture.md "Deadlines"):
// the action's own time limit (an exec's timeout_sec; none for other actions) plus
// box.limits.action_margin_sec. No request between actors waits forever: one that runs
// past its deadline is answered with the action's name and "timed out inside the
// runtime" (BoxRuntimeUnavailableError, a boxd extension).
#pragma once

#include <algorithm>
#include <chrono>
#include <string>
#include <string_view>

#include "messages/error.hpp"
#include "messages/models.hpp"
#include "messages/requests.hpp"

namespace boxrt {

/// What an expired request between actors reads as before the action's name is known.
inline constexpr std::string_view request_timed_out_text = "Box runtime request timed out";

inline std::chrono::seconds action_deadline(const runtime_limits& limits) {
  return std::chrono::seconds{std::max<int64_t>(1, limits.action_margin_sec)};
}

template <class Request>
std::chrono::seconds action_deadline(const runtime_limits& limits, const Request&) {
  return action_deadline(limits);
}

inline std::chrono::seconds action_deadline(const runtime_limits& limits, const exec_request& r) {
  return action_deadline(limits) + std::chrono::seconds{std::clamp<int64_t>(r.spec.timeout_sec, 0, 86400)};
}

/// A streamed exec may also wait for its consumer's window until its timeout, then end
/// its command (TERM, the grace, KILL, a few seconds for the sandbox to answer).
inline std::chrono::seconds action_deadline(const runtime_limits& limits, const exec_stream_request& r) {
  return action_deadline(limits, r.exec)
         + std::chrono::seconds{std::clamp<int64_t>(r.params.stop_grace_ms / 1000, 0, 3600) + 10};
}

/// True for the error an expired request between actors leaves (from_caf_error's).
inline bool is_request_timeout(const box_error& e) {
  return e.code == ec::runtime_unavailable && e.message == request_timed_out_text;
}

/// The answer of an action whose request between actors expired.
inline box_error timed_out_inside(std::string_view action) {
  return box_error{ec::runtime_unavailable, std::string{action} + " timed out inside the runtime"};
}

} // namespace boxrt
