#include "net/rpc/connection.hpp"

#include <chrono>
#include <deque>
#include <charconv>
#include <map>
#include <memory>
#include <string_view>
#include <unordered_map>

#include <caf/all.hpp>
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include "messages/base/json.hpp"
#include "messages/base/metrics.hpp"
#include "net/rpc/action_support.hpp"
#include "net/rpc/envelope.hpp"

namespace boxrt::net {

namespace {

namespace dom = simdjson::dom;

/// A parser that has seen a document this large gives its buffers back afterwards, so
/// one 16 MiB request does not pin that much memory for the life of the connection.
constexpr size_t parser_keep_bytes = size_t{1} << 20;

/// One action's series of the request metrics, looked up once per connection.
struct action_series {
  explicit action_series(std::string_view name)
    : action(name), ok(&metrics::boxd().requests.with({name, "ok"})),
      duration(&metrics::boxd().request_duration.with({name})) {}

  std::string action;
  metrics::counter* ok;
  metrics::duration_histogram* duration;
};

using steady = std::chrono::steady_clock;

/// A request handed to the dispatcher and not answered yet.
struct inflight_request {
  std::string seq_id;
  action_series* series = nullptr;
  steady::time_point arrived;
  /// Its audit line's fields known at arrival (with an audit trail).
  std::optional<audit_record> audit;
};

/// The audit fields of a request (server.audit_log): the context's workspace, or the
/// data's for the host-control actions that name one (grants, revocations, snapshots).
audit_record audit_fields(const envelope& req, bool commands, const std::string& peer) {
  audit_record r;
  r.action = std::string{req.action};
  r.peer = peer;
  // A refused envelope may have no data to read. A key sent twice counts as the decoders
  // count it: the last one.
  auto text = [&](std::string_view key) -> std::string {
    if (!req.refusal.empty())
      return {};
    std::string_view v;
    auto value = rpc_detail::lookup(req.data, key);
    return value && value->get_string().get(v) == simdjson::SUCCESS ? std::string{v} : std::string{};
  };
  // The admission pushes act on the workspace their data names (any context is
  // dropped); every other action on its context's.
  const bool names_workspace = req.action == "box_upsert_sandbox_admission_grant"
                               || req.action == "box_revoke_sandbox_admission_grant"
                               || req.action == "box_put_workspace_entitlement";
  if (names_workspace) {
    r.instance = text("instance_uuid");
    r.workspace = text("workspace_uuid");
  } else if (req.context) {
    r.instance = req.context->instance_uuid;
    r.workspace = req.context->workspace_uuid;
  }
  r.session = text("session_id");
  if (commands && (req.action == "box_exec" || req.action == "box_exec_stream"))
    if (auto cmd = text("cmd"); !cmd.empty())
      r.command = std::move(cmd);
  return r;
}

/// Heartbeats and flow control change nothing and are never audited.
bool audited(std::string_view action) {
  return action != "__ping" && action != "__stream_ack";
}

int64_t wall_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
           std::chrono::system_clock::now().time_since_epoch()).count();
}

/// The result label of a reply: "ok" or its error class ("busy" for the in-flight cap).
std::string_view result_label(const box_error& error) {
  if (!error)
    return "ok";
  auto cls = wire_class(error.code);
  return cls.empty() ? std::string_view{"busy"} : cls;
}

/// The SDK's STREAM_WINDOW: frames a caller with flow control has not acknowledged yet;
/// it acknowledges every STREAM_WINDOW / 2.
constexpr int64_t stream_window = 8;

