#include "net/audit/audit_log.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include <spdlog/spdlog.h>

#include "messages/base/json.hpp"
#include "messages/tenancy.hpp"

namespace boxrt::net {

namespace {

/// "2026-12-06T03:04:05.123456Z".
std::string iso_us(int64_t now_us) {
  std::time_t secs = static_cast<std::time_t>(now_us / 1000000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(now_us % 1000000));
  return buf;
}

} // namespace

std::string audit_line(const audit_record& r, int64_t now_us) {
  json::writer w;
  auto text_or_null = [&](const std::string& v) {
    if (v.empty())
      w.null();
    else
      w.value(json::sanitize_utf8(v));
  };
  w.begin_object();
  w.key("time").value(iso_us(now_us));
  w.key("action").value(r.action);
  w.key("instance");
  text_or_null(r.instance);
  w.key("workspace");
  text_or_null(r.workspace);
  w.key("namespace");
  if (r.instance.empty() || r.workspace.empty())
    w.null();
  else
    w.value(box_namespace(r.instance, r.workspace));
  w.key("session");
  text_or_null(r.session);
  w.key("decision").value(r.allowed ? "allowed" : "refused");
  w.key("error_class");
  text_or_null(r.error_class);
  w.key("exit_code");
  if (r.exit_code)
    w.value(*r.exit_code);
  else
    w.null();
  w.key("duration_ms").value(static_cast<double>(r.duration_us) / 1000.0);
  w.key("peer");
  text_or_null(r.peer);
  if (r.command)
    w.key("command").value(json::sanitize_utf8(*r.command));
  w.end_object();
  return w.take();
}

std::string egress_audit_line(const std::string& ns, const std::string& name, const std::string& address,
                              int port, const std::string& reason, int64_t now_us) {
  json::writer w;
  w.begin_object();
  w.key("time").value(iso_us(now_us));
  w.key("action").value("egress");
  w.key("namespace").value(ns);
  w.key("decision").value("refused");
  w.key("reason").value(reason);
  w.key("name");
  if (name.empty())
    w.null();
  else
    w.value(json::sanitize_utf8(name));
  w.key("address").value(address);
  w.key("port").value(static_cast<int64_t>(port));
  w.end_object();
  return w.take();
}

std::shared_ptr<audit_log> audit_log::open(const audit_options& opts, std::string& error) {
  if (opts.path.empty())
    return nullptr;
  int fd = ::open(opts.path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    error = "cannot open the audit log " + opts.path + ": " + std::strerror(errno);
    return nullptr;
  }
  struct stat st{};
  uint64_t size = ::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  return std::shared_ptr<audit_log>(new audit_log(opts, fd, size));
}

audit_log::audit_log(audit_options opts, int fd, uint64_t size)
  : opts_(std::move(opts)), fd_(fd), size_(size), thread_([this] { run(); }) {}

audit_log::~audit_log() {
  {
    std::lock_guard lock{mtx_};
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  if (fd_ >= 0)
    ::close(fd_);
}

void audit_log::append(std::string line, std::function<void(bool)> written) {
  {
    std::lock_guard lock{mtx_};
    if (!written) {
      if (unwaited_ >= max_unwaited) {
        ++dropped_;
        return;
      }
      ++unwaited_;
    }
    queue_.emplace_back(std::move(line), std::move(written));
  }
  cv_.notify_one();
}

uint64_t audit_log::written() const {
  std::lock_guard lock{mtx_};
  return written_;
}

void audit_log::run() {
  std::unique_lock lock{mtx_};
  while (true) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty())
      return;  // stopping, and every line written
    auto batch = std::exchange(queue_, {});
    const auto dropped = std::exchange(dropped_, 0);
    unwaited_ = 0;
    lock.unlock();
    if (dropped > 0) {
      auto now = std::chrono::duration_cast<std::chrono::microseconds>(
                   std::chrono::system_clock::now().time_since_epoch()).count();
      write_line("{\"time\":\"" + iso_us(now) + "\",\"dropped\":" + std::to_string(dropped) + "}");
      spdlog::warn("audit: {} line(s) of refusals dropped while the log fell behind", dropped);
    }
    for (auto& [line, written] : batch) {
      bool ok = write_line(line);
      if (written)
        written(ok);
    }
    lock.lock();
    written_ += batch.size();
  }
}

bool audit_log::write_line(const std::string& text) {
  auto line = text + "\n";
  if (opts_.max_bytes > 0 && size_ > 0 && size_ + line.size() > opts_.max_bytes)
    rotate();
  size_t done = 0;
  while (done < line.size()) {
    auto n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      spdlog::error("audit: cannot write {}: {}", opts_.path, std::strerror(errno));
      return false;
    }
    done += static_cast<size_t>(n);
  }
  size_ += line.size();
  return true;
}

void audit_log::rotate() {
  // FILE.(n-2) -> FILE.(n-1), ..., FILE -> FILE.1; the oldest goes.
  for (uint32_t i = opts_.files > 1 ? opts_.files - 1 : 0; i >= 1; --i) {
    auto from = i == 1 ? opts_.path : opts_.path + "." + std::to_string(i - 1);
    auto to = opts_.path + "." + std::to_string(i);
    ::rename(from.c_str(), to.c_str());
  }
  if (opts_.files <= 1)
    ::unlink(opts_.path.c_str());
  int fd = ::open(opts_.path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    // Keeps writing to the renamed file, and rotates no more until it is full again.
    spdlog::error("audit: cannot open {} after rotating it: {}", opts_.path, std::strerror(errno));
    size_ = 0;
    return;
  }
  ::close(fd_);
  fd_ = fd;
  size_ = 0;
}

} // namespace boxrt::net
