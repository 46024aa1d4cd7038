// The action table of /rpc/ws: one parsed request in, one reply out. Decodes `data`
// and `context` with the messages/ codecs, applies the per-action rules of
// protocol.md §2 (host-control vs tenant, context checks), calls the directory and
// renders the reference's reply shapes. Runs inside the connection actor.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <caf/fwd.hpp>

#include "actors/actors.hpp"
#include "actors/pool_job.hpp"
#include "actors/settings_snapshot.hpp"
#include "messages/base/worker_pool.hpp"
#include "messages/error.hpp"

namespace simdjson::dom {
class element;
} // namespace simdjson::dom

namespace boxrt::net {

/// One reply: `error` empty means success with `data_json` (an encoded JSON object).
struct reply {
  box_error error;
  std::string data_json = "{}";
};

/// Shared, process-wide state every connection sees.
struct shared_state {
  /// The pinned instance; set once by the first RPC handshake (or pre-set).
  std::function<std::string()> trusted_instance;
  std::string transfer_root;
  /// The directory's published settings (null: ask the directory each time).
  std::shared_ptr<const settings_snapshot> settings;
};

/// The `__file_chunk` uploads of one connection: its distinct active keys and the
/// queue that keeps its file writes one at a time. Owned by the connection actor;
/// defined in dispatch.cpp.
struct transfer_state;

/// The frames of one streamed box_read_file (a caller with flow control; docs/files.md).
/// The connection actor owns the stream's window; the reader asks it for room before
/// each read, so at most the window's frames and one read are held at a time.
struct read_stream {
  /// Queues one data frame (its data JSON) of the stream.
  std::function<void(std::string data_json)> frame;
  /// Calls `next` on the connection actor once the window has room, with true when the
  /// caller cancelled the stream. Never calls it when the stream is gone (an error
  /// reply, a closed connection).
  std::function<void(std::function<void(bool cancelled)> next)> wait_room;
};

/// Per-connection state the dispatcher may use (file transfers live here).
struct connection_env {
  caf::event_based_actor* self = nullptr;
  runtime_actor directory;
  std::shared_ptr<worker_pool> pool;
  std::shared_ptr<shared_state> shared;
  /// This connection's private transfer directory (created on first use).
  std::string transfer_dir;
  /// Distinct active transfer keys of this connection (created on first use).
  std::shared_ptr<transfer_state> transfers;
  /// The connection's pool jobs (run_blocking): the actor that owns this env answers
  /// `(done_atom, uint64_t token)` with `jobs->finish(token)`.
  std::shared_ptr<pool_waits> jobs = std::make_shared<pool_waits>();
  /// The action dispatch() runs now (a name of the action table): what a request
  /// between actors that expires is reported as.
  std::string_view action;
  /// box_exec_stream: the stream the request being dispatched opens (set by the
  /// connection actor, which owns the stream's frames; docs/streaming.md).
  stream_params stream;
  /// box_read_file with stream_flow_control: the stream the request opens (set by the
  /// connection actor for the request being dispatched; null otherwise).
  std::shared_ptr<read_stream> read;
  /// The file actions' bounds (server.max_file_call_bytes, server.max_list_entries;
  /// docs/files.md).
  file_limits files;
};

/// True when `action` is one this runtime knows (others get
/// "ValueError: Action <name> not found").
bool known_action(std::string_view action);

/// Runs `action`. `data` is the request's data value (already checked to be an object),
/// `context` its decoded context or nullptr when absent (net/rpc/envelope.hpp reads both).
/// `done` is called exactly once, on the connection actor's thread.
void dispatch(connection_env& env, std::string_view action, const simdjson::dom::element& data,
              const action_context* context, std::function<void(reply)> done);

/// Deletes this connection's transfer directory and forgets its keys (on the worker
/// pool, without waiting). Call once when the connection closes.
void close_transfers(connection_env& env);

/// Runs `job` on env.pool and then `done` with its reply on the connection actor's
/// thread (env.jobs: the pool's completion is a message to the actor).
void run_blocking(connection_env& env, std::function<reply()> job, std::function<void(reply)> done);

} // namespace boxrt::net
