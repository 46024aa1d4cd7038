// The session's side of a streamed exec (box_exec_stream, docs/streaming.md): the sink
// the backend writes frames to from the worker pool, holding the consumer's credit and
// the reason to stop. Internal to the session actor.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>

#include "backends/stream/exec_sink.hpp"

namespace boxrt {

class stream_gate final : public exec_sink {
 public:
  /// `post` hands one frame to the session actor (a message; never blocks).
  stream_gate(int64_t credit, std::function<void(stream_chunk)> post)
    : credit_(credit), post_(std::move(post)) {}

  wait_result wait_room(clock_type::time_point until) override {
    std::unique_lock lock{mtx_};
    cv_.wait_until(lock, until, [&] { return credit_ > 0 || !stop_.empty(); });
    if (!stop_.empty())
      return wait_result::stop;
    return credit_ > 0 ? wait_result::room : wait_result::expired;
  }

  void emit(stream_chunk chunk) override {
    {
      std::lock_guard lock{mtx_};
      --credit_;
    }
    post_(std::move(chunk));
  }

  std::string stop_reason() const override {
    std::lock_guard lock{mtx_};
    return stop_;
  }

  /// The consumer may take `n` more frames.
  void add_credit(int64_t n) {
    {
      std::lock_guard lock{mtx_};
      credit_ += n;
    }
    cv_.notify_all();
  }

  /// The stream is to end (the first reason stays).
  void stop(std::string why) {
    {
      std::lock_guard lock{mtx_};
      if (stop_.empty())
        stop_ = std::move(why);
    }
    cv_.notify_all();
  }

 private:
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  int64_t credit_;
  std::string stop_;
  std::function<void(stream_chunk)> post_;
};

} // namespace boxrt
