#include "net/rpc/envelope.hpp"

#include <cmath>
#include <vector>

#include "messages/base/pytext.hpp"
#include "messages/codec.hpp"
#include "messages/base/json.hpp"
#include "messages/base/python_json.hpp"

namespace boxrt::net {

namespace {

namespace dom = simdjson::dom;
namespace py = json::python;
using dom::element;
using dom::element_type;

constexpr auto json_ok = simdjson::SUCCESS;

/// pydantic's link under each error; the reference pins pydantic 2.14.
constexpr std::string_view pydantic_docs = "https://errors.pydantic.dev/2.14/v/";

/// One line of a pydantic ValidationError.
struct field_error {
  std::string loc;
  std::string msg;
  std::string type;
  std::string input_value;
  std::string input_type;
};

/// The text of pydantic's ValidationError for ActionRequest; to_wire adds the class.
std::string validation_text(const std::vector<field_error>& errors) {
  std::string out = std::to_string(errors.size()) + " validation error"
                    + (errors.size() == 1 ? "" : "s") + " for ActionRequest";
  for (const auto& e : errors) {
    out += "\n" + e.loc + "\n  " + e.msg + " [type=" + e.type + ", input_value=" + e.input_value
           + ", input_type=" + e.input_type + "]\n    For further information visit ";
    out += pydantic_docs;
    out += e.type;
  }
  return out;
}

/// The last value of each envelope field (Python's dict keeps the last duplicate) and,
/// for a rewritten document, what the rewrite saw in it.
struct fields {
  std::optional<element> seq_id, action, data, context, stream_flow_control;
  const py::member* seq_member = nullptr;
  const py::member* action_member = nullptr;
  bool has_code = false;
};

fields collect(const dom::object& obj, const std::vector<py::member>* members) {
  fields f;
  size_t i = 0;
  for (auto field : obj) {
    const py::member* m = members != nullptr && i < members->size() ? &(*members)[i] : nullptr;
    ++i;
    const std::string_view key = field.key;
    if (key == "seq_id") {
      f.seq_id = field.value;
      f.seq_member = m;
    } else if (key == "action") {
      f.action = field.value;
      f.action_member = m;
    } else if (key == "data") {
      f.data = field.value;
    } else if (key == "context") {
      f.context = field.value;
    } else if (key == "stream_flow_control") {
      f.stream_flow_control = field.value;
    } else if (key == "code") {
      f.has_code = true;
    }
  }
  return f;
}

enum class int_text { ok, invalid, too_long };

/// pydantic's lax int from a str: trimmed, an optional sign, digits with single
/// underscores between them, optionally a '.' and zeros; at most 4300 digits.
int_text parse_int_text(std::string_view s) {
  s = boxrt::py::trim_white_space(s);
  if (!s.empty() && (s[0] == '+' || s[0] == '-'))
    s.remove_prefix(1);
  if (auto dot = s.find('.'); dot != std::string_view::npos) {
    auto frac = s.substr(dot + 1);
    if (frac.empty() || frac.find_first_not_of('0') != std::string_view::npos)
      return int_text::invalid;
    s = s.substr(0, dot);
  }
  if (s.empty())
    return int_text::invalid;
  size_t digits = 0;
  bool after_digit = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c >= '0' && c <= '9') {
      ++digits;
      after_digit = true;
    } else if (c == '_' && after_digit && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '9') {
      after_digit = false;
    } else {
      return int_text::invalid;
    }
  }
  return digits > 4300 ? int_text::too_long : int_text::ok;
}

bool is_non_finite(std::string_view stand_in) {
  return stand_in == "nan" || stand_in == "inf" || stand_in == "-inf";
}

/// How a reply echoes a stand-in: as Python's json.dumps prints the number.
std::string echo_stand_in(std::string_view stand_in) {
  if (stand_in == "nan")
    return "NaN";
  if (stand_in == "inf")
    return "Infinity";
  if (stand_in == "-inf")
    return "-Infinity";
  return std::string{stand_in};
}

field_error error_for(std::string loc, std::string msg, std::string type, const element& e) {
  return {std::move(loc), std::move(msg), std::move(type), py::short_repr(e),
          std::string{py::type_name(e)}};
}

