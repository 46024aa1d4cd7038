// run_process: everything the child needs is prepared before fork, the child makes only
// async-signal-safe calls, and a CLOEXEC pipe tells the parent whether execve worked.
#include "backends/linux/subprocess.hpp"
#include "backends/linux/child.hpp"
#include "backends/linux/deadline.hpp"
#include "messages/base/unique_fd.hpp"
#include "backends/linux/output.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <optional>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace boxrt {

namespace {

using clock_type = std::chrono::steady_clock;

/// How long the runner keeps reading after the child is gone: only a process that left
/// the child's process group can still hold the pipes open by then.
constexpr auto drain_grace = std::chrono::milliseconds{2000};

/// How often the interrupt flag (and, without pidfd, the child) is polled.
constexpr auto poll_tick = std::chrono::milliseconds{20};

constexpr size_t chunk_bytes = 64 * 1024;


/// What the child reports through the error pipe when it fails before execve.
struct child_failure {
  int step = 0;
  int err = 0;
};

enum failure_step : int { step_setup = 1, step_chdir = 2, step_exec = 3 };

/// Everything the child touches, built before fork so the child never allocates.
struct child_plan {
  const char* path = nullptr;
  std::vector<char*> argv;
  std::vector<char*> envp;
  const char* cwd = nullptr;
  std::vector<int> sources;       // parent descriptors ...
  std::vector<int> targets;       // ... and where the child gets them
  std::vector<int> high;          // scratch: copies above every target
  std::vector<int> keep_sorted;   // targets >= 3, sorted, unique
  int min_high = 3;
  int error_fd = -1;
  pid_t parent = 0;
  int fd_limit = 1024;
};

[[noreturn]] void child_fail(int fd, int step) noexcept {
  child_failure failure{step, errno};
  auto unused = ::write(fd, &failure, sizeof failure);
  (void)unused;
  ::_exit(127);
}

/// Marks every descriptor >= 3 that is not in `keep` close-on-exec (the error pipe must
/// stay open until execve, and it already is CLOEXEC).
void cloexec_all_but(const child_plan& plan) noexcept {
  unsigned int low = 3;
  auto mark = [&](unsigned int from, unsigned int to) noexcept {
    if (from > to)
      return;
    if (::close_range(from, to, CLOSE_RANGE_CLOEXEC) == 0)
      return;
    auto last = std::min<unsigned int>(to, static_cast<unsigned int>(plan.fd_limit));
    for (auto fd = from; fd <= last && fd < static_cast<unsigned int>(plan.fd_limit); ++fd)
      ::fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
  };
  for (auto fd : plan.keep_sorted) {
    if (fd > 0)
      mark(low, static_cast<unsigned int>(fd) - 1);
    low = static_cast<unsigned int>(fd) + 1;
  }
  mark(low, ~0U);
}

[[noreturn]] void child_main(child_plan& plan, int error_pipe) noexcept {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != plan.parent)
    ::_exit(127); // the parent thread died before the death signal was armed
  // Defaults for every signal: the parent may ignore SIGPIPE, and a handler the
  // parent installed means nothing after execve anyway.
  child::reset_signals();
  // Lift every source above all targets first, so one dup2 cannot clobber another
  // source; the copies are CLOEXEC and vanish at execve.
  auto err_fd = ::fcntl(error_pipe, F_DUPFD_CLOEXEC, plan.min_high);
  if (err_fd < 0)
    ::_exit(127);
  for (size_t i = 0; i < plan.sources.size(); ++i) {
    plan.high[i] = ::fcntl(plan.sources[i], F_DUPFD_CLOEXEC, plan.min_high);
    if (plan.high[i] < 0)
      child_fail(err_fd, step_setup);
  }
  for (size_t i = 0; i < plan.sources.size(); ++i)
    if (::dup2(plan.high[i], plan.targets[i]) < 0)
      child_fail(err_fd, step_setup);
  cloexec_all_but(plan);
  if (plan.cwd != nullptr && ::chdir(plan.cwd) != 0)
    child_fail(err_fd, step_chdir);
  ::execve(plan.path, plan.argv.data(), plan.envp.data());
  child_fail(err_fd, step_exec);
}

/// Finds `name` on the caller's PATH, as execvp would (but before fork).
std::string find_program(const std::string& name) {
  if (name.find('/') != std::string::npos)
    return name;
  const char* raw = std::getenv("PATH");
  std::string_view path = raw != nullptr ? raw : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    auto colon = path.find(':');
    auto dir = path.substr(0, colon);
    auto candidate = (dir.empty() ? std::string{"."} : std::string{dir}) + "/" + name;
    struct stat st{};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode)
        && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    if (colon == std::string_view::npos)
      return {};
    path.remove_prefix(colon + 1);
  }
}

std::string errno_text(int err) {
  return std::strerror(err);
}

