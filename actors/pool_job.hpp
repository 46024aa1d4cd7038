// The one way an actor hands blocking work to the worker pool: the job runs on a pool
// thread and its result comes back to the actor as an ordinary message, so the actor
// never waits and its state is only touched by its own handlers. pool_job sends the
// result itself; pool_waits, built on it, keeps a continuation per job and sends only
// (done_atom, token), for actors whose next step is code rather than a message type.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include <caf/send.hpp>
#include <spdlog/spdlog.h>

#include "messages/base/worker_pool.hpp"
#include "messages/type_ids.hpp"

namespace boxrt {

namespace detail {
template <class T>
struct is_tuple : std::false_type {};
template <class... Ts>
struct is_tuple<std::tuple<Ts...>> : std::true_type {};
} // namespace detail

/// Runs `job` on `pool`, then sends `(head..., job())` to `to`: `(head...)` when the job
/// returns nothing, `(head..., x, y)` when it returns `std::tuple{x, y}`. `to` is the
/// actor's own handle, typed, so the message is checked against its interface.
template <class Handle, class Job, class... Head>
void pool_job(worker_pool& pool, Handle to, Job job, Head... head) {
  pool.submit([to = std::move(to), job = std::move(job), head...]() mutable {
    using out_type = decltype(job());
    if constexpr (std::is_void_v<out_type>) {
      job();
      caf::anon_send(to, head...);
    } else if constexpr (detail::is_tuple<out_type>::value) {
      std::apply([&](auto&&... xs) { caf::anon_send(to, head..., std::move(xs)...); }, job());
    } else {
      caf::anon_send(to, head..., job());
    }
  });
}

/// The pool jobs of one actor whose continuations wait on it. The actor's behaviour
/// answers `(done_atom, uint64_t token)` with `finish(token)`; nothing else touches this
/// object but the actor's own handlers.
class pool_waits {
 public:
  /// Runs `job` on `pool`, then `next(std::optional{job()})` on the actor `to` (nullopt
  /// when the job threw). The result stays in memory shared with the job; the message
  /// that wakes the actor carries only the token, and is sent whatever the job did, so
  /// no continuation waits forever. Returns the token.
  template <class Handle, class Job, class Next>
  uint64_t run(worker_pool& pool, Handle to, Job job, Next next) {
    using out_type = decltype(job());
    auto out = std::make_shared<std::optional<out_type>>();
    auto token = next_++;
    waits_.emplace(token, [out, next = std::move(next)]() mutable { next(std::move(*out)); });
    pool_job(
      pool, std::move(to),
      [out, job = std::move(job)]() mutable {
        try {
          out->emplace(job());
        } catch (const std::exception& e) {
          spdlog::error("worker pool job failed: {}", e.what());
        }
      },
      done_atom_v, token);
    return token;
  }

  /// Runs the continuation of `token` (once); false when there is none.
  bool finish(uint64_t token) {
    auto i = waits_.find(token);
    if (i == waits_.end())
      return false;
    auto next = std::move(i->second);
    waits_.erase(i);
    next();
    return true;
  }

  bool empty() const { return waits_.empty(); }
  /// Drops every continuation (the actor ends; its jobs' messages go nowhere).
  void clear() { waits_.clear(); }

 private:
  uint64_t next_ = 0;
  std::unordered_map<uint64_t, std::function<void()>> waits_;
};

} // namespace boxrt
