// What every backend's managed processes share (protocol.md §4.7): the rolling stderr
// preview, a base class for a process reached through three descriptors, and the
// unsandboxed host child used by the process and scripted backends.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "backends/backend.hpp"

namespace boxrt {

/// The rolling stderr preview of §4.7: each chunk is decoded (a broken UTF-8 sequence
/// becomes U+FFFD) and right-stripped, empty chunks are skipped, and the oldest chunks
/// are evicted while their characters plus one per chunk exceed `max_chars`. The text is
/// the kept chunks joined by '\n'. Not thread-safe.
class stderr_preview_buffer {
 public:
  static constexpr size_t max_chars = 4000;

  void add(std::string_view chunk);
  std::string text() const;

 private:
  struct chunk {
    std::string text;
    size_t chars = 0;
  };
  std::deque<chunk> chunks_;
  size_t chars_ = 0;
};

/// A managed process reached through its stdin, stdout and stderr descriptors. Derived
/// classes say how it exits and how it is signalled; this class writes stdin, drains
/// stderr on a thread of its own into the preview and runs the termination sequence.
class fd_managed_process : public managed_process {
 public:
  ~fd_managed_process() override;

  int stdout_fd() const override { return out_fd_; }
  bool write_stdin(std::string_view data) override;
  std::optional<int64_t> exit_code() override;
  std::string stderr_preview() const override;
  void terminate(std::chrono::milliseconds grace) override;

 protected:
  /// Takes the three descriptors (stdin may be -1: already closed). stdout is made
  /// non-blocking; stderr is drained from now on.
  fd_managed_process(int in_fd, int out_fd, int err_fd);

  /// The exit code if the process has ended; non-blocking. Called under a lock.
  virtual std::optional<int64_t> poll_exit() = 0;
  /// Blocks until poll_exit() would answer or `deadline` passes.
  virtual void wait_exit(std::chrono::steady_clock::time_point deadline) = 0;
  /// Sends `sig` to the process group; a no-op once it has ended.
  virtual void send_signal(int sig) = 0;

  /// Closes stdin (the process reads end of input); wakes a blocked writer.
  void close_stdin();

 private:
  void drain_stderr();

  mutable std::mutex mtx_;        // preview_ and exit_
  std::mutex stdin_mtx_;          // in_fd_ (one writer at a time)
  std::mutex terminate_mtx_;
  int in_fd_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  int stdin_wake_ = -1;           // eventfd: readable once stdin is closing
  int drain_stop_ = -1;           // eventfd: readable once the drain thread must end
  std::optional<int64_t> exit_;
  stderr_preview_buffer preview_;
  std::thread drainer_;
};

/// What to start on the host (process and scripted backends).
struct host_process_options {
  /// argv[0] is looked up on the PATH of `env` (execvp), as a shell would.
  std::vector<std::string> argv;
  /// The whole environment, KEY=VALUE each.
  std::vector<std::string> env;
  /// Created (mkdir -p) and entered by the child.
  std::string cwd;
};

/// An unsandboxed host child in a session of its own (setsid: its own process group).
class host_managed_process final : public fd_managed_process {
 public:
  /// Forks and execs; a start failure (fork, pipes) is an error, while a command that
  /// cannot run exits 127 (126 when not executable, 1 when cwd fails) with the reason
  /// on its stderr.
  static result<std::shared_ptr<host_managed_process>> start(const host_process_options& options);

  ~host_managed_process() override;

  pid_t pid() const noexcept { return pid_; }

  /// SIGKILLs the process group (session teardown); non-blocking.
  void kill_now();

  host_managed_process(pid_t pid, int pidfd, int in_fd, int out_fd, int err_fd);

 protected:
  std::optional<int64_t> poll_exit() override;
  void wait_exit(std::chrono::steady_clock::time_point deadline) override;
  void send_signal(int sig) override;

 private:
  std::mutex pid_mtx_;
  pid_t pid_;
  int pidfd_;
  bool reaped_ = false;
  int status_ = 0;
};

/// Weak references to the managed processes of one session, for its teardown.
class host_process_list {
 public:
  void add(const std::shared_ptr<host_managed_process>& p);
  /// SIGKILLs every process still running.
  void kill_all();

 private:
  std::mutex mtx_;
  std::vector<std::weak_ptr<host_managed_process>> items_;
};

} // namespace boxrt
