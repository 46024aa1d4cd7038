// Glue between boxrt's error values and CAF: box_error travels inside caf::error
// (category "boxrt", code = ec, context = the message text) and comes back out.
#pragma once

#include <caf/actor_system_config.hpp>
#include <caf/error.hpp>

#include "messages/error.hpp"

namespace boxrt {

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

} // namespace boxrt
