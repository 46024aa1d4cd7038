// Internal to net/rpc/: what the action handlers share (replies, reading the raw data
// object, pool jobs answered on the connection actor, directory round trips, the renderers) and
// the handlers the action table names. Socket-free: no Beast here.
#pragma once

#include "net/rpc/dispatch.hpp"
#include "net/rpc/render.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>
#include <utility>

#include <caf/all.hpp>
#include <simdjson.h>

#include "actors/caf_support.hpp"
#include "actors/deadline.hpp"
#include "backends/mount_policy.hpp"
#include "backends/state/transfer_store.hpp"
#include "messages/base/json.hpp"
#include "messages/base/pytext.hpp"
#include "messages/codec.hpp"
#include "messages/codec_text.hpp"
#include "messages/tenancy.hpp"

namespace boxrt::net {

/// What pool jobs of one connection share: writes to its files happen one at a time,
/// and none starts after the connection closed (close_transfers). Never touched by an
/// actor handler, only by pool threads.
struct transfer_io {
  std::mutex mtx;
  bool closed = false;
};

struct transfer_state {
  /// Distinct keys this connection has uploaded to (protocol.md §1.11: at most 128).
  std::set<std::string, std::less<>> keys;
  std::shared_ptr<transfer_io> io = std::make_shared<transfer_io>();
};

namespace rpc_detail {

using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;
using done_fn = std::function<void(reply)>;

inline constexpr auto json_ok = simdjson::SUCCESS;

/// Protocol limits of __file_chunk (protocol.md §1.11).
inline constexpr size_t file_chunk_bytes = 16384;
constexpr size_t file_chunk_base64_chars = ((file_chunk_bytes + 2) / 3) * 4; // 21848
constexpr size_t max_active_transfers = 128;

reply failure(box_error err);

reply success(std::string json);

box_error not_trusted();

// -- reading the raw data object ------------------------------------------------------

/// The value of `key`, the last one when duplicated (Python's json keeps the last).
std::optional<element> lookup(const element& data, std::string_view key);

box_error key_error(std::string_view key);

/// A JSON integer (never a bool or a float), widened so any uint64 fits.
bool read_integer(const element& e, __int128& out);

std::string trusted_instance(const connection_env& env);

/// True when `instance` may act: equal to the pinned instance, or nothing pinned yet.
bool is_trusted(const connection_env& env, const std::string& instance);

// -- from the worker pool back to the connection actor --------------------------------

/// What a continuation needs to hand work to the pool: the connection actor, the pool
/// and the connection's pool jobs (copied into continuations instead of the env).
struct pool_runner {
  caf::event_based_actor* self = nullptr;
  std::shared_ptr<worker_pool> pool;
  std::shared_ptr<pool_waits> jobs;
};

inline pool_runner runner(const connection_env& env) {
  return {env.self, env.pool, env.jobs};
}

/// Runs `job` on the pool, then `done` with its reply on the connection actor.
void run_blocking_on(const pool_runner& run, std::function<reply()> job, done_fn done);

/// The limits requests between actors are bounded by (the published settings', else
/// the defaults).
runtime_limits limits_of(const connection_env& env);

/// The reply of a failed request between actors: an expired one names the action.
reply failure_of(const caf::error& err, std::string_view action);

// -- directory round trips ------------------------------------------------------------

/// Replies larger than this are rendered on the worker pool: escaping megabytes of
/// output would hold up every other reply of the connection (and its heartbeats).
inline constexpr size_t render_off_actor_bytes = 256 * 1024;

template <class R>
size_t payload_bytes(const R&) {
  return 0;
}

size_t payload_bytes(const exec_result& r);
size_t payload_bytes(const file_result& r);

/// Sends one request to the directory and renders its reply with `render`.
/// The request waits at most the action's deadline (actors/deadline.hpp).
template <class R, class Render, class... Ts>
void ask(connection_env& env, done_fn done, Render render, Ts&&... xs) {
  auto run = runner(env);
  auto action = env.action;
  auto limits = limits_of(env);
  auto deadline = action_deadline(limits);
  ((deadline = std::max(deadline, action_deadline(limits, xs))), ...);
  env.self->request(env.directory, deadline, std::forward<Ts>(xs)...)
    .then(
      [run, done, render](R& r) {
        if (run.pool == nullptr || payload_bytes(r) < render_off_actor_bytes)
          return done(success(render(r)));
        auto held = std::make_shared<R>(std::move(r));  // the job is copied on its way
        run_blocking_on(run, [held, render] { return success(render(*held)); }, done);
      },
      [done, action](caf::error& err) { done(failure_of(err, action)); });
}

/// Runs `next` with the instance settings (config, readiness): the directory's published
/// snapshot, or, before its first probe (or without one), the directory's answer.
template <class Next>
void with_settings(connection_env& env, done_fn done, Next next) {
  if (env.shared && env.shared->settings)
    if (auto s = env.shared->settings->get())
      return next(*s);
  env.self->request(env.directory, action_deadline(limits_of(env)), health_atom_v)
    .then([next](health_info& h) { next(h.settings); },
          [done, action = env.action](caf::error& err) { done(failure_of(err, action)); });
}


template <class T>
auto encoded() {
  return [](const T& x) { return to_json(x); };
}

// -- host-control actions -------------------------------------------------------------

using handler = void (*)(connection_env&, const element&, const action_context*, done_fn);

void do_ping(connection_env&, const element&, const action_context*, done_fn done);

void do_health(connection_env& env, const element&, const action_context*, done_fn done);
void do_list_all_sessions(connection_env& env, const element& data, const action_context*, done_fn done);

void do_backend_info(connection_env& env, const element&, const action_context*, done_fn done);

void do_init(connection_env& env, const element& data, const action_context*, done_fn done);

bool valid_probe_name(std::string_view name);

/// protocol.md §4.10.3 steps 2–7 (blocking: call on the pool).
reply verify_probe(const box_config& config, const std::string& name);

void do_verify(connection_env& env, const element& data, const action_context*, done_fn done);

void do_shutdown(connection_env& env, const element&, const action_context*, done_fn done);

// -- __file_chunk ---------------------------------------------------------------------

bool valid_file_key(std::string_view key);

/// Writes one chunk (blocking: call on the pool), unless the connection closed meanwhile.
reply write_chunk(const std::shared_ptr<transfer_io>& io, const std::string& dir, const std::string& key,
                  const std::string& bytes, bool first, int64_t max_bytes);

void do_file_chunk(connection_env& env, const element& data, const action_context*,
                   done_fn done);

} // namespace rpc_detail

} // namespace boxrt::net
