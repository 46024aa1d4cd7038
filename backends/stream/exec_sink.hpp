// A streamed exec's output path on the backend side (box_exec_stream,
// docs/streaming.md): the sink the session gives the backend, and the framer that turns
// a command's raw output into the stream's frames. Plain C++, no CAF.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "messages/models.hpp"

namespace boxrt {

/// Where a streamed exec's frames go, and how the consumer's window and a stop reach the
/// command. Thread-safe: the backend calls it from the worker running the command.
class exec_sink {
 public:
  using clock_type = std::chrono::steady_clock;
  enum class wait_result { room, stop, expired };

  virtual ~exec_sink() = default;
  /// Waits until one more frame may be sent (room), the stream is to end (stop: a cancel,
  /// the consumer gone, the session stopping) or `until` passes (expired).
  virtual wait_result wait_room(clock_type::time_point until) = 0;
  /// Sends one frame; only after wait_room() said room.
  virtual void emit(stream_chunk chunk) = 0;
  /// Why the stream is to end ("cancel", "closed", "stopped"); "" while it is not.
  virtual std::string stop_reason() const = 0;
};

/// Frames a command's raw output: valid UTF-8 text per frame (a sequence cut between two
/// reads waits for its end; invalid bytes become U+FFFD when the frame is encoded, as in
/// box_exec's text), at most params.max_chunk_bytes raw bytes per frame, each sent only
/// when the sink has room, and no more than params.max_output_bytes in all.
class output_framer {
 public:
  using clock_type = exec_sink::clock_type;
  /// ok: framed; stop: the sink said stop; timeout: `deadline` passed while waiting for
  /// room; limit: the output passed max_output_bytes (what fits was framed); gone: the
  /// command's sandbox went away while waiting for room.
  enum class outcome { ok, stop, timeout, limit, gone };

  /// `gone` (when set) is asked every 100 ms while the sink has no room: true ends the
  /// wait (a sandbox that dies is noticed at once, not at the deadline).
  output_framer(exec_sink& sink, const stream_params& params, clock_type::time_point deadline,
                std::function<bool()> gone = {})
    : sink_(sink), params_(params), deadline_(deadline), gone_(std::move(gone)) {}

  /// Frames `raw` of stream 1 (stdout) or 2 (stderr); blocks while the sink has no room.
  outcome push(int stream, std::string_view raw);
  /// Sends what is left of cut sequences (as U+FFFD once encoded).
  outcome flush();

  /// Raw bytes of stream 1 or 2 seen so far.
  int64_t bytes(int stream) const { return seen_[index(stream)]; }
  int64_t frames() const { return frames_; }

 private:
  static size_t index(int stream) { return stream == 2 ? 1 : 0; }
  outcome send(int stream, std::string text, int64_t offset);

  exec_sink& sink_;
  stream_params params_;
  clock_type::time_point deadline_;
  std::function<bool()> gone_;
  /// Per stream: raw bytes seen, bytes framed, and the cut sequence waiting for its end.
  std::array<int64_t, 2> seen_{};
  std::array<int64_t, 2> framed_{};
  std::array<std::string, 2> carry_{};
  int64_t frames_ = 0;
};

} // namespace boxrt