/// One box_exec_stream of this connection (docs/streaming.md), by its token.
struct stream_state {
  std::string seq_id;            // as JSON, for the frames
  std::optional<int64_t> seq;    // as the acknowledgements and cancels name it
  std::optional<action_context> ctx;
  bool flow = false;             // the caller acknowledges (stream_flow_control: 1)
  int64_t sent = 0;              // indexed frames sent
  int64_t acked = 0;             // the last index acknowledged
  /// Indexes of this connection's own keepalives not acknowledged yet: their
  /// acknowledgement gives the session no credit (it never sent them).
  std::deque<int64_t> own;
  /// When the last frame went out: a keepalive follows after server.stream_keepalive_ms.
  steady::time_point last_sent = steady::now();
  session_actor session;         // known once the command started
  bool cancel_pending = false;   // cancelled before the session was known
  /// The request ended: what waits goes without the window. The SDK's sender sends its
  /// end frame so too; the result frame is small and the receiver queues 128 frames.
  bool final = false;
  /// Data of frames waiting for the window ("" = the end frame). The session's credit
  /// equals the window, so output frames rarely wait here.
  std::deque<std::string> waiting;
  /// A streamed box_read_file waiting for room for its next frame (read_stream).
  std::function<void(bool)> pull;
};

struct connection_state {
  static inline const char* name = "boxrt.connection";

  /// However the actor ends, the connection's uploads go (on the worker pool).
  ~connection_state() {
    close_transfers(env);
    env.jobs->clear();
  }

  connection_args args;
  connection_env env;
  dom::parser parser;
  /// Requests handed to the dispatcher and not answered yet, by token (seq_id as raw JSON).
  std::unordered_map<uint64_t, inflight_request> inflight;
  /// Metric series by action name (only names of the action table, and "unknown"); a
  /// map's nodes stay put, so in-flight requests point at theirs.
  std::map<std::string, action_series, std::less<>> series;
  uint64_t next_token = 1;
  /// Streamed execs of this connection, by the token of their request.
  std::map<uint64_t, stream_state> streams;
  /// Frames ignored under the envelope rules (not JSON, not an object, responses, ...).
  uint64_t ignored = 0;
  /// Set by shutdown: nothing more is read or answered.
  bool closing = false;
  /// Replies waiting for their audit line to be written (server.audit_log), by token.
  std::unordered_map<uint64_t, std::pair<inflight_request, reply>> audit_waits;
};

using connection_ptr = caf::stateful_actor<connection_state>*;

std::string render(std::string_view seq_id, const box_error& error, std::string_view data) {
  json::writer w;
  w.begin_object();
  w.key("seq_id").raw(seq_id);
  w.key("code").value(error ? 1 : 0);
  if (error)
    w.key("message").value(error.to_wire());
  else
    w.key("message").value("success");
  w.key("data").raw(error ? std::string_view{"{}"} : data);
  w.key("chunk_status").value("continue");
  w.end_object();
  return w.take();
}

/// A refusal whose message is already a JSON string literal.
std::string render_encoded(std::string_view seq_id, std::string_view message_json) {
  json::writer w;
  w.begin_object();
  w.key("seq_id").raw(seq_id);
  w.key("code").value(1);
  w.key("message").raw(message_json);
  w.key("data").raw("{}");
  w.key("chunk_status").value("continue");
  w.end_object();
  return w.take();
}

void send_text(connection_ptr self, std::string text, bool holds_slot = false) {
  if (self->state.args.out)
    self->state.args.out->send(std::move(text), holds_slot);
}

void send_frame(connection_ptr self, std::string text, uint64_t written_token, bool reply = false) {
  if (self->state.args.out)
    self->state.args.out->send_frame(std::move(text), written_token, reply);
}

/// Sends `r`, or the error that replaces a reply too large to send; returns the error
/// the client gets (none for a success).
box_error send_reply(connection_ptr self, std::string_view seq_id, const reply& r,
                     bool holds_slot = false) {
  auto& st = self->state;
  if (!st.args.out)
    return r.error;
  auto text = render(seq_id, r.error, r.data_json);
  if (text.size() > st.args.max_message_bytes) {
    // The reference answers an unsendable response with this error instead (§1.5).
    spdlog::warn("net: {}: a {} byte response exceeds the message limit; sending an error",
                 st.args.peer, text.size());
    box_error too_large{ec::value, "Runtime message exceeds "
                                     + std::to_string(st.args.max_message_bytes) + " byte limit"};
    text = render(seq_id, too_large, "{}");
    send_text(self, std::move(text), holds_slot);
    return too_large;
  }
  send_text(self, std::move(text), holds_slot);
  return r.error;
}

