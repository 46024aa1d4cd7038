// boxrt-init: the process that keeps a warm sandbox alive. It runs inside the sandbox
// (already in its namespaces, as the unprivileged sandbox uid, under the seccomp filter
// that bwrap applied, or that it applies itself first under nsjail). It starts as the
// sandbox's pid 1 on both drivers, stays there as the pid namespace's reaper and serves
// as that reaper's child (pid 2): it reads exec requests on stdin and answers on stdout
// (backends/init/init_protocol.hpp).
// Per exec it creates and enters the workdir itself, forks `/bin/sh -c CMD` in a process
// group of its own, collects both output streams (capped as it reads) and the exit
// status, then kills whatever the command left running in its group. It also starts
// managed processes (long-running stdio servers, their stdio FIFOs in /.boxrt/io) on
// request over its control socket, serves those requests even while an exec runs, reaps
// them and records their exit codes in /.boxrt/io. It exits when its stdin closes (the sandbox ends with it).
// Standard library and POSIX only.
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "backends/init/init_protocol.hpp"
#include "backends/linux/child.hpp"

extern char** environ;

namespace proto = boxrt::init_protocol;

namespace {

/// The session's io folder: FIFOs of managed processes, their exit files, control FIFOs.
constexpr const char* io_dir = "/.boxrt/io";

/// The managed-process side of init: the control socket, SIGCHLD, the children by pid.
struct control_state {
  int req = -1; // the control socket (requests in, replies out), -1 once broken
  int sig = -1; // signalfd for SIGCHLD
  std::map<pid_t, std::string> managed;
  pid_t exec = -1; // the running exec's process (and group), -1 between execs
};
control_state ctl;

/// The signals init found ignored at its start, and SIGPIPE, which it ignores itself:
/// the only dispositions an exec keeps, so the only ones a child must reset (handlers
/// init has none). Filled once in main, read by children.
int ignored_signals[NSIG];
int ignored_count = 0;

void note_ignored_signals() {
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction old{};
    if (sig != SIGKILL && sig != SIGSTOP && (sig == SIGPIPE || (::sigaction(sig, nullptr, &old) == 0
                                                                && old.sa_handler == SIG_IGN)))
      ignored_signals[ignored_count++] = sig;
  }
}

using proto::write_all;

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

/// The last steps of a child before it execs a tenant's program: only stdio stays open
/// (init's own channels must not outlive the fork), the process becomes dumpable again
/// (init is not, so commands cannot open /proc/<init>/fd/* or attach to it; a child
/// that is about to run tenant code holds nothing worth protecting), and its
/// out-of-memory score is reset so the kernel picks the command, not init.
void become_command() {
  ::close_range(3, ~0U, 0);
  ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
  boxrt::child::set_oom_score_adj("0");
}

std::string io_path(const std::string& name, const char* suffix) {
  return std::string{io_dir} + "/" + name + suffix;
}

