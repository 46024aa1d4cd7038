// Blocking child-process runner for the worker pool: fork/execve with an exact
// environment, capped capture of stdout/stderr, timeout and interrupt that kill the
// whole process group (backends-and-skills.md §2, "Shared subprocess rules").
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <utility>
#include <vector>

#include "messages/models.hpp"

namespace boxrt {

/// What to run and how.
struct run_options {
  /// argv[0] is the program: a path when it holds a '/', else looked up on the PATH of
  /// the calling process (not on `env`).
  std::vector<std::string> argv;
  /// The child's whole environment, "KEY=VALUE" each; nothing is inherited.
  std::vector<std::string> env;
  /// Working directory of the child; "" keeps the caller's.
  std::string cwd;
  /// Wall-clock limit; zero or negative means none.
  std::chrono::milliseconds timeout{30000};
  /// Bytes kept per stream; the rest is counted and dropped (clip_captured).
  int64_t max_output_bytes = 1048576;
  /// Extra descriptors handed to the child: parent fd -> child fd (>= 3).
  std::vector<std::pair<int, int>> inherit_fds;
};

/// How a run ended.
struct run_outcome {
  /// False when the program could not be started; `error` says why.
  bool started = false;
  std::string error;
  /// The timeout passed and the process group was killed; exit_code is then -1.
  bool timed_out = false;
  /// The interrupt flag was seen and the process group was killed.
  bool interrupted = false;
  /// Exit status, or 128 + signal when the child was killed by a signal.
  int exit_code = -1;
  /// Decoded, stripped and clipped with clip_captured (backends/linux/output.hpp). On timeout
  /// an empty stderr becomes "Command timed out after <timeout_sec> seconds.".
  std::string stdout_text;
  std::string stderr_text;
  /// Wall time of the whole run, in whole milliseconds.
  int64_t duration_ms = 0;
};

/// Runs a child to completion (or timeout, or interrupt) and captures its output.
///
/// The child gets its own process group, PR_SET_PDEATHSIG SIGKILL (tied to the calling
/// thread, which stays blocked here until the child is reaped), stdin from /dev/null,
/// default signal dispositions, an empty signal mask and no descriptors but 0-2 and
/// `inherit_fds`. When the child exits, its process group is killed too, so a
/// backgrounded grandchild holding the pipes cannot keep the runner waiting.
/// `interrupted` is polled every 20 ms; once it is set the process group is killed and
/// the call returns.
run_outcome run_process(const run_options& options,
                        const std::atomic<bool>* interrupted = nullptr);

/// The exec result of a finished run of `spec` (the run started): timed out (status
/// timed_out, exit -1), else its exit code, with "interrupted" for an empty stderr of an
/// interrupted run; the duration counts from `started`.
exec_result exec_result_of(run_outcome run, const box_spec& spec, std::string backend_name,
                           std::chrono::steady_clock::time_point started);

/// SIGKILLs every process of process group `pgid` (no-op for pgid <= 1).
void kill_process_group(pid_t pgid) noexcept;

/// Quotes `text` for a POSIX shell: always wrapped in single quotes, an inner single
/// quote becomes '"'"' (so "a'b" -> 'a'"'"'b', "" -> '').
std::string shell_quote(std::string_view text);

} // namespace boxrt
