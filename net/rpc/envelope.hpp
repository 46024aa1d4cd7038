// The request envelope of one inbound /rpc/ws frame, read as the reference reads it
// (protocol.md §1.6): json.loads (NaN, infinities, integers of any size and unpaired
// surrogates included; of duplicate keys the last wins, for every field), then
// pydantic's ActionRequest (seq_id a lax int, action a str, data a dict, context one
// of the two context models, stream_flow_control 1 or null), then the action table.
// The one copy of these rules: the connection actor and the socket's heartbeat fast
// path both read frames through it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <simdjson.h>

#include "messages/models.hpp"

namespace boxrt::net {

struct envelope {
  enum class kind {
    /// Not a request: not JSON, not an object, a response, or neither (no reply).
    ignored,
    /// A request: it gets exactly one reply.
    request,
  };
  kind what = kind::ignored;
  /// ignored: why, for the debug log.
  std::string why;
  /// request: the seq_id the reply carries, as JSON: the request's own value as
  /// Python prints it, or -1 when it has none.
  std::string seq_id = "-1";
  /// request: the reply's message when the request may not run (an invalid envelope
  /// or an unknown action), already a JSON string literal; empty when it may run.
  std::string refusal;
  /// request refused: the class of `refusal` (for the request metrics).
  ec refusal_class = ec::none;
  /// request that may run: the action and its data (valid until the parser's next
  /// document) and its decoded context, when it has a non-null one.
  std::string_view action;
  simdjson::dom::element data;
  std::optional<action_context> context;
  /// request that may run: `stream_flow_control` is 1 (the caller acknowledges stream
  /// frames with __stream_ack).
  bool flow_control = false;
};

/// Reads `text` with `parser`. `known` tells the actions this runtime has.
envelope read_envelope(simdjson::dom::parser& parser, const std::string& text,
                       bool (*known)(std::string_view));

} // namespace boxrt::net