void ignore(connection_ptr self, std::string_view why) {
  auto& st = self->state;
  ++st.ignored;
  metrics::boxd().decode_errors.inc();
  spdlog::debug("net: {}: ignored a frame ({}); {} ignored so far", st.args.peer, why,
                st.ignored);
}

void report_inflight(connection_ptr self) {
  auto& st = self->state;
  if (st.args.out)
    st.args.out->in_flight(st.inflight.size() + st.audit_waits.size());
}

/// The series of a request's action. The envelope names only actions of the table; a
/// refused request has none and counts as "unknown".
action_series& series_of(connection_ptr self, std::string_view action) {
  auto& series = self->state.series;
  if (action.empty())
    action = "unknown";
  auto i = series.find(action);
  if (i == series.end())
    i = series.emplace(std::string{action}, action_series{action}).first;
  return i->second;
}

/// Counts one answered request.
void record(action_series& s, const box_error& error, steady::time_point arrived) {
  if (!error)
    s.ok->inc();
  else
    metrics::boxd().requests.with({s.action, result_label(error)}).inc();
  s.duration->observe_ns(static_cast<uint64_t>(
    std::chrono::duration_cast<std::chrono::nanoseconds>(steady::now() - arrived).count()));
}

/// One frame of stream `x`: a data frame (`data` its data JSON, indexed when the caller
/// acknowledges) or the end frame.
std::string render_frame(std::string_view seq_id, std::string_view data, bool end,
                         std::optional<int64_t> index) {
  json::writer w;
  w.begin_object();
  w.key("seq_id").raw(seq_id);
  w.key("code").value(0);
  w.key("message").value("success");
  w.key("data").raw(end ? std::string_view{"{}"} : data);
  w.key("chunk_status").value(end ? "end" : "continue");
  if (index)
    w.key("stream_index").value(*index);
  w.end_object();
  return w.take();
}

/// Sends what waits in `x` while its window has room; the end frame ends the stream.
void flush_stream(connection_ptr self, uint64_t token) {
  auto& st = self->state;
  auto i = st.streams.find(token);
  if (i == st.streams.end())
    return;
  auto& x = i->second;
  while (!x.waiting.empty()) {
    if (x.flow && !x.final && x.sent - x.acked >= stream_window)
      break;  // the window is full (a cancelled read still ends below)
    auto data = std::move(x.waiting.front());
    x.waiting.pop_front();
    if (data.empty()) {
      send_frame(self, render_frame(x.seq_id, {}, true, std::nullopt), 0);
      st.streams.erase(i);
      return;
    }
    ++x.sent;
    x.last_sent = steady::now();
    // Without flow control the caller never acknowledges: a frame written to the socket
    // gives its place back instead (written_atom), so a slow reader holds up the command.
    send_frame(self, render_frame(x.seq_id, data, false,
                                  x.flow ? std::optional<int64_t>{x.sent} : std::nullopt),
               x.flow || x.final ? 0 : token);
  }
  // A streamed read asks for its next frame once this one is out and the window has room
  // (or the caller cancelled): it never holds more than the window.
  if (x.pull && (x.cancel_pending || x.sent - x.acked < stream_window)) {
    auto pull = std::move(x.pull);
    x.pull = nullptr;
    pull(x.cancel_pending);
  }
}

