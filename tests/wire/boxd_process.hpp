// Starts a real boxd process on 127.0.0.1 port 0 with a given config and reads its
// "boxd listening on ws://HOST:PORT" line; stops it with SIGTERM.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace boxrt::test {

inline std::string boxd_path() {
  // The tests run from build/tests; boxd sits at the top of the build folder.
  auto self = std::filesystem::read_symlink("/proc/self/exe");
  return (self.parent_path().parent_path() / "boxd").string();
}

class boxd_process {
 public:
  /// `box_json` is the "box" section; `server_extra` is spliced into "server";
  /// `wrapper` runs boxd under another program (e.g. `ip netns exec NAME`).
  explicit boxd_process(const std::string& box_json, const std::string& server_extra = "",
                        const std::vector<std::string>& wrapper = {}) {
    dir_ = std::filesystem::temp_directory_path()
           / ("boxd-wire-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::create_directories(dir_);
    auto config = dir_ / "config.json";
    std::ofstream{config} << R"({"server": {"listen": "127.0.0.1:0", "transfer_dir": ")"
                          << (dir_ / "transfers").string() << "\"" << server_extra
                          << "}, \"box\": " << box_json << "}";
    int out[2];
    if (::pipe(out) != 0)
      throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      auto log = (dir_ / "boxd.log").string();
      auto fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(fd, 2);
      ::close(out[0]);
      ::close(out[1]);
      ::chdir(dir_.c_str());
      auto bin = boxd_path();
      auto cfg = config.string();
      std::vector<std::string> args = wrapper;
      args.insert(args.end(), {bin, "--config", cfg});
      std::vector<char*> argv;
      for (auto& a : args)
        argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    stdout_ = ::fdopen(out[0], "r");
    char line[512] = {0};
    if (!std::fgets(line, sizeof(line), stdout_))
      throw std::runtime_error("boxd did not start; see " + (dir_ / "boxd.log").string());
    std::string text{line};
    const std::string prefix = "boxd listening on ";
    if (text.rfind(prefix, 0) != 0)
      throw std::runtime_error("unexpected first line from boxd: " + text);
    url_ = text.substr(prefix.size());
    while (!url_.empty() && (url_.back() == '\n' || url_.back() == '\r'))
      url_.pop_back();
  }

  ~boxd_process() {
    stop();
    std::error_code err;
    std::filesystem::remove_all(dir_, err);
  }

  /// SIGTERM, then waits; returns the exit status (or -1 when killed by a signal).
  int stop() {
    if (pid_ <= 0)
      return status_;
    ::kill(pid_, SIGTERM);
    int st = 0;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
    if (stdout_)
      std::fclose(stdout_);
    stdout_ = nullptr;
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return status_;
  }

  const std::string& url() const { return url_; }
  pid_t pid() const { return pid_; }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }

  std::filesystem::path dir_;
  pid_t pid_ = -1;
  FILE* stdout_ = nullptr;
  std::string url_;
  int status_ = -1;
};

} // namespace boxrt::test