/// ActionRequest.seq_id: an int in pydantic's lax mode. Sets the echo either way.
void check_seq_id(const fields& f, const element& root, envelope& env,
                  std::vector<field_error>& errors) {
  if (!f.seq_id) {
    errors.push_back({"seq_id", "Field required", "missing", py::short_repr(root), "dict"});
    return;
  }
  const element& e = *f.seq_id;
  auto refuse = [&](const char* msg, const char* type) {
    errors.push_back(error_for("seq_id", msg, type, e));
  };
  static constexpr const char* too_large =
    "Unable to parse input string as an integer, exceeded maximum size";
  if (auto s = py::stand_in(e)) {
    env.seq_id = echo_stand_in(*s);
    if (is_non_finite(*s))
      refuse("Input should be a finite number", "finite_number");
    return;
  }
  switch (e.type()) {
    case element_type::BOOL:
    case element_type::INT64:
    case element_type::UINT64: env.seq_id = simdjson::minify(e); return;
    case element_type::DOUBLE: {
      const double d = e.get_double().value_unsafe();
      env.seq_id = json::float_repr(d);
      if (d != std::trunc(d))
        refuse("Input should be a valid integer, got a number with a fractional part",
               "int_from_float");
      else if (d >= 9223372036854775808.0 || d < -9223372036854775808.0)
        refuse(too_large, "int_parsing_size");
      return;
    }
    case element_type::STRING: {
      if (f.seq_member != nullptr && f.seq_member->lone_surrogate) {
        env.seq_id = std::string{f.seq_member->raw};
        errors.push_back({"seq_id",
                          "Input should be a valid string, unable to parse raw data as a "
                          "unicode string",
                          "string_unicode", py::shorten(py::string_repr(f.seq_member->raw)),
                          "str"});
        return;
      }
      env.seq_id = simdjson::minify(e);
      switch (parse_int_text(e.get_string().value_unsafe())) {
        case int_text::ok: return;
        case int_text::invalid:
          refuse("Input should be a valid integer, unable to parse string as an integer",
                 "int_parsing");
          return;
        case int_text::too_long: refuse(too_large, "int_parsing_size"); return;
      }
      return;
    }
    default:
      env.seq_id = simdjson::minify(e);
      refuse("Input should be a valid integer", "int_type");
  }
}

/// The reply message of an unknown action, as a JSON string literal. A name with an
/// unpaired surrogate is echoed from its source text, escapes and all, as the
/// reference's json.dumps writes it back.
std::string not_found(const fields& f, std::string_view action) {
  const py::member* m = f.action_member;
  if (m != nullptr && m->lone_surrogate && m->raw.size() <= 4096) {
    std::string_view inner = m->raw.substr(1, m->raw.size() - 2);
    return "\"ValueError: Action " + std::string{inner} + " not found\"";
  }
  return json::quote(box_error{ec::value, "Action " + std::string{action} + " not found"}.to_wire());
}

} // namespace

envelope read_envelope(dom::parser& parser, const std::string& text,
                       bool (*known)(std::string_view)) {
  envelope env;
  element root;
  std::optional<py::rewritten> strict;
  if (auto err = parser.parse(text).get(root); err) {
    // What simdjson refuses, Python's json may still read.
    strict = py::rewrite(text);
    if (!strict) {
      env.why = simdjson::error_message(err);
      return env;
    }
    // A stand-in is 13 bytes longer than "NaN": a frame of nothing else would cost many
    // times its size in the parser. Such a frame is ignored as unreadable.
    if (strict->text.size() > 2 * text.size() + 4096) {
      env.why = "too many numbers strict JSON cannot carry";
      return env;
    }
    if (auto again = parser.parse(strict->text).get(root); again) {
      env.why = simdjson::error_message(again);
      return env;
    }
  }
  dom::object obj;
  if (root.get_object().get(obj) != json_ok || py::stand_in(root)) {
    env.why = "not a JSON object";
    return env;
  }
  const fields f = collect(obj, strict ? &strict->members : nullptr);
  if (f.has_code) {
    // A response: this runtime makes no outbound calls, so no waiter can match it.
    env.why = "a response frame";
    return env;
  }
  if (!f.action) {
    env.why = "neither a request nor a response";
    return env;
  }
  env.what = envelope::kind::request;

  // pydantic reports every field's error, in the model's field order.
  std::vector<field_error> errors;
  check_seq_id(f, root, env, errors);
  std::string_view action;
  if (py::stand_in(*f.action) || f.action->get_string().get(action) != json_ok)
    errors.push_back(error_for("action", "Input should be a valid string", "string_type", *f.action));
  if (!f.data)
    errors.push_back({"data", "Field required", "missing", py::short_repr(root), "dict"});
  else if (!f.data->is_object() || py::stand_in(*f.data))
    errors.push_back(error_for("data", "Input should be a valid dictionary", "dict_type", *f.data));
  if (f.stream_flow_control && !f.stream_flow_control->is_null()) {
    // Literal[1] compares by value: 1, 1.0 and True all pass.
    const element& s = *f.stream_flow_control;
    const bool one = (s.is_int64() && s.get_int64().value_unsafe() == 1)
                     || (s.is_uint64() && s.get_uint64().value_unsafe() == 1)
                     || (s.is_double() && s.get_double().value_unsafe() == 1.0)
                     || (s.is_bool() && s.get_bool().value_unsafe());
    if (!one)
      errors.push_back(error_for("stream_flow_control", "Input should be 1", "literal_error", s));
    env.flow_control = one;
  }
  if (!errors.empty()) {
    env.refusal = json::quote(box_error{ec::envelope, validation_text(errors)}.to_wire());
    env.refusal_class = ec::envelope;
    return env;
  }
  if (f.context && !f.context->is_null()) {
    auto ctx = decode_action_context(*f.context);
    if (!ctx) {
      env.refusal = json::quote(ctx.error().to_wire());
      env.refusal_class = ctx.error().code;
      if (known(action))
        env.action = action; // counted under its own name
      return env;
    }
    env.context = std::move(ctx.value());
  }
  // Unknown actions fail before any check of the context's trust (§1.6).
  if (!known(action)) {
    env.refusal = not_found(f, action);
    env.refusal_class = ec::value;
    return env;
  }
  env.action = action;
  env.data = *f.data;
  return env;
}

} // namespace boxrt::net