/// Keepalives come from here, the one place that sees every quiet time of a stream:
/// queued behind another command, a cold sandbox, a backend that is not live, a command
/// being ended. One takes an index and a window slot like any frame.
void stream_tick(connection_ptr self, uint64_t token) {
  auto& st = self->state;
  auto i = st.streams.find(token);
  if (i == st.streams.end())
    return;
  auto& x = i->second;
  const auto period = std::chrono::milliseconds{std::max<int64_t>(st.args.stream.keepalive_ms, 1)};
  auto now = steady::now();
  if (now - x.last_sent >= period && x.waiting.empty() && !x.final
      && (!x.flow || x.sent - x.acked < stream_window)) {
    ++x.sent;
    if (x.flow)
      x.own.push_back(x.sent);
    x.last_sent = now;
    send_frame(self, render_frame(x.seq_id, R"({"stream":"keepalive"})", false,
                                  x.flow ? std::optional<int64_t>{x.sent} : std::nullopt), 0);
  }
  auto next = std::max<steady::duration>(period - (now - x.last_sent), std::chrono::milliseconds{10});
  self->delayed_send(self, std::chrono::duration_cast<std::chrono::milliseconds>(next), tick_atom_v, token);
}

/// A frame of a running stream from its session; a stream this connection no longer has
/// (its request ended in an error) is cancelled.
void stream_frame(connection_ptr self, uint64_t token, const stream_chunk& c) {
  auto& st = self->state;
  auto i = st.streams.find(token);
  if (i == st.streams.end()) {
    self->send(caf::actor_cast<session_actor>(self->current_sender()), cancel_atom_v, token);
    return;
  }
  json::writer w;
  w.begin_object();
  w.key("stream").value(c.stream);
  if (c.stream != "keepalive")
    w.key("data").value(c.data).key("offset").value(c.offset);
  w.end_object();
  i->second.waiting.push_back(w.take());
  flush_stream(self, token);
}

/// The end of a stream's request: an error frame at once (no end frame follows it), or
/// the last data frame and the end frame, after every frame before them.
void finish_stream(connection_ptr self, uint64_t token, const reply& r) {
  auto& st = self->state;
  auto i = st.streams.find(token);
  if (i == st.streams.end())
    return;
  if (r.error) {
    // The command may still run (a request that expired inside the runtime): it ends.
    if (i->second.session)
      self->send(i->second.session, cancel_atom_v, token);
    st.streams.erase(i);
    return;  // finish() sends the error as the request's reply
  }
  i->second.final = true;
  i->second.waiting.push_back(r.data_json);
  i->second.waiting.push_back({});
  flush_stream(self, token);
}

/// __stream_ack and __cancel_action (the SDK's texts): answered here, never counted
/// against max_inflight.
reply stream_control(connection_ptr self, const envelope& req) {
  auto& st = self->state;
  auto integer = [&](const char* key) -> std::optional<int64_t> {
    auto v = req.data.get_object()[key];
    int64_t n = 0;
    if (v.error() || v.value_unsafe().is_bool() || v.value_unsafe().get_int64().get(n) != simdjson::SUCCESS)
      return std::nullopt;
    return n;
  };
  auto find = [&](int64_t seq) -> std::pair<uint64_t, stream_state*> {
    for (auto& [token, x] : st.streams)
      if (x.seq == seq && x.ctx == req.context)
        return {token, &x};
    return {0, nullptr};
  };
  auto keyed = [](const char* key, bool v) {
    json::writer w;
    w.begin_object().key(key).value(v).end_object();
    return reply{{}, w.take()};
  };
  if (req.action == "__cancel_action") {
    auto seq = integer("seq_id");
    if (!seq)
      return reply{{ec::value, "Cancellation requires an integer seq_id"}, "{}"};
    auto [token, x] = find(*seq);
    if (x == nullptr)
      return keyed("cancelled", false);
    if (x->session)
      self->send(x->session, cancel_atom_v, token);
    else
      x->cancel_pending = true;
    flush_stream(self, token);  // a streamed read waiting for room ends now
    return keyed("cancelled", true);
  }
  auto seq = integer("seq_id");
  auto index = integer("index");
  if (!seq || !index)
    return reply{{ec::value, "Stream acknowledgement requires integer sequence and index"}, "{}"};
  auto [token, x] = find(*seq);
  if (x == nullptr || !x->flow)
    return keyed("accepted", false);
  if (*index < x->acked || *index > x->sent)
    return reply{{ec::value, "Invalid stream acknowledgement index"}, "{}"};
  // Credit for the session's own frames among those acknowledged now.
  int64_t credit = *index - x->acked;
  while (!x->own.empty() && x->own.front() <= *index) {
    x->own.pop_front();
    --credit;
  }
  if (x->session && credit > 0)
    self->send(x->session, credit_atom_v, token, credit);
  x->acked = *index;
  flush_stream(self, token);
  return keyed("accepted", true);
}

