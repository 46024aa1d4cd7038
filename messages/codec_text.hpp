// decode_text: parse then decode. Kept apart so only its users pay for simdjson.h.
#pragma once

#include <simdjson.h>

#include "messages/codec.hpp"
#include "messages/base/python_json.hpp"

namespace boxrt {

/// Parses `text` as Python's json reads it (messages/base/python_json.hpp) and runs `decode`
/// on the root (tests, config files, tools). Malformed JSON gives a ValueError naming
/// the parse failure.
template <class Decode>
auto decode_text(std::string_view text, Decode&& decode)
  -> decltype(decode(std::declval<const simdjson::dom::element&>())) {
  thread_local simdjson::dom::parser parser;
  simdjson::padded_string padded{text};
  simdjson::dom::element root;
  if (auto err = parser.parse(padded).get(root); err) {
    auto strict = json::python::rewrite(text);
    if (!strict || parser.parse(strict->text).get(root) != simdjson::SUCCESS)
      return box_error{ec::value, std::string{"Invalid JSON: "} + simdjson::error_message(err)};
  }
  return decode(root);
}

} // namespace boxrt
