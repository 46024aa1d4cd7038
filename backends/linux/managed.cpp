// Managed processes on descriptors: stdin writes that a terminate can interrupt, the
// stderr drain thread, the termination sequence, and the host child.
#include "backends/linux/managed.hpp"
#include "backends/linux/child.hpp"
#include "backends/linux/output.hpp"
#include "messages/base/pytext.hpp"
#include "messages/base/unique_fd.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace boxrt {

namespace {

using clock_type = std::chrono::steady_clock;

/// §4.7: stderr is read in 64 KiB chunks.
constexpr size_t chunk_bytes = 64 * 1024;

/// How long terminate waits after SIGKILL before it gives up (the process is then in
/// uninterruptible sleep, or its sandbox is being torn down).
constexpr auto kill_wait = std::chrono::seconds{5};

void close_fd(int& fd) {
  if (fd >= 0)
    ::close(fd);
  fd = -1;
}

/// Decodes UTF-8 as Python's errors="replace" does in spirit: each invalid or cut
/// sequence becomes U+FFFD. Returns the text and its number of characters.
std::pair<std::string, size_t> decode_utf8(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  size_t chars = 0;
  size_t i = 0;
  while (i < in.size()) {
    auto c = static_cast<unsigned char>(in[i]);
    size_t need = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 && c >= 0xC2 ? 2 : (c & 0xF0) == 0xE0 ? 3
                             : (c & 0xF8) == 0xF0 && c <= 0xF4 ? 4 : 0;
    bool ok = need > 0 && i + need <= in.size();
    for (size_t k = 1; ok && k < need; ++k)
      ok = (static_cast<unsigned char>(in[i + k]) & 0xC0) == 0x80;
    if (ok && need == 3) {
      auto c1 = static_cast<unsigned char>(in[i + 1]);
      ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0); // overlong, surrogate
    } else if (ok && need == 4) {
      auto c1 = static_cast<unsigned char>(in[i + 1]);
      ok = !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 >= 0x90);
    }
    if (ok) {
      out.append(in.substr(i, need));
      i += need;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
    ++chars;
  }
  return {std::move(out), chars};
}

} // namespace

// -- stderr preview ---------------------------------------------------------------------

void stderr_preview_buffer::add(std::string_view raw) {
  auto [text, chars] = decode_utf8(raw);
  auto kept = py::rstrip(text);
  if (kept.empty())
    return;
  chars -= py::code_points(std::string_view{text}.substr(kept.size()));
  chunks_.push_back({std::string{kept}, chars});
  chars_ += chars;
  while (!chunks_.empty() && chars_ + chunks_.size() > max_chars) {
    chars_ -= chunks_.front().chars;
    chunks_.pop_front();
  }
}

std::string stderr_preview_buffer::text() const {
  std::string out;
  for (auto& c : chunks_) {
    if (!out.empty())
      out += '\n';
    out += c.text;
  }
  return out;
}

// -- fd_managed_process -----------------------------------------------------------------

fd_managed_process::fd_managed_process(int in_fd, int out_fd, int err_fd)
  : in_fd_{in_fd}, out_fd_{out_fd}, err_fd_{err_fd} {
  // A process that dies while we write to it must not take boxd along.
  ::signal(SIGPIPE, SIG_IGN);
  stdin_wake_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  drain_stop_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  for (int fd : {in_fd_, out_fd_, err_fd_})
    if (fd >= 0)
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  drainer_ = std::thread{[this] { drain_stderr(); }};
}

fd_managed_process::~fd_managed_process() {
  uint64_t one = 1;
  (void)!::write(drain_stop_, &one, sizeof one);
  if (drainer_.joinable())
    drainer_.join();
  close_fd(in_fd_);
  close_fd(out_fd_);
  close_fd(err_fd_);
  close_fd(stdin_wake_);
  close_fd(drain_stop_);
}

void fd_managed_process::drain_stderr() {
  std::string buf(chunk_bytes, '\0');
  for (;;) {
    pollfd p[2] = {{err_fd_, POLLIN, 0}, {drain_stop_, POLLIN, 0}};
    auto rc = ::poll(p, 2, -1);
    if (rc < 0 && errno == EINTR)
      continue;
    if (rc < 0 || p[1].revents != 0)
      return;
    auto n = ::read(err_fd_, buf.data(), buf.size());
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (n <= 0)
      return; // every writer is gone
    std::lock_guard lock{mtx_};
    preview_.add(std::string_view{buf.data(), static_cast<size_t>(n)});
  }
}

bool fd_managed_process::write_stdin(std::string_view data) {
  std::lock_guard lock{stdin_mtx_};
  if (in_fd_ < 0)
    return false;
  // EPIPE ends it (nobody reads any more), and so does a close of stdin meanwhile.
  return write_all(in_fd_, data, [&] {
    pollfd p[2] = {{in_fd_, POLLOUT, 0}, {stdin_wake_, POLLIN, 0}};
    if (::poll(p, 2, -1) < 0 && errno != EINTR)
      return false;
    return p[1].revents == 0 && (p[0].revents & (POLLERR | POLLHUP)) == 0;
  });
}

void fd_managed_process::close_stdin() {
  uint64_t one = 1;
  (void)!::write(stdin_wake_, &one, sizeof one);
  std::lock_guard lock{stdin_mtx_};
  close_fd(in_fd_);
}

std::optional<int64_t> fd_managed_process::exit_code() {
  std::lock_guard lock{mtx_};
  if (!exit_)
    exit_ = poll_exit();
  return exit_;
}

