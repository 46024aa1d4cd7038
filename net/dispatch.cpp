// The action table of /rpc/ws (protocol.md §2): context rules, decoding, one directory
// round trip per action and the reference's reply shapes. Blocking work (upload files,
// box_init's default workspace, the shared-workspace probe) runs on the worker pool and
// comes back to the connection actor through a one-shot bridge actor (run_blocking).
#include "net/dispatch.hpp"

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
#include "backends/mount_policy.hpp"
#include "backends/transfer_store.hpp"
#include "messages/base/pytext.hpp"
#include "messages/codec.hpp"
#include "messages/codec_text.hpp"
#include "messages/json.hpp"
#include "messages/tenancy.hpp"

namespace boxrt::net {

namespace {

/// What pool jobs of one connection share: writes to its files happen one at a time,
/// and none starts after the connection closed (close_transfers). Never touched by an
/// actor handler, only by pool threads.
struct transfer_io {
  std::mutex mtx;
  bool closed = false;
};

} // namespace

struct transfer_state {
  /// Distinct keys this connection has uploaded to (protocol.md §1.11: at most 128).
  std::set<std::string, std::less<>> keys;
  std::shared_ptr<transfer_io> io = std::make_shared<transfer_io>();
};

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;
using done_fn = std::function<void(reply)>;

constexpr auto json_ok = simdjson::SUCCESS;

/// Protocol limits of __file_chunk (protocol.md §1.11).
constexpr size_t file_chunk_bytes = 16384;
constexpr size_t file_chunk_base64_chars = ((file_chunk_bytes + 2) / 3) * 4; // 21848
constexpr size_t max_active_transfers = 128;

reply failure(box_error err) {
  return reply{std::move(err), "{}"};
}

reply success(std::string json) {
  return reply{{}, std::move(json)};
}

box_error not_trusted() {
  return {ec::permission, "Box action context does not match the trusted instance"};
}

// -- reading the raw data object ------------------------------------------------------

/// The value of `key`, the last one when duplicated (Python's json keeps the last).
std::optional<element> lookup(const element& data, std::string_view key) {
  object obj;
  if (data.get_object().get(obj) != json_ok)
    return std::nullopt;
  std::optional<element> found;
  for (auto field : obj)
    if (field.key == key)
      found = field.value;
  return found;
}

box_error key_error(std::string_view key) {
  return {ec::key, "'" + std::string{key} + "'"};
}

/// A JSON integer (never a bool or a float), widened so any uint64 fits.
bool read_integer(const element& e, __int128& out) {
  switch (e.type()) {
    case element_type::INT64: out = e.get_int64().value_unsafe(); return true;
    case element_type::UINT64: out = e.get_uint64().value_unsafe(); return true;
    default: return false;
  }
}

std::string trusted_instance(const connection_env& env) {
  if (env.shared && env.shared->trusted_instance)
    return env.shared->trusted_instance();
  return {};
}

/// True when `instance` may act: equal to the pinned instance, or nothing pinned yet.
bool is_trusted(const connection_env& env, const std::string& instance) {
  auto trusted = trusted_instance(env);
  return trusted.empty() || trusted == instance;
}

// -- the bridge from the worker pool back to the connection actor --------------------

/// One-shot actor: on `probe` it runs `job` on the pool and answers when the job is done
/// (the pool reports back with `done`), then quits. The answer arrives at the requester
/// as an ordinary response, i.e. on the requester's own thread.
caf::behavior bridge(caf::event_based_actor* self, std::shared_ptr<worker_pool> pool,
                     std::function<void()> job) {
  auto promise = std::make_shared<caf::typed_response_promise<bool>>();
  return {
    [self, pool, job, promise](probe_atom) -> caf::result<bool> {
      *promise = self->make_response_promise<bool>();
      auto handle = caf::actor_cast<caf::actor>(self);
      pool->submit([job, handle] {
        job();
        caf::anon_send(handle, done_atom_v);
      });
      return *promise;
    },
    [self, promise](done_atom) {
      promise->deliver(true);
      self->quit();
    },
  };
}

void run_blocking_on(caf::event_based_actor* self, std::shared_ptr<worker_pool> pool,
                     std::function<reply()> job, done_fn done) {
  auto out = std::make_shared<reply>();
  std::function<void()> wrapped = [job = std::move(job), out] {
    try {
      *out = job();
    } catch (const std::exception& e) {
      *out = failure({ec::runtime, e.what()});
    }
  };
  auto helper = self->system().spawn(bridge, std::move(pool), std::move(wrapped));
  self->request(helper, caf::infinite, probe_atom_v)
    .then([out, done](bool) { done(std::move(*out)); },
          [done](caf::error& err) { done(failure(from_caf_error(err))); });
}

// -- directory round trips ------------------------------------------------------------

/// Replies larger than this are rendered on the worker pool: escaping megabytes of
/// output would hold up every other reply of the connection (and its heartbeats).
constexpr size_t render_off_actor_bytes = 256 * 1024;

template <class R>
size_t payload_bytes(const R&) {
  return 0;
}

size_t payload_bytes(const exec_result& r) {
  return r.stdout_text.size() + r.stderr_text.size();
}

/// Sends one request to the directory and renders its reply with `render`.
template <class R, class Render, class... Ts>
void ask(connection_env& env, done_fn done, Render render, Ts&&... xs) {
  auto* self = env.self;
  auto pool = env.pool;
  env.self->request(env.directory, caf::infinite, std::forward<Ts>(xs)...)
    .then(
      [self, pool, done, render](R& r) {
        if (pool == nullptr || payload_bytes(r) < render_off_actor_bytes)
          return done(success(render(r)));
        auto held = std::make_shared<R>(std::move(r));  // the job is copied on its way
        run_blocking_on(
          self, pool, [held, render] { return success(render(*held)); }, done);
      },
      [done](caf::error& err) { done(failure(from_caf_error(err))); });
}

/// Fetches the instance settings (config, readiness), then runs `next` with them.
template <class Next>
void with_settings(connection_env& env, done_fn done, Next next) {
  env.self->request(env.directory, caf::infinite, health_atom_v)
    .then([next](health_info& h) { next(h.settings); },
          [done](caf::error& err) { done(failure(from_caf_error(err))); });
}

// -- renderers ------------------------------------------------------------------------

void name_or_null(json::writer& w, const std::string& name) {
  if (name.empty())
    w.null();
  else
    w.value(name);
}

bool admission_configured(const instance_settings& s) {
  return s.config.admission_mode();
}

bool instance_ready(const instance_settings& s) {
  return s.probed && s.ready;
}

/// The readiness dict of protocol.md §4.9.6 (contract §4.1: limits_mechanism).
void write_readiness(json::writer& w, const instance_settings& s) {
  const bool admission = admission_configured(s);
  w.begin_object();
  w.key("ready").value(instance_ready(s));
  w.key("mode").value(admission ? "grant_enforced" : "standard");
  w.key("backend").begin_object();
  w.key("name");
  name_or_null(w, s.backend_name);
  if (admission) {
    auto it = s.checks.find("backend_available");
    w.key("available").value(s.probed && it != s.checks.end() && it->second);
    w.key("details").begin_object();
    for (const auto& [key, value] : s.backend_report.details)
      w.key(key).value(value);
    w.key("limits_mechanism");
    name_or_null(w, s.backend_report.limits_mechanism);
    w.end_object();
  } else {
    w.key("available").value(s.probed && s.backend_available);
  }
  w.end_object();
  w.key("checks").begin_object();
  for (const auto& [key, value] : s.checks)
    w.key(key).value(s.probed && value);
  w.end_object();
  if (admission)
    w.key("unsafe_soft_storage_limits").value(s.unsafe_soft_storage);
  if (!s.readiness_error.empty())
    w.key("error").value(s.readiness_error);
  w.end_object();
}

std::string backend_info_json(const instance_settings& s) {
  json::writer w;
  w.begin_object();
  w.key("name");
  name_or_null(w, s.backend_name);
  w.key("available").value(s.probed && s.backend_available);
  w.end_object();
  return w.take();
}

std::string status_json(const status_info& x) {
  json::writer w;
  w.begin_object();
  w.key("backend").begin_object();
  w.key("name");
  name_or_null(w, x.backend_name);
  w.key("available").value(x.backend_available);
  w.end_object();
  w.key("active_sessions").value(x.active_sessions);
  w.key("managed_processes").value(x.managed_processes);
  w.key("session_ttl_sec").value(x.session_ttl_sec);
  w.key("limits").begin_object();
  w.key("max_sessions").value(x.limits.max_sessions);
  w.key("max_managed_processes").value(x.limits.max_managed_processes);
  w.key("max_completed_processes").value(x.limits.max_completed_processes);
  w.key("max_admission_records").value(x.limits.max_admission_records);
  w.key("max_rpc_file_bytes").value(x.limits.max_rpc_file_bytes);
  w.end_object();
  w.end_object();
  return w.take();
}

template <class T>
auto encoded() {
  return [](const T& x) { return to_json(x); };
}

// -- host-control actions -------------------------------------------------------------

using handler = void (*)(connection_env&, const element&, const action_context*, done_fn);

void do_ping(connection_env&, const element&, const action_context*, done_fn done) {
  done(success("{}"));
}

void do_health(connection_env& env, const element&, const action_context*, done_fn done) {
  with_settings(env, done, [done](const instance_settings& s) {
    if (!admission_configured(s))
      return done(success(backend_info_json(s)));
    if (!instance_ready(s))
      return done(failure({ec::readiness, "managed sandbox isolation is not ready"}));
    json::writer w;
    write_readiness(w, s);
    done(success(w.take()));
  });
}

void do_backend_info(connection_env& env, const element&, const action_context*, done_fn done) {
  with_settings(env, done, [done](const instance_settings& s) {
    if (!admission_configured(s))
      return done(success(backend_info_json(s)));
    json::writer w;
    w.begin_object();
    w.key("name");
    name_or_null(w, s.backend_name);
    w.key("available").value(instance_ready(s));
    w.key("readiness");
    write_readiness(w, s);
    w.end_object();
    done(success(w.take()));
  });
}

void do_init(connection_env& env, const element& data, const action_context*, done_fn done) {
  // `data` lives only during dispatch(); the config merges over the current one, which
  // comes from the directory, so the request is kept as text meanwhile.
  auto text = simdjson::minify(data);
  auto self = env.self;
  auto pool = env.pool;
  auto directory = env.directory;
  with_settings(env, done, [self, pool, directory, text, done](const instance_settings& s) {
    auto decoded = decode_text(text, [&s](const element& root) {
      return decode_box_config(root, s.config);
    });
    if (!decoded)
      return done(failure(decoded.error()));
    auto next = std::make_shared<box_config>(std::move(decoded.value()));
    // Nothing changes unless every check passed: the default workspace is ensured
    // before the directory sees the new config (the reference applies it first).
    run_blocking_on(
      self, pool,
      [next] {
        next->local = resolve_local(next->local);
        if (auto err = ensure_default_workspace(next->local))
          return failure(std::move(err));
        return success("{}");
      },
      [self, directory, next, done](reply r) {
        if (r.error)
          return done(std::move(r));
        self->request(directory, caf::infinite, init_atom_v, *next)
          .then([done](bool) { done(success(R"({"initialized":true})")); },
                [done](caf::error& err) { done(failure(from_caf_error(err))); });
      });
  });
}

void do_grant(connection_env& env, const element& data, const action_context*, done_fn done) {
  auto grant = decode_admission_grant(data);
  if (!grant)
    return done(failure(grant.error()));
  if (!is_trusted(env, grant->instance_uuid))
    return done(failure(
      {ec::permission, "Sandbox admission grant does not match the trusted instance"}));
  ask<grant_receipt>(env, done, encoded<grant_receipt>(), grant_atom_v, std::move(grant.value()));
}

void do_revoke(connection_env& env, const element& data, const action_context*, done_fn done) {
  auto rev = decode_admission_revocation(data);
  if (!rev)
    return done(failure(rev.error()));
  if (!is_trusted(env, rev->instance_uuid))
    return done(failure(
      {ec::permission, "Sandbox admission revocation does not match the trusted instance"}));
  ask<revocation_receipt>(env, done, encoded<revocation_receipt>(), revoke_atom_v,
                          std::move(rev.value()));
}

void do_entitlement(connection_env& env, const element& data, const action_context*,
                    done_fn done) {
  auto snap = decode_entitlement_snapshot(data);
  if (!snap)
    return done(failure(snap.error()));
  if (!is_trusted(env, snap->instance_uuid))
    return done(failure({ec::entitlement_unavailable,
                         "Entitlement scope does not match the Workspace execution context"}));
  ask<entitlement_receipt>(env, done, encoded<entitlement_receipt>(), entitle_atom_v,
                           std::move(snap.value()));
}

bool valid_probe_name(std::string_view name) {
  constexpr std::string_view prefix = ".langbot-box-volume-probe-";
  if (name.size() != prefix.size() + 32 || name.substr(0, prefix.size()) != prefix)
    return false;
  return std::all_of(name.begin() + prefix.size(), name.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
}

/// protocol.md §4.10.3 steps 2–7 (blocking: call on the pool).
reply verify_probe(const box_config& config, const std::string& name) {
  auto readiness = [](std::string text) { return failure({ec::readiness, std::move(text)}); };
  if (auto err = check_managed_workspace_root(config); !err.empty())
    return readiness(err);
  const auto unreadable = "Box Runtime cannot read the Core shared Workspace probe";
  std::error_code err;
  auto resolved = std::filesystem::canonical(config.local.default_workspace, err);
  if (err)
    return readiness(unreadable);
  int root = ::open(resolved.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (root < 0)
    return readiness(unreadable);
  // O_NONBLOCK: a FIFO planted under the marker's name must not hang a pool thread; it
  // is refused below as not a regular file.
  int fd = ::openat(root, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  ::close(root);
  if (fd < 0)
    return readiness(unreadable);
  auto result = [&]() -> reply {
    struct stat st {};
    if (::fstat(fd, &st) != 0)
      return readiness(unreadable);
    if (!S_ISREG(st.st_mode))
      return readiness("Box shared Workspace probe is not a regular file");
    if (st.st_size <= 0 || st.st_size > 1024)
      return readiness("Box shared Workspace probe has an invalid size");
    std::string content;
    char buf[1024];
    for (;;) {
      auto want = std::min<size_t>(1024 - content.size() + 1, sizeof(buf));
      auto n = ::read(fd, buf, want);
      if (n < 0) {
        if (errno == EINTR)
          continue;
        return readiness(unreadable);
      }
      if (n == 0)
        break;
      content.append(buf, static_cast<size_t>(n));
      if (content.size() > 1024)
        return readiness("Box shared Workspace probe exceeds the size limit");
    }
    if (static_cast<off_t>(content.size()) != st.st_size)
      return readiness("Box shared Workspace probe changed while being verified");
    json::writer w;
    w.begin_object();
    w.key("marker_name").value(name);
    w.key("sha256").value(sha256_hex(content));
    w.key("size").value(static_cast<int64_t>(content.size()));
    w.end_object();
    return success(w.take());
  }();
  ::close(fd);
  return result;
}

void do_verify(connection_env& env, const element& data, const action_context*, done_fn done) {
  // The reference reads str(value or "").strip(): anything but a matching string fails.
  std::string name;
  if (auto v = lookup(data, "marker_name")) {
    std::string_view s;
    if (v->get_string().get(s) == json_ok)
      name = std::string{py::strip(s)};
  }
  if (!valid_probe_name(name))
    return done(failure({ec::readiness, "Invalid Box shared Workspace probe basename"}));
  auto self = env.self;
  auto pool = env.pool;
  with_settings(env, done, [self, pool, name, done](const instance_settings& s) {
    auto config = s.config;
    run_blocking_on(self, pool, [config, name] { return verify_probe(config, name); }, done);
  });
}

void do_shutdown(connection_env& env, const element&, const action_context*, done_fn done) {
  ask<int64_t>(env, done, [](int64_t) { return std::string{"{}"}; }, shutdown_atom_v);
}

// -- __file_chunk ---------------------------------------------------------------------

bool valid_file_key(std::string_view key) {
  if (key.empty() || key.size() > 255 || key.find("..") != std::string_view::npos)
    return false;
  auto alnum = [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
  };
  if (!alnum(key.front()))
    return false;
  return std::all_of(key.begin(), key.end(),
                     [&](char c) { return alnum(c) || c == '.' || c == '_' || c == '-'; });
}

/// Python's base64.b64decode(s, validate=True): the alphabet only, padding at the end.
/// binascii.Error is a ValueError; its texts are kept.
result<std::string> strict_base64(std::string_view s) {
  auto digit = [](char c) -> int {
    if (c >= 'A' && c <= 'Z')
      return c - 'A';
    if (c >= 'a' && c <= 'z')
      return c - 'a' + 26;
    if (c >= '0' && c <= '9')
      return c - '0' + 52;
    if (c == '+')
      return 62;
    if (c == '/')
      return 63;
    return -1;
  };
  size_t data_chars = s.size();
  while (data_chars > 0 && s[data_chars - 1] == '=')
    --data_chars;
  const size_t pads = s.size() - data_chars;
  for (size_t i = 0; i < data_chars; ++i)
    if (digit(s[i]) < 0)
      return box_error{ec::value, "Only base64 data is allowed"};
  if (pads > 2 || s.size() % 4 != 0) {
    if (data_chars % 4 == 1)
      return box_error{ec::value, "Invalid base64-encoded string: number of data characters ("
                                    + std::to_string(data_chars)
                                    + ") cannot be 1 more than a multiple of 4"};
    return box_error{ec::value, "Incorrect padding"};
  }
  std::string out;
  out.reserve(data_chars / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < data_chars; ++i) {
    acc = (acc << 6) | static_cast<uint32_t>(digit(s[i]));
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}


/// Writes one chunk (blocking: call on the pool), unless the connection closed meanwhile.
reply write_chunk(const std::shared_ptr<transfer_io>& io, const std::string& dir, const std::string& key,
                  const std::string& bytes, bool first, int64_t max_bytes) {
  std::lock_guard<std::mutex> guard{io->mtx};
  if (io->closed)
    return failure({ec::runtime_unavailable, "Connection closed"});
  if (auto err = write_transfer_chunk(dir, key, bytes, first, max_bytes))
    return failure(std::move(err));
  return success("{}");
}

void do_file_chunk(connection_env& env, const element& data, const action_context*,
                   done_fn done) {
  auto invalid = [&](const char* text) { done(failure({ec::value, text})); };
  // The reference's order: the key first (read and checked), then the other keys are
  // read (KeyError), then each check of the protocol.md §1.11 table.
  auto key_v = lookup(data, "file_key");
  if (!key_v)
    return done(failure(key_error("file_key")));
  std::string_view key;
  if (key_v->get_string().get(key) != json_ok || !valid_file_key(key))
    return invalid("Invalid file transfer key");
  auto b64_v = lookup(data, "chunk_base64");
  if (!b64_v)
    return done(failure(key_error("chunk_base64")));
  auto index_v = lookup(data, "chunk_index");
  if (!index_v)
    return done(failure(key_error("chunk_index")));
  auto amount_v = lookup(data, "chunk_amount");
  if (!amount_v)
    return done(failure(key_error("chunk_amount")));
  std::string_view b64;
  if (b64_v->get_string().get(b64) != json_ok || py::code_points(b64) > file_chunk_base64_chars)
    return invalid("File transfer chunk exceeds the protocol limit");
  __int128 index = 0;
  __int128 amount = 0;
  if (!read_integer(*index_v, index) || !read_integer(*amount_v, amount) || amount <= 0
      || index < 0 || index >= amount)
    return invalid("Invalid file chunk position");
  auto bytes = strict_base64(b64);
  if (!bytes)
    return done(failure(bytes.error()));
  if (bytes->size() > file_chunk_bytes)
    return invalid("File transfer chunk exceeds the protocol limit");
  // The transport leaves transfer_dir empty when uploads have nowhere to go.
  if (env.transfer_dir.empty())
    return done(failure({ec::runtime, "File transfers are not available on this connection"}));
  if (!env.transfers)
    env.transfers = std::make_shared<transfer_state>();
  auto& keys = env.transfers->keys;
  if (keys.find(key) == keys.end()) {
    if (keys.size() >= max_active_transfers)
      return invalid("Active file transfer capacity reached");
    keys.emplace(key);
  }
  auto dir = env.transfer_dir;
  auto io = env.transfers->io;
  auto self = env.self;
  auto pool = env.pool;
  with_settings(env, done,
                [self, pool, io, dir, key = std::string{key}, payload = std::move(bytes.value()),
                 first = index == 0, done](const instance_settings& s) {
                  auto max_bytes = s.config.limits.max_rpc_file_bytes;
                  run_blocking_on(
                    self, pool,
                    [io, dir, key, payload, first, max_bytes] {
                      return write_chunk(io, dir, key, payload, first, max_bytes);
                    },
                    done);
                });
}

// -- tenant actions -------------------------------------------------------------------

void exec_like(connection_env& env, const element& data, const action_context& ctx,
               done_fn done, bool create) {
  exec_request req;
  req.ctx = ctx;
  req.facts = extract_payload_facts(data);
  auto spec = decode_box_spec(data, !create);
  if (spec) {
    req.spec = std::move(spec.value());
  } else if (spec.error().code == ec::key) {
    // The reference reads data["session_id"] before anything else.
    return done(failure(spec.error()));
  } else {
    // Carried, not replied: in admission mode a forged field outranks a decode error.
    req.decode_error = spec.error();
  }
  if (create)
    ask<session_info>(env, done, encoded<session_info>(), create_atom_v, std::move(req));
  else
    ask<exec_result>(env, done, encoded<exec_result>(), exec_atom_v, std::move(req));
}

void do_exec(connection_env& env, const element& data, const action_context* ctx, done_fn done) {
  exec_like(env, data, *ctx, std::move(done), false);
}

void do_create(connection_env& env, const element& data, const action_context* ctx,
               done_fn done) {
  exec_like(env, data, *ctx, std::move(done), true);
}

/// data.session_id for get/delete: missing replies KeyError at once; a non-string is
/// carried as a decode error (the fence check still comes first).
std::optional<session_request> session_req(const element& data, const action_context& ctx,
                                           const done_fn& done) {
  auto v = lookup(data, "session_id");
  if (!v) {
    done(failure(key_error("session_id")));
    return std::nullopt;
  }
  session_request req;
  req.ctx = ctx;
  std::string_view s;
  if (v->get_string().get(s) == json_ok)
    req.session_id = std::string{s};
  else
    req.decode_error = {ec::validation, "session_id must be a string"};
  return req;
}

void do_get_session(connection_env& env, const element& data, const action_context* ctx,
                    done_fn done) {
  auto req = session_req(data, *ctx, done);
  if (!req)
    return;
  ask<session_info>(env, done, encoded<session_info>(), caf::get_atom_v, std::move(*req));
}

void do_delete_session(connection_env& env, const element& data, const action_context* ctx,
                       done_fn done) {
  auto req = session_req(data, *ctx, done);
  if (!req)
    return;
  ask<std::string>(
    env, done,
    [](const std::string& id) {
      json::writer w;
      w.begin_object();
      w.key("deleted").value(id);
      w.end_object();
      return w.take();
    },
    caf::delete_atom_v, std::move(*req));
}

void do_get_sessions(connection_env& env, const element&, const action_context* ctx,
                     done_fn done) {
  ask<std::vector<session_info>>(
    env, done,
    [](const std::vector<session_info>& xs) {
      json::writer w;
      w.begin_object();
      w.key("sessions").begin_array();
      for (const auto& x : xs)
        w.raw(to_json(x));
      w.end_array();
      w.end_object();
      return w.take();
    },
    list_atom_v, *ctx);
}

void do_status(connection_env& env, const element&, const action_context* ctx, done_fn done) {
  ask<status_info>(env, done, status_json, status_atom_v, *ctx);
}

/// Skill actions (§2.4): routed through the workspace's supervisor (fence, and the
/// entitlement gate in admission mode) to its skill-store actor. The data travels as
/// JSON text and is decoded on the worker pool. A zip action's uploaded file is looked
/// up here, in this connection's transfer folder, and handed over by path; the store
/// deletes it once read.
template <const char* Action>
void do_skill(connection_env& env, const element& data, const action_context* ctx, done_fn done) {
  skill_request req;
  req.ctx = *ctx;
  req.action = Action;
  req.data_json = simdjson::minify(data);
  std::string_view action{Action};
  if (action == "box_preview_skill_zip" || action == "box_install_skill_zip") {
    auto key_v = lookup(data, "file_key");
    std::string_view key;
    if (!key_v)
      req.decode_error = {ec::validation, "'file_key'"};
    else if (key_v->get_string().get(key) != json_ok || !valid_file_key(key))
      req.decode_error = {ec::validation, "Invalid file transfer key"};
    else if (env.transfer_dir.empty() || !env.transfers || !env.transfers->keys.contains(key))
      req.decode_error = {ec::validation, "Uploaded file " + std::string{key} + " was not found"};
    else {
      req.file_path = env.transfer_dir + "/" + std::string{key};
      env.transfers->keys.erase(env.transfers->keys.find(key)); // consumed
    }
  }
  ask<std::string>(env, done, [](const std::string& json) { return json; }, skill_atom_v,
                   std::move(req));
}

constexpr char list_skills[] = "box_list_skills";
constexpr char get_skill[] = "box_get_skill";
constexpr char create_skill[] = "box_create_skill";
constexpr char update_skill[] = "box_update_skill";
constexpr char delete_skill[] = "box_delete_skill";
constexpr char scan_skill_directory[] = "box_scan_skill_directory";
constexpr char list_skill_files[] = "box_list_skill_files";
constexpr char read_skill_file[] = "box_read_skill_file";
constexpr char write_skill_file[] = "box_write_skill_file";
constexpr char preview_skill_zip[] = "box_preview_skill_zip";
constexpr char install_skill_zip[] = "box_install_skill_zip";

void not_implemented(std::string_view action, done_fn& done) {
  done(failure({ec::box_error, std::string{action} + " is not implemented by this boxd yet"}));
}

/// Managed processes (§2.3, §4.7): refused in admission mode as the reference's Cloud
/// host does (admission.md §4.5, checked before anything else); in standard mode routed
/// to the session's actor, which runs the process inside the session's sandbox.
template <const char* Action>
void do_managed_process(connection_env& env, const element& data, const action_context* ctx,
                        done_fn done) {
  std::string action{Action};
  // Read before the round trip: `data` does not outlive this call.
  process_request req;
  req.ctx = *ctx;
  auto sid = lookup(data, "session_id");
  if (!sid)
    return done(failure(key_error("session_id")));
  std::string_view text;
  if (sid->get_string().get(text) == json_ok)
    req.session_id = std::string{text};
  else
    req.decode_error = {ec::validation, "session_id must be a string"};
  if (action == "box_start_managed_process") {
    auto spec_el = lookup(data, "spec");
    if (!spec_el)
      return done(failure(key_error("spec")));
    auto spec = decode_process_spec(*spec_el);
    if (spec)
      req.spec = std::move(spec.value());
    else if (!req.decode_error)
      req.decode_error = spec.error();
    req.process_id = req.spec.process_id;
  } else if (auto pid = lookup(data, "process_id"); pid && !pid->is_null()) {
    if (pid->get_string().get(text) == json_ok)
      req.process_id = std::string{text};
    else if (!req.decode_error)
      req.decode_error = {ec::validation, "process_id must be a string"};
  }
  with_settings(env, done, [&env, done, action, req = std::move(req)](const instance_settings& s) {
    if (admission_configured(s))
      return done(failure({ec::admission, "Managed processes are disabled for Cloud sandboxes"}));
    if (action == "box_start_managed_process")
      ask<process_info>(env, done, encoded<process_info>(), pstart_atom_v, req);
    else if (action == "box_get_managed_process")
      ask<process_info>(env, done, encoded<process_info>(), pget_atom_v, req);
    else
      ask<std::string>(
        env, done,
        [](const std::string& pid) {
          json::writer w;
          w.begin_object();
          w.key("stopped").value(pid);
          w.end_object();
          return w.take();
        },
        pstop_atom_v, req);
  });
}

constexpr char start_process[] = "box_start_managed_process";
constexpr char get_process[] = "box_get_managed_process";
constexpr char stop_process[] = "box_stop_managed_process";

// -- the table ------------------------------------------------------------------------

enum class scope : uint8_t { host, tenant };

struct action_def {
  std::string_view name;
  scope kind;
  handler fn; // null: routed, not implemented yet
};

constexpr action_def action_table[] = {
  // Host-control (protocol.md §2.2) and boxrt's entitlement push (contract §3).
  {"__ping", scope::host, do_ping},
  {"__file_chunk", scope::host, do_file_chunk},
  {"box_health", scope::host, do_health},
  {"box_get_backend_info", scope::host, do_backend_info},
  {"box_init", scope::host, do_init},
  {"box_upsert_sandbox_admission_grant", scope::host, do_grant},
  {"box_revoke_sandbox_admission_grant", scope::host, do_revoke},
  {"box_verify_shared_workspace", scope::host, do_verify},
  {"box_shutdown", scope::host, do_shutdown},
  {"box_put_workspace_entitlement", scope::host, do_entitlement},
  // Tenant sandbox actions (§2.3).
  {"box_status", scope::tenant, do_status},
  {"box_exec", scope::tenant, do_exec},
  {"box_create_session", scope::tenant, do_create},
  {"box_get_session", scope::tenant, do_get_session},
  {"box_get_sessions", scope::tenant, do_get_sessions},
  {"box_delete_session", scope::tenant, do_delete_session},
  {"box_start_managed_process", scope::tenant, do_managed_process<start_process>},
  {"box_get_managed_process", scope::tenant, do_managed_process<get_process>},
  {"box_stop_managed_process", scope::tenant, do_managed_process<stop_process>},
  // Tenant skill actions (§2.4).
  {"box_list_skills", scope::tenant, do_skill<list_skills>},
  {"box_get_skill", scope::tenant, do_skill<get_skill>},
  {"box_create_skill", scope::tenant, do_skill<create_skill>},
  {"box_update_skill", scope::tenant, do_skill<update_skill>},
  {"box_delete_skill", scope::tenant, do_skill<delete_skill>},
  {"box_scan_skill_directory", scope::tenant, do_skill<scan_skill_directory>},
  {"box_list_skill_files", scope::tenant, do_skill<list_skill_files>},
  {"box_read_skill_file", scope::tenant, do_skill<read_skill_file>},
  {"box_write_skill_file", scope::tenant, do_skill<write_skill_file>},
  {"box_preview_skill_zip", scope::tenant, do_skill<preview_skill_zip>},
  {"box_install_skill_zip", scope::tenant, do_skill<install_skill_zip>},
};

const action_def* find_action(std::string_view name) {
  for (const auto& def : action_table)
    if (def.name == name)
      return &def;
  return nullptr;
}

} // namespace

bool known_action(std::string_view action) {
  return find_action(action) != nullptr;
}

void dispatch(connection_env& env, std::string_view action, const element& data,
              const action_context* context, std::function<void(reply)> done) {
  const auto* def = find_action(action);
  if (def == nullptr)
    return done(failure({ec::value, "Action " + std::string{action} + " not found"}));
  // protocol.md §2.1: a host-control context is optional but must be of the trusted
  // instance, then it is dropped; a tenant action needs one.
  if (context != nullptr) {
    if (!is_trusted(env, context->instance_uuid))
      return done(failure(not_trusted()));
  } else if (def->kind == scope::tenant) {
    return done(failure(
      {ec::permission, "Box tenant action requires a trusted Workspace context"}));
  }
  if (def->fn == nullptr)
    return not_implemented(action, done);
  def->fn(env, data, def->kind == scope::tenant ? context : nullptr, std::move(done));
}

void run_blocking(connection_env& env, std::function<reply()> job, std::function<void(reply)> done) {
  run_blocking_on(env.self, env.pool, std::move(job), std::move(done));
}

void close_transfers(connection_env& env) {
  if (!env.transfers)
    return;
  auto io = env.transfers->io;
  auto dir = env.transfer_dir;
  env.transfers.reset();
  if (dir.empty() || !env.pool)
    return;
  env.pool->submit([io, dir] {
    std::lock_guard<std::mutex> guard{io->mtx};
    io->closed = true;
    remove_transfer_folder(dir);
  });
}

} // namespace boxrt::net