void deliver(connection_ptr self, uint64_t token, reply r);

/// A request's reply: with an audit trail, after its line is written (on the log's
/// thread; the reply waits in audit_waits meanwhile), else at once.
void finish(connection_ptr self, uint64_t token, reply r) {
  auto& st = self->state;
  auto i = st.inflight.find(token);
  if (i == st.inflight.end() || !st.args.audit || !i->second.audit)
    return deliver(self, token, std::move(r));
  auto rec = std::move(*i->second.audit);
  rec.allowed = !r.error;
  if (r.error)
    rec.error_class = std::string{result_label(r.error)};
  rec.duration_us = std::chrono::duration_cast<std::chrono::microseconds>(steady::now() - i->second.arrived).count();
  if (!r.error && (rec.action == "box_exec" || rec.action == "box_exec_stream")) {
    // The reply's own key: inside a string a quote is always escaped, so this exact
    // text is a key, and an exec's reply has exit_code at its top level only.
    constexpr std::string_view key = "\"exit_code\":";
    if (auto at = r.data_json.find(key); at != std::string::npos) {
      int64_t code = 0;
      const char* from = r.data_json.data() + at + key.size();
      if (std::from_chars(from, r.data_json.data() + r.data_json.size(), code).ec == std::errc{})
        rec.exit_code = code;
    }
  }
  // A stream that failed stops its command now, not once the line is written.
  if (r.error)
    if (auto s = st.streams.find(token); s != st.streams.end() && s->second.session)
      self->send(s->second.session, cancel_atom_v, token);
  auto line = audit_line(rec, wall_us());
  st.audit_waits.emplace(token, std::pair{std::move(i->second), std::move(r)});
  st.inflight.erase(i);
  report_inflight(self);
  st.args.audit->append(std::move(line), [actor = caf::actor_cast<caf::actor>(self), token](bool) {
    caf::anon_send(actor, audited_atom_v, token);
  });
}

/// Its audit line is written: the reply goes.
void audited_reply(connection_ptr self, uint64_t token) {
  auto& st = self->state;
  auto i = st.audit_waits.find(token);
  if (i == st.audit_waits.end())
    return;  // answered at shutdown
  auto [req, r] = std::move(i->second);
  st.audit_waits.erase(i);
  st.inflight.emplace(token, std::move(req));
  deliver(self, token, std::move(r));
}

/// An audit line that no reply waits for (a refusal before dispatch, a cancel).
void audit_now(connection_ptr self, const envelope& req, const box_error& error, steady::time_point arrived) {
  auto& st = self->state;
  if (!st.args.audit || !audited(req.action) || req.action.empty())
    return;
  auto rec = audit_fields(req, st.args.audit->commands(), st.args.peer);
  rec.allowed = !error;
  if (error)
    rec.error_class = std::string{result_label(error)};
  rec.duration_us = std::chrono::duration_cast<std::chrono::microseconds>(steady::now() - arrived).count();
  st.args.audit->append(audit_line(rec, wall_us()), nullptr);
}

void deliver(connection_ptr self, uint64_t token, reply r) {
  auto& st = self->state;
  auto i = st.inflight.find(token);
  if (i == st.inflight.end())
    return; // already answered (shutdown)
  auto seq_id = std::move(i->second.seq_id);
  auto* series = i->second.series;
  auto arrived = i->second.arrived;
  st.inflight.erase(i);
  if (st.streams.contains(token)) {
    finish_stream(self, token, r);
    // An error goes after the stream's frames, never ahead of them as a small reply may.
    record(*series, r.error, arrived);
    if (r.error)
      send_frame(self, render(seq_id, r.error, r.data_json), 0, true);
    report_inflight(self);
    return;
  }
  // The reply takes over the slot before the count drops, so the socket never sees
  // fewer slots taken than there are (see heartbeat).
  record(*series, send_reply(self, seq_id, r, true), arrived);
  report_inflight(self);
}