int64_t exit_code_of(int status) {
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/// `<name>.exit`, written whole then renamed, so the host never reads half a number.
void write_exit(const std::string& name, int64_t code) {
  auto tmp = io_path(name, ".exit.tmp");
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return;
  auto text = std::to_string(code) + "\n";
  bool ok = write_all(fd, text);
  ::close(fd);
  if (ok)
    ::rename(tmp.c_str(), io_path(name, ".exit").c_str());
}

/// Reaps the managed children that have ended. Only ours, by pid: an exec's child is
/// waited for by run() itself.
void reap_managed() {
  if (ctl.sig >= 0) {
    signalfd_siginfo info;
    while (::read(ctl.sig, &info, sizeof info) > 0) {
    }
  }
  for (auto it = ctl.managed.begin(); it != ctl.managed.end();) {
    int status = 0;
    auto r = ::waitpid(it->first, &status, WNOHANG);
    if (r == it->first) {
      write_exit(it->second, exit_code_of(status));
      it = ctl.managed.erase(it);
    } else if (r < 0 && errno == ECHILD) {
      write_exit(it->second, 137);
      it = ctl.managed.erase(it);
    } else {
      ++it;
    }
  }
}

bool valid_name(const std::string& name) {
  return !name.empty() && name.size() <= 64 && name != "." && name != ".." && name != "ctl"
         && name.find('/') == std::string::npos;
}

/// Forks the managed process: its own session and process group, the FIFOs as stdio,
/// cwd created and entered, then execvp (no shell). Replies once the child holds the
/// FIFOs; a command that cannot run exits 127 (126: not executable, 1: cwd) with the
/// reason on its stderr, as `sh -c 'mkdir -p CWD && cd CWD && exec CMD'` would.
proto::control_reply spawn(const proto::spawn_request& req) {
  proto::control_reply reply;
  reply.id = req.id;
  if (!valid_name(req.name) || req.command.empty()) {
    reply.error = "invalid managed process request";
    return reply;
  }
  for (auto& [pid, name] : ctl.managed)
    if (name == req.name) {
      reply.error = "managed process " + req.name + " is already running";
      return reply;
    }
  int sync[2];
  if (::pipe2(sync, O_CLOEXEC) != 0) {
    reply.error = std::string{"cannot create a pipe: "} + std::strerror(errno);
    return reply;
  }
  std::vector<char*> argv, envp;
  argv.push_back(const_cast<char*>(req.command.c_str()));
  for (auto& a : req.args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (auto& e : req.env)
    envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  ::unlink(io_path(req.name, ".exit").c_str());
  auto pid = ::fork();
  if (pid < 0) {
    reply.error = std::string{"cannot start the process: "} + std::strerror(errno);
    ::close(sync[0]), ::close(sync[1]);
    return reply;
  }
  if (pid == 0) {
    // init is single-threaded: allocation is safe here.
    ::setsid();
    boxrt::child::reset_signals();
    int in = ::open(io_path(req.name, ".in").c_str(), O_RDONLY | O_CLOEXEC);
    int out = ::open(io_path(req.name, ".out").c_str(), O_WRONLY | O_CLOEXEC);
    int err = ::open(io_path(req.name, ".err").c_str(), O_WRONLY | O_CLOEXEC);
    if (in < 0 || out < 0 || err < 0 || ::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0)
      ::_exit(126);
    (void)!::write(sync[1], "o", 1);
    become_command();
    if (auto e = make_dirs(req.cwd); !e.empty()) {
      write_all(2, e + "\n");
      ::_exit(1);
    }
    if (::chdir(req.cwd.c_str()) != 0) {
      write_all(2, "cd: " + req.cwd + ": " + std::strerror(errno) + "\n");
      ::_exit(1);
    }
    environ = envp.data(); // execvp searches the PATH the process is given
    ::execvp(argv[0], argv.data());
    auto e = errno;
    write_all(2, req.command + (e == ENOENT ? ": not found" : std::string{": "} + std::strerror(e)) + "\n");
    ::_exit(e == ENOENT ? 127 : 126);
  }
  ::close(sync[1]);
  // The opens cannot block (the host holds the other ends), so this wait is short.
  char c = 0;
  pollfd p{sync[0], POLLIN, 0};
  int rc;
  while ((rc = ::poll(&p, 1, 5000)) < 0 && errno == EINTR) {
  }
  bool opened = rc > 0 && ::read(sync[0], &c, 1) == 1 && c == 'o';
  ::close(sync[0]);
  if (!opened) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    reply.error = "managed process " + req.name + " could not open its stdio";
    return reply;
  }
  ctl.managed[pid] = req.name;
  reply.pid = pid;
  return reply;
}

proto::control_reply signal_managed(const proto::kill_request& req) {
  proto::control_reply reply;
  reply.id = req.id;
  if (req.signal <= 0 || req.signal >= NSIG) {
    reply.error = "invalid signal";
    return reply;
  }
  // An empty name is the running exec (a streamed exec's cancel or timeout).
  if (req.name.empty()) {
    if (ctl.exec > 0)
      ::kill(-ctl.exec, static_cast<int>(req.signal));
    return reply;
  }
  for (auto& [pid, name] : ctl.managed)
    if (name == req.name) {
      if (::kill(-pid, static_cast<int>(req.signal)) != 0)
        ::kill(pid, static_cast<int>(req.signal));
      break;
    }
  return reply; // an ended process needs no signal
}

/// Serves one control request; a broken control channel is closed for good.
void serve_control() {
  std::string payload;
  if (!read_frame(ctl.req, payload)) {
    ::close(ctl.req);
    ctl.req = -1;
    return;
  }
  proto::control_reply reply;
  auto kind = proto::request_kind(payload);
  if (kind == "spawn") {
    if (auto r = proto::decode_spawn(payload))
      reply = spawn(*r);
    else
      reply.error = "malformed spawn request";
  } else if (kind == "kill") {
    if (auto r = proto::decode_kill(payload))
      reply = signal_managed(*r);
    else
      reply.error = "malformed kill request";
  } else {
    reply.error = "unknown request";
  }
  write_all(ctl.req, proto::encode(reply));
}

/// Reaps and serves control requests when poll saw them ready.
void service(short sig_events, short ctl_events) {
  if (sig_events != 0)
    reap_managed();
  if ((ctl_events & (POLLIN | POLLHUP | POLLERR)) != 0)
    serve_control();
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

/// Reads once from `s` (non-blocking fd) into `out`: -1 at end of stream, else the bytes
/// read (0 when nothing is there now).
ssize_t read_some(stream& s, std::string& out) {
  char buf[proto::max_output_chunk];
  for (;;) {
    auto n = ::read(s.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return 0;
    if (n <= 0)
      return -1;
    s.total += static_cast<uint64_t>(n);
    out.assign(buf, static_cast<size_t>(n));
    return n;
  }
}

/// The output frame of a streamed exec that the host has not taken whole yet. Sent
/// without blocking, so that the control channel is served while the host does not read.
struct outgoing {
  std::string frame;
  size_t sent = 0;
  bool empty() const { return sent == frame.size(); }
  /// Sends what the channel takes now; false when the host is gone.
  bool push() {
    while (!empty()) {
      auto n = ::send(1, frame.data() + sent, frame.size() - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return true;
      if (n <= 0)
        return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }
};

/// What the command's process needs before it execs `/bin/sh -c CMD`.
struct command_start {
  int out_read, out_write, err_write;
  const char* workdir;
  const char* const* argv;
  char* const* envp;
};

/// The command's own stack while it shares init's memory (one exec runs at a time).
alignas(64) char command_stack[64 * 1024];

/// The command's process until it execs, in init's memory: system calls only, nothing
/// of init's written. Not become_command: PR_SET_DUMPABLE is per memory, and would make
/// init dumpable; the exec gives the command its own memory, dumpable as usual.
int start_command(void* arg) {
  const auto& a = *static_cast<const command_start*>(arg);
  // A session of its own, not only a group: a process left in session 1 could move
  // into init's process group (setpgid(0, 1)) and signal it with kill(0, ...).
  ::setsid();
  struct sigaction dfl{};
  dfl.sa_handler = SIG_DFL;
  for (int i = 0; i < ignored_count; ++i)
    ::sigaction(ignored_signals[i], &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  int devnull = ::open("/dev/null", O_RDONLY);
  ::dup2(devnull >= 0 ? devnull : a.out_read, 0);
  ::dup2(a.out_write, 1);
  ::dup2(a.err_write, 2);
  if (::chdir(a.workdir) != 0)
    ::_exit(1);
  ::close_range(3, ~0U, 0);
  // This process's own score only: a vfork child's write does not reach init's.
  boxrt::child::set_oom_score_adj("0");
  ::execve("/bin/sh", const_cast<char* const*>(a.argv), a.envp);
  ::_exit(127);
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
  command_start start{out[0], out[1], err[1], req.workdir.c_str(), argv, envp.data()};
  // The command's process shares init's memory until it execs (CLONE_VM | CLONE_VFORK,
  // on a stack of its own, init waiting meanwhile): no page tables to copy and no
  // copy-on-write faults, the larger part of what a fork of init cost per exec.
  auto pid = ::clone(start_command, command_stack + sizeof command_stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &start);
  if (pid < 0) {
    reply.exit_code = 1;
    reply.error = std::string{"cannot start the command: "} + std::strerror(errno);
    ::close(out[0]), ::close(out[1]), ::close(err[0]), ::close(err[1]);
    return finish();
  }
  ::setpgid(pid, pid);
  ctl.exec = pid;
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
  // Streamed: one frame at a time, taken from the streams in turn, and the pipes are
  // read only once the host has taken the last frame.
  outgoing pending;
  bool stderr_next = false;
  // Read until the command exits; then kill what it left in its group and read until
  // both streams close (a process that escaped the group gets 100 ms, then is cut off).
  // Managed processes are reaped and control requests served meanwhile, also while a
  // command that closed its stdout and stderr still runs.
  while (open_out || open_err || !pending.empty() || !exited) {
    if (!exited) {
      auto r = ::waitpid(pid, &status, WNOHANG);
      if (r == pid) {
        exited = true;
        ::kill(-pid, SIGKILL);
        ctl.exec = -1;  // its group id may be another process's from now on
      }
    }
    pollfd fds[4];
    int n = 0;
    if (!pending.empty()) {
      fds[n++] = {1, POLLOUT, 0};
    } else {
      if (open_out)
        fds[n++] = {so.fd, POLLIN, 0};
      if (open_err)
        fds[n++] = {se.fd, POLLIN, 0};
    }
    int streams = n;
    fds[n++] = {ctl.sig, POLLIN, 0};
    fds[n++] = {ctl.req, POLLIN, 0};
    auto rc = ::poll(fds, static_cast<nfds_t>(n), exited ? 100 : 20);
    if (rc > 0)
      service(fds[streams].revents, fds[streams + 1].revents);
    if (!req.stream) {
      if (rc == 0 && exited)
        break;
      if (open_out)
        open_out = drain(so, cap);
      if (open_err)
        open_err = drain(se, cap);
      continue;
    }
    if (!pending.empty()) {
      if (!pending.push())
        std::_Exit(1); // the host is gone: so is the sandbox
      continue;
    }
    if (rc == 0 && exited)
      break;
    for (int turn = 0; turn < 2 && pending.empty(); ++turn) {
      const bool err_turn = stderr_next;
      stderr_next = !stderr_next;
      bool& open = err_turn ? open_err : open_out;
      if (!open)
        continue;
      std::string bytes;
      if (read_some(err_turn ? se : so, bytes) < 0)
        open = false;
      else if (!bytes.empty())
        pending = {proto::encode(proto::output_frame{err_turn ? 2 : 1, std::move(bytes)}), 0};
    }
    if (!pending.empty() && !pending.push())
      std::_Exit(1);
  }
  ctl.exec = -1;
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

/// Installs the seccomp program waiting on proto::seccomp_fd (nsjail cannot apply a BPF
/// program itself). Fails closed: false when it is missing, malformed or refused.
bool install_seccomp() {
  std::string program;
  char chunk[4096];
  for (;;) {
    auto n = ::read(proto::seccomp_fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return false;
    if (n == 0)
      break;
    program.append(chunk, static_cast<size_t>(n));
    if (program.size() > (1u << 20))
      return false;
  }
  ::close(proto::seccomp_fd);
  if (program.empty() || program.size() % sizeof(sock_filter) != 0
      || program.size() / sizeof(sock_filter) > BPF_MAXINSNS)
    return false;
  sock_fprog prog{};
  prog.len = static_cast<unsigned short>(program.size() / sizeof(sock_filter));
  prog.filter = reinterpret_cast<sock_filter*>(program.data());
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

/// As pid 1 of the sandbox (both drivers): forks the init that serves the host and stays
/// behind as the namespace's reaper. It holds no
/// descriptor, has no signal handler (so nothing inside can signal it: the kernel
/// drops such signals to a namespace's init) and exits with the serving init's status,
/// which ends the namespace. Returns in the serving child only.
void become_reaper_parent() {
  pid_t child = ::fork();
  if (child < 0)
    ::_exit(1);
  if (child == 0)
    return;
  ::close_range(0, ~0U, 0);
  for (;;) {
    int status = 0;
    pid_t p = ::wait(&status);
    if (p == child)
      ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
    if (p < 0 && errno == ECHILD)
      ::_exit(1);
  }
}

} // namespace

int main(int argc, char** argv) {
  // Not dumpable: a command of the same uid can then neither open /proc/<init>/fd/*
  // (init's pipes to the host) nor read its memory; the seccomp filter refuses the
  // rest (signals, pidfd_getfd, ptrace). Children undo this right before they exec.
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  if (argc > 1 && std::string{argv[1]} == proto::seccomp_flag && !install_seccomp())
    return 3;
  // The sandbox's pid 1 on both drivers (bwrap --as-pid-1, nsjail): fork the serving
  // init (pid 2) and stay behind as the reaper. Both are not dumpable (inherited on
  // fork), so a command of the same uid can open neither's /proc files (mem, syscall,
  // oom_score_adj): bwrap's own reaper, which it replaces, was dumpable.
  if (::getpid() == 1)
    become_reaper_parent();
  ::signal(SIGPIPE, SIG_IGN);
  note_ignored_signals();
  // The host's channels arrive above stdio (see init_protocol::channel_fd).
  if (::fcntl(proto::channel_fd, F_GETFD) != -1) {
    if (::dup2(proto::channel_fd, 0) < 0 || ::dup2(proto::channel_fd, 1) < 0)
      return 1;
    ::close(proto::channel_fd);
  }
  // Orphans of earlier execs are reaped by the sandbox's pid 1 (the reaper above); our
  // managed children by us, on SIGCHLD (children unblock it again).
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  ctl.sig = ::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  // The control socket, when the host gave this sandbox one (no child inherits it).
  if (::fcntl(proto::control_fd, F_SETFD, FD_CLOEXEC) == 0)
    ctl.req = proto::control_fd;
  if (!write_all(1, proto::ready_frame()))
    return 1;
  std::string payload;
  for (;;) {
    pollfd fds[3] = {{0, POLLIN, 0}, {ctl.sig, POLLIN, 0}, {ctl.req, POLLIN, 0}};
    // No timeout: an idle sandbox costs the host nothing. A SIGCHLD is not lost: it stays
    // pending on the signalfd until read, and service() then reaps every exited child.
    auto rc = ::poll(fds, 3, -1);
    if (rc < 0 && errno != EINTR)
      return 1;
    service(fds[1].revents, fds[2].revents); // both 0 when poll was interrupted
    if (rc <= 0 || fds[0].revents == 0)
      continue;
    if (!read_frame(0, payload))
      return 0;
    auto req = proto::decode_request(payload);
    if (!req)
      return 2;
    if (!write_all(1, proto::encode(run(*req))))
      return 1;
  }
}
