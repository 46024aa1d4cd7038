// One owned file descriptor, closed when its owner goes (the one RAII descriptor of the
// tree; nothing else calls close() on a descriptor it stores), and the one write-all
// loop (blocking and non-blocking). Standard library and POSIX only: boxrt-init includes it too.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <string_view>
#include <utility>

namespace boxrt {

class unique_fd {
 public:
  unique_fd() = default;
  explicit unique_fd(int fd) noexcept : fd_{fd} {}
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  unique_fd(unique_fd&& other) noexcept : fd_{other.release()} {}
  unique_fd& operator=(unique_fd&& other) noexcept {
    if (this != &other)
      reset(other.release());
    return *this;
  }
  ~unique_fd() { reset(); }

  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }

  /// Gives the descriptor up without closing it.
  int release() noexcept { return std::exchange(fd_, -1); }

  void reset(int fd = -1) noexcept {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

/// Writes all of `data` to `fd`, retrying short writes and EINTR (a blocking
/// descriptor); false with errno when the write fails or the peer is gone.
inline bool write_all(int fd, std::string_view data) {
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

/// The same for a non-blocking `fd`: when it is full, `wait()` runs (it polls for room,
/// or for a reason to stop) and the write goes on while it returns true.
template <class Wait>
bool write_all(int fd, std::string_view data, Wait&& wait) {
  while (!data.empty()) {
    auto n = ::write(fd, data.data(), data.size());
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno != EAGAIN)
      return false;
    if (!wait())
      return false;
  }
  return true;
}

} // namespace boxrt
