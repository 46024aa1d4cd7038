#include "backends/linux/helper.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace boxrt {

result<std::unique_ptr<helper_process>> helper_process::start(const std::vector<std::string>& argv,
                                                              const std::vector<std::pair<int, int>>& fds) {
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0)
    return make_box_error(ec::box_error, std::string{"cannot start "} + argv[0] + ": " + std::strerror(errno));
  std::vector<char*> args;
  for (auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // Everything the child touches is prepared here: after fork only system calls.
  int top = 3;
  for (auto& [from, to] : fds)
    top = std::max(top, std::max(from, to) + 1);
  std::vector<int> high(fds.size(), -1); // allocated before fork: the child may not
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(err_pipe[0]), ::close(err_pipe[1]);
    return make_box_error(ec::box_error, std::string{"cannot start "} + argv[0] + ": " + std::strerror(errno));
  }
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig = 1; sig < NSIG; ++sig)
      ::signal(sig, SIG_DFL);
    ::setsid();
    // Move every descriptor to hand over above all targets first, then into place.
    for (size_t i = 0; i < fds.size(); ++i)
      if ((high[i] = ::fcntl(fds[i].first, F_DUPFD, top)) < 0)
        ::_exit(126);
    int null = ::open("/dev/null", O_RDWR);
    if (null < 0 || ::dup2(null, 0) < 0 || ::dup2(null, 1) < 0 || ::dup2(err_pipe[1], 2) < 0)
      ::_exit(126);
    for (size_t i = 0; i < fds.size(); ++i)
      if (::dup2(high[i], fds[i].second) < 0)
        ::_exit(126);
    ::close_range(static_cast<unsigned>(top), ~0U, 0);
    for (int fd = 3; fd < top; ++fd) {
      bool wanted = false;
      for (auto& [from, to] : fds)
        wanted = wanted || to == fd;
      if (!wanted)
        ::close(fd);
    }
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(err_pipe[1]);
  std::unique_ptr<helper_process> h{new helper_process};
  h->pid_ = pid;
  h->pidfd_.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  h->stderr_.reset(err_pipe[0]);
  ::fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);
  return h;
}

helper_process::~helper_process() {
  stop();
}

bool helper_process::running() const {
  if (pid_ <= 0)
    return false;
  if (!pidfd_)
    return ::kill(pid_, 0) == 0;
  pollfd p{pidfd_.get(), POLLIN, 0};
  return ::poll(&p, 1, 0) == 0;
}

std::string helper_process::error_text() {
  std::string out;
  char buf[1024];
  while (out.size() < 4096) {
    auto n = ::read(stderr_.get(), buf, sizeof buf);
    if (n <= 0)
      break;
    out.append(buf, static_cast<size_t>(n));
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' '))
    out.pop_back();
  return out;
}

int helper_process::wait(int timeout_ms) {
  if (pid_ <= 0)
    return -1;
  if (pidfd_) {
    pollfd p{pidfd_.get(), POLLIN, 0};
    int rc;
    while ((rc = ::poll(&p, 1, timeout_ms)) < 0 && errno == EINTR) {
    }
    if (rc == 0) {
      stop();
      return -1;
    }
  }
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  pidfd_.reset();
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void helper_process::stop() {
  if (pid_ <= 0)
    return;
  ::kill(pid_, SIGKILL);
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  pidfd_.reset();
}

} // namespace boxrt
