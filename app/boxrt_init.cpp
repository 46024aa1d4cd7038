// boxrt-init: the process that keeps a warm bwrap sandbox alive. It runs inside the
// sandbox (already in its namespaces, as the unprivileged sandbox uid, under the seccomp
// filter), reads exec requests on stdin and answers on stdout (backends/init_protocol.hpp).
// Per exec it creates and enters the workdir itself, forks `/bin/sh -c CMD` in a process
// group of its own, collects both output streams (capped as it reads) and the exit
// status, then kills whatever the command left running in its group. It exits when its
// stdin closes. Standard library and POSIX only.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "backends/init_protocol.hpp"

namespace proto = boxrt::init_protocol;

namespace {

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    auto n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool read_all(int fd, char* buf, size_t n) {
  while (n > 0) {
    auto r = ::read(fd, buf, n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return false;
    buf += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool read_frame(int fd, std::string& payload) {
  char len[4];
  if (!read_all(fd, len, 4))
    return false;
  auto n = proto::get_u32(len);
  if (n > proto::max_frame_bytes)
    return false;
  payload.resize(n);
  return n == 0 || read_all(fd, payload.data(), n);
}

/// `mkdir -p`; "" on success, else the message sh's mkdir would print.
std::string make_dirs(const std::string& path) {
  if (path.empty() || path[0] != '/')
    return "workdir must be an absolute path";
  std::string cur;
  size_t i = 1;
  while (i <= path.size()) {
    auto j = path.find('/', i);
    if (j == std::string::npos)
      j = path.size();
    cur = path.substr(0, j);
    if (j > i && ::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST)
      return "mkdir: cannot create directory '" + cur + "': " + std::strerror(errno);
    i = j + 1;
  }
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return "mkdir: cannot create directory '" + path + "': Not a directory";
  return {};
}

struct stream {
  int fd = -1;
  std::string kept;
  uint64_t total = 0;
};

/// Reads what is available on `s` (non-blocking fd); false at end of stream.
bool drain(stream& s, size_t cap) {
  char buf[65536];
  for (;;) {
    auto n = ::read(s.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return true;
    if (n <= 0)
      return false;
    s.total += static_cast<uint64_t>(n);
    if (s.kept.size() < cap)
      s.kept.append(buf, std::min(cap - s.kept.size(), static_cast<size_t>(n)));
  }
}

proto::exec_reply run(const proto::exec_request& req) {
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  proto::exec_reply reply;
  auto finish = [&] {
    reply.duration_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - t0).count();
    return reply;
  };
  if (auto err = make_dirs(req.workdir); !err.empty()) {
    reply.exit_code = 1;
    reply.error = err;
    return finish();
  }
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    reply.exit_code = 1;
    reply.error = std::string{"cannot create pipes: "} + std::strerror(errno);
    return finish();
  }
  std::vector<char*> envp;
  for (auto& e : req.env)
    envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const char* argv[] = {"sh", "-c", req.cmd.c_str(), nullptr};
  auto pid = ::fork();
  if (pid < 0) {
    reply.exit_code = 1;
    reply.error = std::string{"cannot start the command: "} + std::strerror(errno);
    ::close(out[0]), ::close(out[1]), ::close(err[0]), ::close(err[1]);
    return finish();
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    // The command is the one the out-of-memory killer should pick, not this process.
    if (int fd = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC); fd >= 0) {
      (void)!::write(fd, "0", 1);
      ::close(fd);
    }
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull >= 0 ? devnull : out[0], 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    if (::chdir(req.workdir.c_str()) != 0)
      ::_exit(1);
    ::signal(SIGPIPE, SIG_DFL);
    ::execve("/bin/sh", const_cast<char* const*>(argv), envp.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::close(out[1]);
  ::close(err[1]);
  stream so, se;
  so.fd = out[0];
  se.fd = err[0];
  for (auto* s : {&so, &se})
    ::fcntl(s->fd, F_SETFL, ::fcntl(s->fd, F_GETFL) | O_NONBLOCK);
  auto cap = static_cast<size_t>(req.max_output_bytes < 0 ? 0 : req.max_output_bytes);
  int status = 0;
  bool exited = false;
  bool open_out = true, open_err = true;
  // Read until the command exits; then kill what it left in its group and read until
  // both streams close (a process that escaped the group gets 100 ms, then is cut off).
  while (open_out || open_err) {
    if (!exited) {
      auto r = ::waitpid(pid, &status, WNOHANG);
      if (r == pid) {
        exited = true;
        ::kill(-pid, SIGKILL);
      }
    }
    pollfd fds[2];
    int n = 0;
    if (open_out)
      fds[n++] = {so.fd, POLLIN, 0};
    if (open_err)
      fds[n++] = {se.fd, POLLIN, 0};
    auto rc = ::poll(fds, static_cast<nfds_t>(n), exited ? 100 : 20);
    if (rc == 0 && exited)
      break;
    if (open_out)
      open_out = drain(so, cap);
    if (open_err)
      open_err = drain(se, cap);
  }
  if (!exited) {
    ::waitpid(pid, &status, 0);
    ::kill(-pid, SIGKILL);
  }
  ::close(so.fd);
  ::close(se.fd);
  if (WIFEXITED(status))
    reply.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    reply.exit_code = 128 + WTERMSIG(status);
  reply.stdout_kept = std::move(so.kept);
  reply.stdout_total = so.total;
  reply.stderr_kept = std::move(se.kept);
  reply.stderr_total = se.total;
  return finish();
}

} // namespace

int main() {
  ::signal(SIGPIPE, SIG_IGN);
  // Orphans of earlier execs are reaped by the sandbox's pid 1 (bwrap); ours only.
  if (!write_all(1, proto::ready_frame()))
    return 1;
  std::string payload;
  while (read_frame(0, payload)) {
    auto req = proto::decode_request(payload);
    if (!req)
      return 2;
    if (!write_all(1, proto::encode(run(*req))))
      return 1;
  }
  return 0;
}
