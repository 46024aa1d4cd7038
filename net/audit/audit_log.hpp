// The audit trail (server.audit_log; docs/operations.md "Audit trail"): one JSON line per
// host-control action and per tenant action decision, written before the action's reply
// goes out. A thread of its own writes the file, so a slow disk holds up the replies
// that wait for their line, never an actor or I/O thread. Size-based rotation:
// FILE, FILE.1, ... FILE.<files - 1>.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace boxrt::net {

struct audit_options {
  /// "" = no audit trail.
  std::string path;
  /// Each exec's command text too (server.audit_commands).
  bool commands = false;
  /// A file past this size is rotated (server.audit_max_bytes).
  uint64_t max_bytes = uint64_t{100} << 20;
  /// Files kept, the current one included (server.audit_files).
  uint32_t files = 5;
};

/// One decision, as the connection saw it.
struct audit_record {
  std::string action;
  std::string instance;
  std::string workspace;  // the id as sent; the line carries its namespace too
  std::string session;
  bool allowed = true;
  std::string error_class;              // "" when allowed
  std::optional<int64_t> exit_code;     // an exec's, when it ran
  int64_t duration_us = 0;
  std::optional<std::string> command;   // only with audit_commands
  std::string peer;
};

/// The line of `r` (docs/operations.md gives its schema), without its newline.
std::string audit_line(const audit_record& r, int64_t now_us);

/// The line of a connection a sandbox's egress policy refused (docs/network.md):
/// action "egress", the sandbox's workspace namespace, what it asked for and why.
std::string egress_audit_line(const std::string& ns, const std::string& name, const std::string& address,
                              int port, const std::string& reason, int64_t now_us);

class audit_log {
 public:
  /// Opens (appends to) the file; nullptr and `error` set when it cannot be opened.
  static std::shared_ptr<audit_log> open(const audit_options& opts, std::string& error);
  ~audit_log();
  audit_log(const audit_log&) = delete;
  audit_log& operator=(const audit_log&) = delete;

  bool commands() const { return opts_.commands; }

  /// Writes `line` and a newline on the log's thread, then calls `written` there (with
  /// false when the write failed: the failure is logged, the reply still goes). A line
  /// no reply waits for (`written` empty) is dropped while max_unwaited lines wait
  /// already; the next line written says how many were (`{"dropped": N}`). Lines a reply
  /// waits for are bounded by the connections' in-flight caps.
  void append(std::string line, std::function<void(bool)> written);

  static constexpr size_t max_unwaited = 65536;

  /// Lines written and failed since start (tests, metrics).
  uint64_t written() const;

 private:
  explicit audit_log(audit_options opts, int fd, uint64_t size);
  void run();
  bool write_line(const std::string& line);
  void rotate();

  audit_options opts_;
  int fd_ = -1;
  uint64_t size_ = 0;
  uint64_t written_ = 0;
  size_t unwaited_ = 0;
  uint64_t dropped_ = 0;
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<std::pair<std::string, std::function<void(bool)>>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

} // namespace boxrt::net
