// The connection actor of one /rpc/ws socket: turns text frames into requests (the
// envelope rules of protocol.md §1.6), caps in-flight actions, calls the dispatcher and
// renders replies. Internal to net/; the socket side talks to it through `outbound`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <caf/fwd.hpp>

#include "net/audit/audit_log.hpp"
#include "net/rpc/dispatch.hpp"

namespace boxrt::net {

/// The socket side of a connection, as the actor sees it. Both calls are thread-safe
/// and never block: they post onto the socket's strand.
class outbound {
 public:
  virtual ~outbound() = default;

  /// Queues one TEXT message. A `reply` holds its request's in-flight slot until the
  /// socket has written it (see unwritten()).
  virtual void send(std::string text, bool reply = false) = 0;

  /// Queues one frame of a stream (box_exec_stream): written after every message queued
  /// before it (a small reply may go ahead of large ones; a frame never does). With a
  /// `written_token`, the actor gets (written_atom, written_token) once it is written; a
  /// `reply` (a stream's error) holds its slot as send() does.
  virtual void send_frame(std::string text, uint64_t written_token, bool reply = false) = 0;

  /// Replies sent and not yet written to the socket. They still count against the
  /// in-flight cap, so a client that does not read cannot make boxd hold more than
  /// max_inflight replies for it.
  virtual size_t unwritten() const { return 0; }

  /// Closes the socket with `code` and `reason` after every message queued before.
  virtual void close(uint16_t code, std::string reason) = 0;

  /// The actor is done with one inbound message of `bytes` bytes. The socket stops
  /// reading while too much it read is still waiting in the actor's mailbox, so a fast
  /// sender cannot grow that mailbox without bound.
  virtual void consumed(size_t bytes) = 0;

  /// The actor now has `n` requests in flight. Called before the `consumed` of the
  /// message that changed it, so a socket that sees no message waiting also sees the
  /// count that message left behind.
  virtual void in_flight(size_t n) = 0;
};

/// Recognises a bare heartbeat (`__ping` with an integer seq_id, an object `data` and
/// no context) and renders its success reply, exactly as the connection actor would.
/// The socket answers such a frame itself when the actor has nothing in flight and no
/// message waiting, since the actor's answer could then only be that same success:
/// a liveness check then costs no thread hand-off. Not thread-safe: one per socket.
class heartbeat {
 public:
  heartbeat();
  ~heartbeat();
  heartbeat(const heartbeat&) = delete;
  heartbeat& operator=(const heartbeat&) = delete;

  /// The reply to `text` if it is a bare heartbeat; "" otherwise. `text` must carry
  /// simdjson's padding in its capacity, as the socket's messages do.
  std::string reply_to(const std::string& text);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

struct connection_args {
  runtime_actor directory;
  std::shared_ptr<worker_pool> pool;
  std::shared_ptr<shared_state> shared;
  /// The socket; it drops what arrives after the socket (or the server) is gone.
  std::shared_ptr<outbound> out;
  size_t max_message_bytes = 16777216;
  size_t max_inflight = 128;
  /// box_exec_stream's settings (server.stream_*; the token is set per stream).
  stream_params stream;
  /// The file actions' bounds (docs/files.md).
  file_limits files;
  /// "" = no transfer directory for this connection.
  std::string transfer_dir;
  /// For log lines only ("127.0.0.1:53412").
  std::string peer;
  /// The audit trail (server.audit_log); null when off.
  std::shared_ptr<audit_log> audit;
};

/// Spawns the actor of one connection. Messages it takes:
/// - `(frame_atom, std::string)`: one inbound TEXT message;
/// - `(shutdown_atom)`: the server stops: in-flight requests are answered with
///   `BoxRuntimeUnavailableError: Box runtime is shutting down`, the socket is closed with
///   1001 and the actor quits.
/// An exit message (the socket closed) makes it quit; replies still pending are then
/// dropped. On exit its transfer directory is removed on the worker pool.
caf::actor spawn_connection(caf::actor_system& sys, connection_args args);

/// The close reason of server shutdown (protocol.md §4.10.4); not an error text, see
/// shutting_down_text for that.
inline constexpr const char* shutdown_close_reason = "Box runtime shutting down";

} // namespace boxrt::net
