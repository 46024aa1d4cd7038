// What wire tests observe of a running boxd from outside: memory, descriptors, log.
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "tests/wire/boxd_process.hpp"

namespace boxrt::test {

/// Resident set of `pid` in MiB.
inline size_t rss_mib(pid_t pid) {
  std::ifstream status{"/proc/" + std::to_string(pid) + "/status"};
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0)
      return std::stoul(line.substr(6)) / 1024;
  return 0;
}

inline uint16_t port_of(const boxd_process& boxd) {
  return static_cast<uint16_t>(std::stoi(boxd.url().substr(boxd.url().rfind(':') + 1)));
}

inline bool log_has(const boxd_process& boxd, const std::string& needle) {
  std::ifstream log{boxd.dir() / "boxd.log"};
  std::stringstream text;
  text << log.rdbuf();
  return text.str().find(needle) != std::string::npos;
}

/// Polls `done()` until it holds or 30 s pass.
template <class Pred>
bool eventually(Pred done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{30};
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }
  return true;
}

/// Descriptors `pid` has open.
inline size_t open_fds(pid_t pid) {
  size_t n = 0;
  std::error_code err;
  for (auto it = std::filesystem::directory_iterator{"/proc/" + std::to_string(pid) + "/fd", err};
       !err && it != std::filesystem::directory_iterator{}; it.increment(err))
    ++n;
  return n;
}

} // namespace boxrt::test
