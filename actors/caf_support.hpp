// Glue between boxrt's error values and CAF: box_error travels inside caf::error
// (category "boxrt", code = ec, context = the message text) and comes back out.
#pragma once

#include <chrono>

#include <caf/actor_system_config.hpp>
#include <caf/error.hpp>

#include "messages/error.hpp"

namespace boxrt {

/// Control requests between actors (a session slot, an eviction, a listing, a skill
/// lookup) answer within this or fail with CAF's request_timeout; a lost reply then
/// becomes an error instead of a request that waits for good.
inline constexpr auto control_timeout = std::chrono::seconds{30};

/// Stopping sessions (a revocation, an eviction's teardown, shutdown) includes tearing
/// their sandboxes down, which is bounded by the kill and reap of every process.
inline constexpr auto stop_timeout = std::chrono::seconds{120};

/// Wraps a box_error for a CAF reply.
caf::error to_caf_error(const box_error& err);

/// Unwraps a reply error. CAF's own errors (timeouts, dead actors) become
/// BoxRuntimeUnavailableError with a clear text.
box_error from_caf_error(const caf::error& err);

/// Registers every boxrt message type with an actor system config.
void add_boxrt_types(caf::actor_system_config& cfg);

/// Registers the types and tunes the scheduler: `threads` workers, and an idle worker
/// waits on its condition variable (woken by new work) instead of CAF 0.17's default
/// 50 µs sleep-polling, which adds up to 50 µs to every hop of a lightly loaded system.
void configure_actor_system(caf::actor_system_config& cfg, size_t threads);

/// The scheduler part of configure_actor_system alone.
void tune_scheduler(caf::actor_system_config& cfg, size_t threads);

} // namespace boxrt
