// Starts a real boxd process on 127.0.0.1 port 0 with a given config and reads its
// "boxd listening on ws://HOST:PORT" line; stops it with SIGTERM.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>
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
  /// `dir` reuses a data folder (a restart; the caller removes it), "" makes a fresh
  /// one; `args` and `env` ("NAME=VALUE") are added to boxd's own.
  explicit boxd_process(const std::string& box_json, const std::string& server_extra = "",
                        const std::vector<std::string>& wrapper = {},
                        const std::filesystem::path& dir = {},
                        const std::vector<std::string>& args_extra = {},
                        const std::vector<std::string>& env = {}) {
    owns_dir_ = dir.empty();
    dir_ = owns_dir_ ? fresh_dir() : dir;
    std::filesystem::create_directories(dir_);
    auto config = write_config(dir_, box_json, server_extra);
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
      args.insert(args.end(), args_extra.begin(), args_extra.end());
      for (const auto& e : env)
        ::putenv(const_cast<char*>(e.c_str()));
      exec(args);
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
    if (owns_dir_)
      std::filesystem::remove_all(dir_, err);
  }

  /// In a forked child: runs `args` (searched on PATH), or exits 127.
  [[noreturn]] static void exec(std::vector<std::string> args) {
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }

  /// A fresh data folder for a boxd (the caller removes it).
  static std::filesystem::path fresh_dir() {
    return std::filesystem::temp_directory_path()
           / ("boxd-wire-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
  }

  static std::filesystem::path write_config(const std::filesystem::path& dir,
                                            const std::string& box_json,
                                            const std::string& server_extra) {
    auto config = dir / "config.json";
    std::ofstream{config} << R"({"server": {"listen": "127.0.0.1:0", "transfer_dir": ")"
                          << (dir / "transfers").string() << "\"" << server_extra
                          << "}, \"box\": " << box_json << "}";
    return config;
  }

  /// Runs a boxd that is expected to refuse to start: its exit status (-1 when it was
  /// still running after 30 s and had to be killed) and what it logged.
  static std::pair<int, std::string> run_refused(const std::filesystem::path& dir,
                                                 const std::string& box_json,
                                                 const std::string& server_extra,
                                                 const std::vector<std::string>& args_extra = {}) {
    std::filesystem::create_directories(dir);
    auto config = write_config(dir, box_json, server_extra).string();
    auto log = (dir / "refused.log").string();
    pid_t pid = ::fork();
    if (pid == 0) {
      auto fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::chdir(dir.c_str());
      std::vector<std::string> args{boxd_path(), "--config", config};
      args.insert(args.end(), args_extra.begin(), args_extra.end());
      exec(args);
    }
    int st = 0;
    int status = -1;
    for (int i = 0; i < 3000; ++i) {
      if (::waitpid(pid, &st, WNOHANG) == pid) {
        status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        break;
      }
      ::usleep(10000);
    }
    if (status == -1 && ::waitpid(pid, &st, WNOHANG) == 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &st, 0);
    }
    std::ifstream in{log};
    std::string text{std::istreambuf_iterator<char>{in}, {}};
    return {status, text};
  }

  /// Waits for a boxd that killed itself (the crash hook); its signal number.
  int wait_killed() {
    int st = 0;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
    if (stdout_)
      std::fclose(stdout_);
    stdout_ = nullptr;
    return WIFSIGNALED(st) ? WTERMSIG(st) : 0;
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
  bool owns_dir_ = true;
  pid_t pid_ = -1;
  FILE* stdout_ = nullptr;
  std::string url_;
  int status_ = -1;
};

} // namespace boxrt::test
