// A real etcd for the cluster tests (Debian's etcd-server, installed by scripts/bootstrap),
// started on loopback ports with a data folder of its own, killed with the fixture. Every
// wait is bounded and polls an observed condition.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "net/etcd/client.hpp"

extern char** environ;

namespace boxrt::test {

namespace fs = std::filesystem;
namespace etcd = boxrt::net::etcd;
using namespace std::chrono_literals;

/// A port nobody listens on now (the kernel's pick for a socket closed right away).
inline int free_port() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  return ntohs(a.sin_port);
}

template <class F>
inline bool within(std::chrono::milliseconds limit, F&& done) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (done())
      return true;
    std::this_thread::sleep_for(20ms);
  }
  return done();
}

struct etcd_fixture {
  etcd_fixture() {
    BOOST_REQUIRE_MESSAGE(::access("/usr/bin/etcd", X_OK) == 0,
                          "etcd is not installed (scripts/bootstrap installs etcd-server)");
    char tmpl[] = "/tmp/boxrt-etcd-XXXXXX";
    dir = ::mkdtemp(tmpl);
    auto client_url = "http://127.0.0.1:" + std::to_string(free_port());
    auto peer_url = "http://127.0.0.1:" + std::to_string(free_port());
    std::vector<std::string> args{"/usr/bin/etcd", "--name", "t", "--data-dir", dir + "/data",
                                  "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
                                  "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                                  "--initial-cluster", "t=" + peer_url, "--logger", "zap", "--log-outputs", "stderr"};
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    // Its log, for a failure's post-mortem (the folder goes with the fixture).
    auto log = dir + "/etcd.log";
    posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT, 0600);
    BOOST_REQUIRE(::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ) == 0);
    posix_spawn_file_actions_destroy(&actions);
    opts.endpoints = {client_url};
    etcd::client c{opts};
    BOOST_REQUIRE_MESSAGE(within(20s, [&] { return c.get("/probe").ok(); }), "etcd did not answer within 20 s");
  }
  /// Stops and resumes etcd itself (SIGSTOP, SIGCONT): every call to it then hangs.
  /// Returns once every thread of etcd has stopped (a SIGSTOP takes effect
  /// asynchronously: a request sent right after kill() could still be served).
  void pause() {
    ::kill(pid, SIGSTOP);
    int status = 0;
    while (::waitpid(pid, &status, WUNTRACED) < 0 && errno == EINTR) {
    }
  }
  void resume() { ::kill(pid, SIGCONT); }
  ~etcd_fixture() {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    std::error_code err;
    fs::remove_all(dir, err);
  }
  std::string dir;
  pid_t pid = -1;
  etcd::options opts;
};

} // namespace boxrt::test