/// Slots taken: requests in flight plus replies the socket has not written yet.
size_t slots_taken(connection_ptr self) {
  auto& st = self->state;
  return st.inflight.size() + st.audit_waits.size() + (st.args.out ? st.args.out->unwritten() : 0);
}

void handle_request(connection_ptr self, envelope& req) {
  auto& st = self->state;
  auto arrived = steady::now();
  auto& series = series_of(self, req.action);
  if (req.refusal.empty() && (req.action == "__stream_ack" || req.action == "__cancel_action")) {
    auto r = stream_control(self, req);
    record(series, r.error, arrived);
    audit_now(self, req, r.error, arrived);
    send_reply(self, req.seq_id, r);
    return;
  }
  // The capacity check comes before validation, as in the reference (§1.8).
  if (slots_taken(self) >= st.args.max_inflight) {
    box_error busy{ec::busy, "Runtime connection is busy (max "
                               + std::to_string(st.args.max_inflight) + " concurrent actions)"};
    record(series, busy, arrived);
    audit_now(self, req, busy, arrived);
    send_reply(self, req.seq_id, reply{std::move(busy), "{}"});
    return;
  }
  if (!req.refusal.empty()) {
    metrics::boxd().decode_errors.inc();
    record(series, box_error{req.refusal_class, {}}, arrived);
    audit_now(self, req, box_error{req.refusal_class, "refused"}, arrived);
    send_text(self, render_encoded(req.seq_id, req.refusal));
    return;
  }
  // A bare heartbeat is answered here; one with an envelope goes through the
  // dispatcher, which checks host-control contexts (protocol.md §2.1).
  if (req.action == "__ping" && !req.context) {
    record(series, {}, arrived);
    send_reply(self, req.seq_id, reply{});
    return;
  }
  auto token = st.next_token++;
  st.inflight.emplace(token, inflight_request{req.seq_id, &series, arrived, std::nullopt});
  if (st.args.audit && audited(req.action))
    st.inflight[token].audit = audit_fields(req, st.args.audit->commands(), st.args.peer);
  report_inflight(self);
  const bool read_stream = req.action == "box_read_file" && req.flow_control;
  if (req.action == "box_exec_stream" || read_stream) {
    stream_state x;
    x.seq_id = req.seq_id;
    int64_t seq = 0;
    if (std::from_chars(req.seq_id.data(), req.seq_id.data() + req.seq_id.size(), seq).ec == std::errc{})
      x.seq = seq;
    x.ctx = req.context;
    x.flow = req.flow_control;
    st.streams.emplace(token, std::move(x));
    st.env.stream = st.args.stream;
    st.env.stream.token = token;
    self->delayed_send(self, std::chrono::milliseconds{std::max<int64_t>(st.args.stream.keepalive_ms, 1)},
                       tick_atom_v, token);
  }
  if (read_stream) {
    auto sink = std::make_shared<net::read_stream>();
    sink->frame = [self, token](std::string data) {
      auto i = self->state.streams.find(token);
      if (i == self->state.streams.end())
        return;
      i->second.waiting.push_back(std::move(data));
      flush_stream(self, token);
    };
    sink->wait_room = [self, token](std::function<void(bool)> next) {
      auto i = self->state.streams.find(token);
      if (i == self->state.streams.end())
        return;  // gone: its request was answered already
      i->second.pull = std::move(next);
      flush_stream(self, token);
    };
    st.env.read = std::move(sink);
  }
  try {
    dispatch(st.env, req.action, req.data, req.context ? &*req.context : nullptr,
             [self, token](reply r) { finish(self, token, std::move(r)); });
  } catch (const std::exception& e) {
    spdlog::error("net: {}: action {} threw: {}", st.args.peer, req.action, e.what());
    finish(self, token, reply{box_error{ec::runtime, e.what()}, "{}"});
  }
  st.env.read = nullptr;
}

