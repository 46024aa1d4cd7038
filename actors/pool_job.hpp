// The one way an actor hands blocking work to the worker pool: the job runs on a pool
// thread and its result comes back to the actor as an ordinary message, so the actor
// never waits and its state is only touched by its own handlers.
#pragma once

#include <tuple>
#include <type_traits>
#include <utility>

#include <caf/send.hpp>

#include "messages/base/worker_pool.hpp"

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

} // namespace boxrt
