// Helpers for managed-process tests: reading a process's stdout as the relay will (a
// non-blocking descriptor, poll), and waiting on a real condition with a bound.
#pragma once

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <string_view>

#include "backends/backend.hpp"

namespace boxrt::testing {

/// Reads `fd` (non-blocking) until `needle` has arrived, end of file or `timeout`;
/// returns everything read.
inline std::string read_until(int fd, std::string_view needle,
                              std::chrono::milliseconds timeout = std::chrono::seconds{10}) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string got;
  char buf[4096];
  while (got.find(needle) == std::string::npos) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0)
      continue;
    auto n = ::read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
      continue;
    if (n <= 0)
      break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

/// Reads `fd` until end of file (every writer gone) or `timeout`; true at end of file.
inline bool wait_eof(int fd, std::chrono::milliseconds timeout = std::chrono::seconds{10}) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0)
      continue;
    auto n = ::read(fd, buf, sizeof buf);
    if (n == 0)
      return true;
    if (n < 0 && errno != EAGAIN && errno != EINTR)
      return false;
  }
}

/// Checks `pred` until it holds or `timeout` passes, waiting a millisecond between
/// checks (the condition is observed, never assumed after a fixed sleep).
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds{10}) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline)
      return false;
    ::poll(nullptr, 0, 1);
  }
  return true;
}

/// What tests compare exit codes as: `running` while exit_code() is nullopt.
inline constexpr int64_t running = -1000;

inline int64_t code_of(managed_process& p) {
  return p.exit_code().value_or(running);
}

/// The exit code once the process has ended, waiting at most `timeout`; else `running`.
inline int64_t exit_within(managed_process& p, std::chrono::milliseconds timeout = std::chrono::seconds{10}) {
  eventually([&] { return p.exit_code().has_value(); }, timeout);
  return code_of(p);
}

} // namespace boxrt::testing