/// "30", or "0.5" for a timeout that is not whole seconds.
std::string seconds_text(std::chrono::milliseconds timeout) {
  auto ms = timeout.count();
  auto text = std::to_string(ms / 1000);
  if (auto frac = ms % 1000; frac != 0) {
    auto digits = std::to_string(1000 + frac).substr(1);
    while (digits.back() == '0')
      digits.pop_back();
    text += "." + digits;
  }
  return text;
}

/// One captured stream: the kept prefix and the count of every byte seen.
struct capture {
  std::string kept;
  uint64_t total = 0;

  void add(const char* data, size_t n, size_t cap) {
    total += n;
    if (kept.size() < cap)
      kept.append(data, std::min(n, cap - kept.size()));
  }
};

int decode_status(int status) noexcept {
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return -1;
}

int open_pidfd(pid_t pid) noexcept {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  return -1;
#endif
}

/// True once `pid` has exited; the zombie is left for waitpid, so its process group id
/// cannot be reused before the group is killed.
bool exited_without_reaping(pid_t pid) noexcept {
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0)
    return errno == ECHILD;
  return info.si_pid == pid;
}

int reap(pid_t pid) noexcept {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR)
      return -1;
  }
  return decode_status(status);
}

} // namespace

void kill_process_group(pid_t pgid) noexcept {
  if (pgid > 1)
    ::kill(-pgid, SIGKILL);
}

exec_result exec_result_of(run_outcome run, const box_spec& spec, std::string backend_name,
                           std::chrono::steady_clock::time_point started) {
  exec_result out;
  out.session_id = spec.session_id;
  out.backend_name = std::move(backend_name);
  if (run.timed_out) {
    out.status = exec_status::timed_out;
    out.exit_code = -1;
  } else {
    out.exit_code = run.exit_code;
    if (run.interrupted && run.stderr_text.empty())
      run.stderr_text = "interrupted";
  }
  out.stdout_text = std::move(run.stdout_text);
  out.stderr_text = std::move(run.stderr_text);
  out.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - started)
                      .count();
  return out;
}

std::string shell_quote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out += '\'';
  for (auto c : text) {
    if (c == '\'')
      out += "'\"'\"'";
    else
      out += c;
  }
  out += '\'';
  return out;
}

