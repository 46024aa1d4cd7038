// The host's end of the pipes to boxrt-init (backends/init/init_protocol.hpp): bounded frame
// reads and writes with deadlines, and the checks on what init sends back. Everything
// arriving here was written by a process inside the sandbox, which the tenant controls:
// it is read with a size bound per kind of frame and rejected when inconsistent.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "backends/init/init_protocol.hpp"

namespace boxrt::init_channel {

using clock_type = std::chrono::steady_clock;

enum class read_status { ok, timeout, closed };

/// Reads frames from one descriptor across calls: a frame cut by a deadline is kept and
/// completed by the next call, so short deadlines (a streamed exec's) never lose bytes.
class frame_reader {
 public:
  /// Reads one frame from `fd` before `deadline`. A frame longer than `max_bytes` (or
  /// the protocol's own bound) ends the channel as `closed` without being read. `stop`
  /// (when set) is polled so an interrupt ends the wait promptly even if the pipe stays
  /// open.
  read_status read(int fd, std::string& payload, clock_type::time_point deadline,
                   const std::atomic<bool>* stop, uint32_t max_bytes = init_protocol::max_frame_bytes);

 private:
  std::string buf_;
  size_t need_ = 4;
  bool have_len_ = false;
};

/// One frame with a reader of its own (what a timeout cut is lost: for reads whose
/// timeout ends the channel).
read_status read_frame(int fd, std::string& payload, clock_type::time_point deadline,
                       const std::atomic<bool>* stop,
                       uint32_t max_bytes = init_protocol::max_frame_bytes);

/// Writes one whole frame to the non-blocking `fd` before `deadline`. A sandbox that
/// stops reading (its init stopped, its pipe shrunk) makes this time out instead of
/// blocking a pool thread for good; `stop` ends the wait on an interrupt.
read_status write_frame(int fd, std::string_view data, clock_type::time_point deadline,
                        const std::atomic<bool>* stop);

/// The largest exec reply init may send for `max_output_bytes`: both streams' kept
/// bytes, the start error and the fields' framing.
uint32_t max_reply_bytes(int64_t max_output_bytes);

/// An exec reply as the host accepts it: decoded, and consistent with the request
/// (kept bytes within `max_output_bytes` and within their totals, totals and duration
/// not negative, an error of bounded size). nullopt for anything else.
std::optional<init_protocol::exec_reply> accept_reply(std::string_view payload,
                                                      int64_t max_output_bytes);

} // namespace boxrt::init_channel
