#include "net/connection.hpp"

#include <string_view>
#include <unordered_map>

#include <caf/all.hpp>
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include "messages/json.hpp"

namespace boxrt::net {

namespace {

namespace dom = simdjson::dom;

/// A parser that has seen a document this large gives its buffers back afterwards, so
/// one 16 MiB request does not pin that much memory for the life of the connection.
constexpr size_t parser_keep_bytes = size_t{1} << 20;

struct connection_state {
  static inline const char* name = "boxrt.connection";

  /// However the actor ends, the connection's uploads go (on the worker pool).
  ~connection_state() { close_transfers(env); }

  connection_args args;
  connection_env env;
  dom::parser parser;
  /// Requests handed to the dispatcher and not answered yet: token -> raw seq_id JSON.
  std::unordered_map<uint64_t, std::string> inflight;
  uint64_t next_token = 1;
  /// Frames ignored under the envelope rules (not JSON, not an object, responses, ...).
  uint64_t ignored = 0;
  /// Set by shutdown: nothing more is read or answered.
  bool closing = false;
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

void send_reply(connection_ptr self, std::string_view seq_id, const reply& r) {
  auto& st = self->state;
  if (!st.args.out)
    return;
  auto text = render(seq_id, r.error, r.data_json);
  if (text.size() > st.args.max_message_bytes) {
    // The reference answers an unsendable response with this error instead (§1.5).
    spdlog::warn("net: {}: a {} byte response exceeds the message limit; sending an error",
                 st.args.peer, text.size());
    text = render(seq_id,
                  box_error{ec::value, "Runtime message exceeds "
                                         + std::to_string(st.args.max_message_bytes)
                                         + " byte limit"},
                  "{}");
  }
  st.args.out->send(std::move(text));
}

void send_error(connection_ptr self, std::string_view seq_id, ec code, std::string text) {
  send_reply(self, seq_id, reply{box_error{code, std::move(text)}, "{}"});
}

void ignore(connection_ptr self, std::string_view why) {
  auto& st = self->state;
  ++st.ignored;
  spdlog::debug("net: {}: ignored a frame ({}); {} ignored so far", st.args.peer, why,
                st.ignored);
}

bool is_integer(const dom::element& e) {
  return e.is_int64() || e.is_uint64();
}

void report_inflight(connection_ptr self) {
  auto& st = self->state;
  if (st.args.out)
    st.args.out->in_flight(st.inflight.size());
}

void finish(connection_ptr self, uint64_t token, reply r) {
  auto& st = self->state;
  auto i = st.inflight.find(token);
  if (i == st.inflight.end())
    return; // already answered (shutdown)
  auto seq_id = std::move(i->second);
  st.inflight.erase(i);
  report_inflight(self);
  send_reply(self, seq_id, r);
}

void handle_request(connection_ptr self, const dom::object& obj, const dom::element& action_el) {
  auto& st = self->state;
  std::string seq_id = "-1";
  dom::element seq_el;
  bool has_seq = obj.at_key("seq_id").get(seq_el) == simdjson::SUCCESS;
  if (has_seq)
    seq_id = simdjson::minify(seq_el);
  // The capacity check comes before validation, as in the reference (§1.8).
  if (st.inflight.size() >= st.args.max_inflight) {
    send_error(self, seq_id, ec::busy,
               "Runtime connection is busy (max " + std::to_string(st.args.max_inflight)
                 + " concurrent actions)");
    return;
  }
  if (!has_seq || !is_integer(seq_el)) {
    send_error(self, seq_id, ec::envelope, "seq_id must be an integer");
    return;
  }
  std::string_view action;
  if (action_el.get_string().get(action) != simdjson::SUCCESS) {
    send_error(self, seq_id, ec::envelope, "action must be a string");
    return;
  }
  dom::element data;
  if (obj.at_key("data").get(data) != simdjson::SUCCESS || !data.is_object()) {
    send_error(self, seq_id, ec::envelope, "data must be an object");
    return;
  }
  dom::element context;
  const dom::element* context_ptr = nullptr;
  if (obj.at_key("context").get(context) == simdjson::SUCCESS && !context.is_null()) {
    if (!context.is_object()) {
      send_error(self, seq_id, ec::envelope, "context must be an object");
      return;
    }
    context_ptr = &context;
  }
  // A bare heartbeat is answered here; one with an envelope goes through the
  // dispatcher, which checks host-control contexts (protocol.md §2.1).
  if (action == "__ping" && context_ptr == nullptr) {
    send_reply(self, seq_id, reply{});
    return;
  }
  // Unknown actions fail before any context or authentication check (§1.6).
  if (!known_action(action)) {
    send_error(self, seq_id, ec::value, "Action " + std::string{action} + " not found");
    return;
  }
  auto token = st.next_token++;
  st.inflight.emplace(token, seq_id);
  report_inflight(self);
  try {
    dispatch(st.env, action, data, context_ptr,
             [self, token](reply r) { finish(self, token, std::move(r)); });
  } catch (const std::exception& e) {
    spdlog::error("net: {}: action {} threw: {}", st.args.peer, action, e.what());
    finish(self, token, reply{box_error{ec::runtime, e.what()}, "{}"});
  }
}

void handle_frame(connection_ptr self, const std::string& text) {
  auto& st = self->state;
  if (st.closing)
    return; // the socket is closing: nothing more is read
  dom::element root;
  if (auto err = st.parser.parse(text).get(root); err) {
    ignore(self, simdjson::error_message(err));
  } else if (dom::object obj; root.get_object().get(obj) != simdjson::SUCCESS) {
    ignore(self, "not a JSON object");
  } else if (dom::element code; obj.at_key("code").get(code) == simdjson::SUCCESS) {
    // A response: this runtime makes no outbound calls, so no waiter can match it.
    ignore(self, "a response frame");
  } else if (dom::element action; obj.at_key("action").get(action) != simdjson::SUCCESS) {
    ignore(self, "neither a request nor a response");
  } else {
    handle_request(self, obj, action);
  }
  if (text.size() > parser_keep_bytes)
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
  st.env.shared = st.args.shared;
  st.env.transfer_dir = st.args.transfer_dir;
  return {
    [self](frame_atom, const std::string& text) { handle_frame(self, text); },
    [self](shutdown_atom) {
      auto& st = self->state;
      st.closing = true;
      // Every request gets an answer while the socket is still open (README §4.5).
      for (auto& [token, seq_id] : st.inflight)
        send_error(self, seq_id, ec::runtime_unavailable, shutdown_reason);
      st.inflight.clear();
      report_inflight(self);
      if (st.args.out)
        st.args.out->close(1001, shutdown_reason);
      self->quit();
    },
  };
}

} // namespace

struct heartbeat::impl {
  dom::parser parser;
};

heartbeat::heartbeat() : impl_(std::make_unique<impl>()) {}
heartbeat::~heartbeat() = default;

std::string heartbeat::reply_to(const std::string& text) {
  // Cheap refusal first: most frames are not heartbeats.
  if (text.size() > 256 || text.find("__ping") == std::string::npos)
    return {};
  dom::element root;
  dom::object obj;
  dom::element seq_el, action_el, data, context, code;
  std::string_view action;
  if (impl_->parser.parse(text).get(root) != simdjson::SUCCESS
      || root.get_object().get(obj) != simdjson::SUCCESS
      || obj.at_key("code").get(code) == simdjson::SUCCESS
      || obj.at_key("action").get(action_el) != simdjson::SUCCESS
      || action_el.get_string().get(action) != simdjson::SUCCESS || action != "__ping"
      || obj.at_key("seq_id").get(seq_el) != simdjson::SUCCESS || !is_integer(seq_el)
      || obj.at_key("data").get(data) != simdjson::SUCCESS || !data.is_object())
    return {};
  if (obj.at_key("context").get(context) == simdjson::SUCCESS && !context.is_null())
    return {};
  return render(simdjson::minify(seq_el), box_error{}, "{}");
}

caf::actor spawn_connection(caf::actor_system& sys, connection_args args) {
  return sys.spawn(connection, std::move(args));
}

} // namespace boxrt::net