std::string fd_managed_process::stderr_preview() const {
  std::lock_guard lock{mtx_};
  return preview_.text();
}

void fd_managed_process::terminate(std::chrono::milliseconds grace) {
  std::lock_guard lock{terminate_mtx_};
  close_stdin();
  if (exit_code())
    return;
  send_signal(SIGTERM);
  wait_exit(clock_type::now() + grace);
  if (exit_code())
    return;
  send_signal(SIGKILL);
  wait_exit(clock_type::now() + kill_wait);
}

// -- host child -------------------------------------------------------------------------

result<std::shared_ptr<host_managed_process>> host_managed_process::start(const host_process_options& options) {
  if (options.argv.empty() || options.argv[0].empty())
    return make_box_error(ec::box_error, "command must not be empty");
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0)
    return make_box_error(ec::box_error, std::string{"cannot create pipes: "} + std::strerror(errno));
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]), ::close(in[1]);
    return make_box_error(ec::box_error, std::string{"cannot create pipes: "} + std::strerror(errno));
  }
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(in[0]), ::close(in[1]), ::close(out[0]), ::close(out[1]);
    return make_box_error(ec::box_error, std::string{"cannot create pipes: "} + std::strerror(errno));
  }
  // Everything the child reads is built before fork: boxd is multi-threaded.
  std::vector<char*> argv, envp;
  for (auto& a : options.argv)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (auto& e : options.env)
    envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  std::vector<std::string> prefixes; // for a mkdir -p without allocation in the child
  for (size_t i = 1; i <= options.cwd.size(); ++i)
    if (i == options.cwd.size() || options.cwd[i] == '/')
      prefixes.push_back(options.cwd.substr(0, i));
  std::string cwd_error = "mkdir: cannot create directory '" + options.cwd + "'\n";
  std::string not_found = options.argv[0] + ": not found\n";
  std::string not_exec = options.argv[0] + ": Permission denied\n";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setsid();
    child::reset_signals();
    if (::dup2(in[0], 0) < 0 || ::dup2(out[1], 1) < 0 || ::dup2(err[1], 2) < 0)
      ::_exit(126);
    ::close_range(3, ~0u, 0);
    if (!options.cwd.empty()) {
      for (auto& p : prefixes)
        if (::mkdir(p.c_str(), 0755) != 0 && errno != EEXIST)
          break;
      if (::chdir(options.cwd.c_str()) != 0) {
        (void)!::write(2, cwd_error.data(), cwd_error.size());
        ::_exit(1);
      }
    }
    environ = envp.data(); // execvp looks the command up on the child's own PATH
    ::execvp(argv[0], argv.data());
    auto& why = errno == EACCES ? not_exec : not_found;
    (void)!::write(2, why.data(), why.size());
    ::_exit(errno == EACCES ? 126 : 127);
  }
  auto e = errno;
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  if (pid < 0) {
    ::close(in[1]), ::close(out[0]), ::close(err[0]);
    return make_box_error(ec::box_error, std::string{"cannot start the process: "} + std::strerror(e));
  }
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  return std::make_shared<host_managed_process>(pid, pidfd, in[1], out[0], err[0]);
}

host_managed_process::host_managed_process(pid_t pid, int pidfd, int in_fd, int out_fd, int err_fd)
  : fd_managed_process{in_fd, out_fd, err_fd}, pid_{pid}, pidfd_{pidfd} {
}

host_managed_process::~host_managed_process() {
  {
    std::lock_guard lock{pid_mtx_};
    if (!reaped_) {
      ::kill(-pid_, SIGKILL);
      ::kill(pid_, SIGKILL);
      while (::waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
      }
      reaped_ = true;
    }
  }
  close_fd(pidfd_);
}

std::optional<int64_t> host_managed_process::poll_exit() {
  std::lock_guard lock{pid_mtx_};
  if (!reaped_) {
    auto r = ::waitpid(pid_, &status_, WNOHANG);
    if (r != pid_)
      return std::nullopt;
    reaped_ = true;
  }
  if (WIFSIGNALED(status_))
    return 128 + WTERMSIG(status_);
  return WEXITSTATUS(status_);
}

void host_managed_process::wait_exit(clock_type::time_point deadline) {
  while (!exit_code()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now()).count();
    if (left <= 0)
      return;
    if (pidfd_ >= 0) {
      pollfd p{pidfd_, POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(left));
    } else {
      // No pidfd (old kernel): look again every 10 ms.
      pollfd none{-1, 0, 0};
      ::poll(&none, 1, static_cast<int>(std::min<int64_t>(left, 10)));
    }
  }
}

void host_managed_process::send_signal(int sig) {
  std::lock_guard lock{pid_mtx_};
  if (reaped_)
    return; // the pid may belong to someone else now
  ::kill(-pid_, sig);
}

void host_managed_process::kill_now() {
  send_signal(SIGKILL);
}

void host_process_list::add(const std::shared_ptr<host_managed_process>& p) {
  std::lock_guard lock{mtx_};
  std::erase_if(items_, [](auto& w) { return w.expired(); });
  items_.push_back(p);
}

void host_process_list::kill_all() {
  std::vector<std::shared_ptr<host_managed_process>> alive;
  {
    std::lock_guard lock{mtx_};
    for (auto& w : items_)
      if (auto p = w.lock())
        alive.push_back(std::move(p));
    items_.clear();
  }
  for (auto& p : alive)
    p->kill_now();
}

} // namespace boxrt