run_outcome run_process(const run_options& options, const std::atomic<bool>* interrupted) {
  auto started_at = clock_type::now();
  run_outcome out;
  auto finish = [&]() -> run_outcome {
    out.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        clock_type::now() - started_at)
                        .count();
    return std::move(out);
  };
  auto fail = [&](std::string why) {
    out.error = std::move(why);
    return finish();
  };
  if (options.argv.empty())
    return fail("no program to run (empty argv)");
  for (const auto& [from, to] : options.inherit_fds)
    if (to < 3 || from < 0)
      return fail("inherited descriptors must map onto child descriptors >= 3");

  auto path = find_program(options.argv.front());
  if (path.empty())
    return fail("executable not found on PATH: " + options.argv.front());

  unique_fd dev_null{::open("/dev/null", O_RDONLY | O_CLOEXEC)};
  int out_pipe[2];
  int err_pipe[2];
  int status_pipe[2];
  if (dev_null.get() < 0)
    return fail("cannot open /dev/null: " + errno_text(errno));
  if (::pipe2(out_pipe, O_CLOEXEC) != 0)
    return fail("cannot create a pipe: " + errno_text(errno));
  unique_fd out_r{out_pipe[0]}, out_w{out_pipe[1]};
  if (::pipe2(err_pipe, O_CLOEXEC) != 0)
    return fail("cannot create a pipe: " + errno_text(errno));
  unique_fd err_r{err_pipe[0]}, err_w{err_pipe[1]};
  if (::pipe2(status_pipe, O_CLOEXEC) != 0)
    return fail("cannot create a pipe: " + errno_text(errno));
  unique_fd status_r{status_pipe[0]}, status_w{status_pipe[1]};

  child_plan plan;
  plan.path = path.c_str();
  for (const auto& arg : options.argv)
    plan.argv.push_back(const_cast<char*>(arg.c_str()));
  plan.argv.push_back(nullptr);
  for (const auto& kv : options.env)
    plan.envp.push_back(const_cast<char*>(kv.c_str()));
  plan.envp.push_back(nullptr);
  plan.cwd = options.cwd.empty() ? nullptr : options.cwd.c_str();
  plan.sources = {dev_null.get(), out_w.get(), err_w.get()};
  plan.targets = {0, 1, 2};
  for (const auto& [from, to] : options.inherit_fds) {
    plan.sources.push_back(from);
    plan.targets.push_back(to);
  }
  plan.high.resize(plan.sources.size(), -1);
  for (auto t : plan.targets) {
    plan.min_high = std::max(plan.min_high, t + 1);
    if (t >= 3)
      plan.keep_sorted.push_back(t);
  }
  std::sort(plan.keep_sorted.begin(), plan.keep_sorted.end());
  plan.keep_sorted.erase(std::unique(plan.keep_sorted.begin(), plan.keep_sorted.end()),
                         plan.keep_sorted.end());
  plan.parent = ::getpid();
  if (struct rlimit lim{}; ::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
    plan.fd_limit = static_cast<int>(std::min<rlim_t>(lim.rlim_cur, INT_MAX));

  auto cap = static_cast<size_t>(std::max<int64_t>(options.max_output_bytes, 0));
  auto pid = ::fork();
  if (pid < 0)
    return fail("fork failed: " + errno_text(errno));
  if (pid == 0)
    child_main(plan, status_w.get());

  // Also from the parent, so a kill(-pid) can never miss a child not yet in its group.
  ::setpgid(pid, pid);
  dev_null.reset();
  out_w.reset();
  err_w.reset();
  status_w.reset();

  child_failure failure;
  ssize_t got = 0;
  do {
    got = ::read(status_r.get(), &failure, sizeof failure);
  } while (got < 0 && errno == EINTR);
  status_r.reset();
  if (got == static_cast<ssize_t>(sizeof failure)) {
    reap(pid);
    switch (failure.step) {
      case step_chdir:
        return fail("cannot change directory to " + options.cwd + ": " + errno_text(failure.err));
      case step_exec:
        return fail("cannot execute " + path + ": " + errno_text(failure.err));
      default:
        return fail("cannot set up the child's descriptors: " + errno_text(failure.err));
    }
  }
  out.started = true;

  unique_fd pidfd{open_pidfd(pid)};
  auto has_deadline = options.timeout.count() > 0;
  auto deadline = saturating_add<clock_type>(started_at, options.timeout);
  std::optional<clock_type::time_point> drain_until;
  bool child_done = false;
  int exit_code = -1;
  capture captured[2];
  unique_fd* streams[2] = {&out_r, &err_r};
  std::vector<char> buffer(chunk_bytes);

  // Kills the group (the child is a zombie or alive, so its pid still names the group),
  // then the child itself in case it left the group, then reaps it.
  auto end_child = [&] {
    kill_process_group(pid);
    ::kill(pid, SIGKILL);
    exit_code = reap(pid);
    child_done = true;
    drain_until = clock_type::now() + drain_grace;
  };

  while (!child_done || streams[0]->get() >= 0 || streams[1]->get() >= 0) {
    auto now = clock_type::now();
    auto stop_requested = interrupted != nullptr && interrupted->load(std::memory_order_acquire);
    if (!child_done && stop_requested) {
      out.interrupted = true;
      end_child();
    } else if (!child_done && has_deadline && now >= deadline) {
      out.timed_out = true;
      end_child();
    }
    if (child_done && (stop_requested || clock_type::now() >= *drain_until))
      break;

    pollfd fds[3];
    nfds_t count = 0;
    int slot[3] = {-1, -1, -1};
    for (int i = 0; i < 2; ++i)
      if (streams[i]->get() >= 0) {
        fds[count] = pollfd{streams[i]->get(), POLLIN, 0};
        slot[count++] = i;
      }
    if (!child_done && pidfd.get() >= 0) {
      fds[count] = pollfd{pidfd.get(), POLLIN, 0};
      slot[count++] = 2;
    }
    auto wait = std::chrono::milliseconds::max();
    auto until = [&](clock_type::time_point t) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(t - clock_type::now());
      wait = std::min(wait, std::max(left, std::chrono::milliseconds{0}));
    };
    if (child_done)
      until(*drain_until);
    else if (has_deadline)
      until(deadline);
    if (interrupted != nullptr || (!child_done && pidfd.get() < 0))
      wait = std::min(wait, std::chrono::milliseconds{poll_tick});
    auto timeout_ms = wait == std::chrono::milliseconds::max()
                        ? -1
                        : static_cast<int>(std::min<int64_t>(wait.count(), INT_MAX));
    auto ready = ::poll(fds, count, timeout_ms);
    if (ready < 0 && errno != EINTR) {
      if (!child_done)
        end_child();
      break;
    }
    for (nfds_t i = 0; ready > 0 && i < count; ++i) {
      if (fds[i].revents == 0)
        continue;
      if (slot[i] == 2) {
        end_child(); // it exited by itself: take down what it left running
        continue;
      }
      auto& stream = *streams[slot[i]];
      auto n = ::read(stream.get(), buffer.data(), buffer.size());
      if (n > 0)
        captured[slot[i]].add(buffer.data(), static_cast<size_t>(n), cap);
      else if (n == 0 || (errno != EINTR && errno != EAGAIN))
        stream.reset();
    }
    if (!child_done && pidfd.get() < 0 && exited_without_reaping(pid))
      end_child();
  }

  out.exit_code = out.timed_out ? -1 : exit_code;
  out.stdout_text = clip_captured(captured[0].kept, captured[0].total, options.max_output_bytes);
  out.stderr_text = clip_captured(captured[1].kept, captured[1].total, options.max_output_bytes);
  if (out.timed_out && out.stderr_text.empty())
    out.stderr_text = "Command timed out after " + seconds_text(options.timeout) + " seconds.";
  return finish();
}

} // namespace boxrt
