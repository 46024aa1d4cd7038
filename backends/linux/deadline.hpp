// Deadline arithmetic on spec values: a timeout in seconds may be any positive int64
// (standard mode has no ceiling), so every conversion saturates instead of wrapping.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>

namespace boxrt {

/// `seconds` as milliseconds, saturating at milliseconds::max().
inline std::chrono::milliseconds saturating_ms(int64_t seconds) {
  constexpr int64_t max_seconds = std::numeric_limits<int64_t>::max() / 1000;
  if (seconds <= 0)
    return std::chrono::milliseconds{0};
  if (seconds >= max_seconds)
    return std::chrono::milliseconds::max();
  return std::chrono::milliseconds{seconds * 1000};
}

/// `from + span`, saturating at the clock's last time point.
template <class Clock, class Rep, class Period>
typename Clock::time_point saturating_add(typename Clock::time_point from,
                                          std::chrono::duration<Rep, Period> span) {
  using tp = typename Clock::time_point;
  // `left` in the span's own unit rounds down, so a span below it converts back safely.
  auto left = std::chrono::duration_cast<std::chrono::duration<Rep, Period>>(tp::max() - from);
  if (span >= left)
    return tp::max();
  return from + std::chrono::duration_cast<typename Clock::duration>(span);
}

/// `from + seconds`, saturating.
inline std::chrono::steady_clock::time_point deadline_after(std::chrono::steady_clock::time_point from,
                                                            int64_t seconds) {
  return saturating_add<std::chrono::steady_clock>(from, saturating_ms(seconds));
}

} // namespace boxrt
