// The process's end of a stdio relay whose WebSocket is on another cluster node
// (docs/cluster.md "Instance-wide and connection-bound state"). The session that grants
// the process to a relay actor of another node spawns a pump beside the process; the
// pump and that relay actor speak these messages, all from one sender each way (so each
// direction keeps its order):
//
//   pump -> relay:  (pump_atom)                   first, so the relay knows the pump
//                   (stdout_atom, std::string)    a chunk of stdout, at most the credit
//                   (written_atom, uint64_t, bool) a stdin line of that many bytes was
//                                                 written (false: stdin is closed)
//                   (stdend_atom, int32_t)        the end, a stdio_end value; the pump quits
//   relay -> pump:  (credit_atom, uint64_t)       that many more stdout bytes may be sent
//                   (stdin_atom, std::string)     a line for stdin, written in order
//
// Credit bounds what is in flight: the relay grants relay_queue_bytes at first and then
// gives back what its WebSocket has written, so stdout waits in the pipe, not in memory.
// The pump ends with the process's stdout, with the relay actor (it monitors it) and
// when the session lets go of it.
#pragma once

#include <cstdint>
#include <memory>

#include <caf/fwd.hpp>

#include "actors/actors.hpp"
#include "actors/process_registry.hpp"
#include "messages/base/worker_pool.hpp"

namespace boxrt {

/// Why a pump ended (stdend_atom).
enum class stdio_end : int32_t {
  exited = 0,      // stdout reached its end: the process exited
  unavailable = 1, // the process has no stdout to read
  stale = 2,       // the session was retired by a fence advance
};

/// A random key for the anonymous messages of a pump or a relay: only the one that made
/// it and its own helpers know it.
uint64_t stdio_key();

/// Spawns the pump for `relay` (an actor of another node) over `entry`'s process;
/// stdin lines are written on `pool`, one at a time.
stdio_pump_actor spawn_stdio_pump(caf::actor_system& sys, stdio_relay_actor relay,
                            std::shared_ptr<process_registry::entry> entry,
                            std::shared_ptr<worker_pool> pool);

} // namespace boxrt