void handle_frame(connection_ptr self, const std::string& text) {
  auto& st = self->state;
  if (st.closing)
    return; // the socket is closing: nothing more is read
  auto req = read_envelope(st.parser, text, known_action);
  if (req.what == envelope::kind::ignored)
    ignore(self, req.why);
  else
    handle_request(self, req);
  if (text.size() > parser_keep_bytes || st.parser.capacity() > 4 * parser_keep_bytes)
    st.parser = dom::parser{};
  if (st.args.out)
    st.args.out->consumed(text.size());
}

caf::behavior connection(connection_ptr self, connection_args args) {
  auto& st = self->state;
  st.args = std::move(args);
  st.env.self = self;
  st.env.directory = st.args.directory;
  st.env.pool = st.args.pool;
  st.env.files = st.args.files;
  st.env.shared = st.args.shared;
  st.env.transfer_dir = st.args.transfer_dir;
  return {
    [self](frame_atom, const std::string& text) { handle_frame(self, text); },
    [self](done_atom, uint64_t token) { self->state.env.jobs->finish(token); },
    // A streamed exec's session: its command started, then its frames.
    [self](stream_atom, uint64_t token) {
      auto& st = self->state;
      auto i = st.streams.find(token);
      if (i == st.streams.end()) {
        // Its request already ended in an error: the command is not wanted.
        self->send(caf::actor_cast<session_actor>(self->current_sender()), cancel_atom_v, token);
        return;
      }
      i->second.session = caf::actor_cast<session_actor>(self->current_sender());
      if (i->second.cancel_pending && i->second.session)
        self->send(i->second.session, cancel_atom_v, token);
    },
    [self](stream_atom, uint64_t token, const stream_chunk& c) { stream_frame(self, token, c); },
    [self](tick_atom, uint64_t token) { stream_tick(self, token); },
    [self](audited_atom, uint64_t token) { audited_reply(self, token); },
    // A frame of a stream without flow control is written: the session may send one more.
    [self](written_atom, uint64_t token) {
      auto& st = self->state;
      auto i = st.streams.find(token);
      if (i != st.streams.end() && !i->second.flow && i->second.session)
        self->send(i->second.session, credit_atom_v, token, int64_t{1});
    },
    [self](shutdown_atom) {
      auto& st = self->state;
      st.closing = true;
      // Every request gets an answer while the socket is still open (README §4.5).
      for (auto& [token, req] : st.inflight) {
        box_error gone{ec::runtime_unavailable, shutting_down_text};
        record(*req.series, gone, req.arrived);
        send_reply(self, req.seq_id, reply{std::move(gone), "{}"});
      }
      st.inflight.clear();
      // Replies that waited for their audit line go now (their line is on its way).
      for (auto& [token, w] : st.audit_waits)
        send_reply(self, w.first.seq_id, std::move(w.second));
      st.audit_waits.clear();
      report_inflight(self);
      if (st.args.out)
        st.args.out->close(1001, shutdown_close_reason);
      self->quit();
    },
  };
}

} // namespace

struct heartbeat::impl {
  dom::parser parser;
  action_series ping{"__ping"};
};

heartbeat::heartbeat() : impl_(std::make_unique<impl>()) {}
heartbeat::~heartbeat() = default;

std::string heartbeat::reply_to(const std::string& text) {
  // Cheap refusal first: most frames are not heartbeats.
  if (text.size() > 256 || text.find("__ping") == std::string::npos)
    return {};
  auto arrived = steady::now();
  auto req = read_envelope(impl_->parser, text, known_action);
  if (req.what != envelope::kind::request || !req.refusal.empty() || req.action != "__ping"
      || req.context)
    return {};
  auto out = render(req.seq_id, box_error{}, "{}");
  record(impl_->ping, {}, arrived);
  return out;
}

caf::actor spawn_connection(caf::actor_system& sys, connection_args args) {
  return sys.spawn(connection, std::move(args));
}

} // namespace boxrt::net
