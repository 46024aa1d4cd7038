// Long-running host helpers of a sandbox (its user-mode network stack): started with
// only the descriptors they need, killed and reaped when their owner goes.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "messages/base/unique_fd.hpp"
#include "messages/error.hpp"

namespace boxrt {

class helper_process {
 public:
  /// Starts argv[0] (looked up on PATH) in a session of its own with stdin and stdout on
  /// /dev/null, stderr kept for error_text(), and `fds` (parent fd -> child fd, >= 3).
  static result<std::unique_ptr<helper_process>> start(const std::vector<std::string>& argv,
                                                       const std::vector<std::pair<int, int>>& fds);
  ~helper_process();
  helper_process(const helper_process&) = delete;
  helper_process& operator=(const helper_process&) = delete;

  pid_t pid() const { return pid_; }

  /// True while the process runs (its pidfd says so). Non-blocking.
  bool running() const;

  /// What it wrote to stderr so far (at most 4 KiB, non-blocking).
  std::string error_text();

  /// SIGKILL and reap. Idempotent.
  void stop();

  /// Waits for the process to end by itself, at most `timeout_ms`, then stops it;
  /// returns its exit status (128 + signal when killed, -1 when it had to be stopped).
  int wait(int timeout_ms);

 private:
  helper_process() = default;
  pid_t pid_ = -1;
  unique_fd pidfd_;
  unique_fd stderr_;
};

} // namespace boxrt
