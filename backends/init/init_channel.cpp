#include "backends/init/init_channel.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace boxrt::init_channel {

namespace proto = init_protocol;

read_status frame_reader::read(int fd, std::string& payload, clock_type::time_point deadline,
                               const std::atomic<bool>* stop, uint32_t max_bytes) {
  char chunk[65536];
  for (;;) {
    if (buf_.size() >= need_) {
      if (!have_len_) {
        auto n = proto::get_u32(buf_.data());
        if (n > max_bytes || n > proto::max_frame_bytes)
          return read_status::closed;
        need_ = 4 + n;
        have_len_ = true;
        continue;
      }
      payload.assign(buf_, 4, need_ - 4);
      buf_.clear();
      need_ = 4;
      have_len_ = false;
      return read_status::ok;
    }
    if (stop && stop->load())
      return read_status::closed;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now()).count();
    if (left <= 0)
      return read_status::timeout;
    pollfd p{fd, POLLIN, 0};
    auto rc = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 200)));
    if (rc < 0 && errno != EINTR)
      return read_status::closed;
    if (rc <= 0)
      continue;
    auto n = ::read(fd, chunk, std::min(sizeof chunk, need_ - buf_.size()));
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (n <= 0)
      return read_status::closed;
    buf_.append(chunk, static_cast<size_t>(n));
  }
}

read_status read_frame(int fd, std::string& payload, clock_type::time_point deadline,
                       const std::atomic<bool>* stop, uint32_t max_bytes) {
  frame_reader reader;
  return reader.read(fd, payload, deadline, stop, max_bytes);
}

read_status write_frame(int fd, std::string_view data, clock_type::time_point deadline,
                        const std::atomic<bool>* stop) {
  auto status = read_status::closed;
  auto room = [&] {
    if (stop && stop->load())
      return false;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now()).count();
    if (left <= 0) {
      status = read_status::timeout;
      return false;
    }
    pollfd p{fd, POLLOUT, 0};
    auto rc = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 200)));
    return !(rc < 0 && errno != EINTR) && !(rc > 0 && (p.revents & (POLLERR | POLLHUP)) != 0);
  };
  return write_all(fd, data, room) ? read_status::ok : status;
}

uint32_t max_reply_bytes(int64_t max_output_bytes) {
  constexpr uint64_t slack = 64 * 1024;  // tag, numbers, their lengths, the error
  // Bounded first: twice a cap near INT64_MAX would wrap.
  auto cap = std::min<uint64_t>(static_cast<uint64_t>(std::max<int64_t>(max_output_bytes, 0)),
                                proto::max_frame_bytes);
  return static_cast<uint32_t>(std::min<uint64_t>(2 * cap + slack, proto::max_frame_bytes));
}

std::optional<proto::exec_reply> accept_reply(std::string_view payload, int64_t max_output_bytes) {
  auto r = proto::decode_reply(payload);
  if (!r)
    return std::nullopt;
  auto cap = static_cast<uint64_t>(std::max<int64_t>(max_output_bytes, 0));
  // decode_reply cast the totals from int64: a negative total arrives above 2^63.
  constexpr uint64_t sign = uint64_t{1} << 63;
  if (r->stdout_kept.size() > cap || r->stderr_kept.size() > cap
      || r->stdout_total >= sign || r->stderr_total >= sign
      || r->stdout_kept.size() > r->stdout_total || r->stderr_kept.size() > r->stderr_total
      || r->duration_ms < 0 || r->error.size() > 32 * 1024)
    return std::nullopt;
  return r;
}

} // namespace boxrt::init_channel
