// The prologue every forked child runs before it execs (the sandbox launcher, boxrt-init's
// commands and managed processes, host subprocesses). Header-only and async-signal-safe:
// boxrt-init, which has only the standard library and POSIX, uses it too.
#pragma once

#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace boxrt::child {

/// Every signal back to its default disposition (an ignored SIGPIPE is inherited
/// across execve) and nothing blocked.
inline void reset_signals() noexcept {
  struct sigaction dfl{};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP)
      ::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

/// Writes `value` ("0", "-999") to /proc/self/oom_score_adj; best effort.
inline void set_oom_score_adj(const char* value) noexcept {
  if (int fd = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC); fd >= 0) {
    (void)!::write(fd, value, std::strlen(value));
    ::close(fd);
  }
}

} // namespace boxrt::child
