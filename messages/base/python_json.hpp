// Python's json module reads more than RFC 8259 allows, and the reference server reads
// every frame with it: NaN, Infinity and -Infinity, integers of any size, numbers
// beyond a double, and \u escapes of unpaired UTF-16 surrogates. simdjson refuses
// them. rewrite() turns such a document into strict JSON that simdjson reads, so boxd
// answers the frames the reference answers; repr() prints a parsed value the way
// Python's repr() prints what json.loads made of it, for validation messages in the
// reference's words.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace simdjson::dom {
class element;
} // namespace simdjson::dom

namespace boxrt::json::python {

/// If `e` stands in for a number strict JSON cannot carry, that number as Python
/// prints it: "nan", "inf", "-inf" or the digits of an integer beyond 64 bits. In the
/// rewritten text such a number is an object whose only key is "\u0000", so a reader
/// that wants a number, a string or a known object refuses it as it refuses any
/// other wrong type.
std::optional<std::string_view> stand_in(const simdjson::dom::element& e);

/// One member of a rewritten top-level object, in document order.
struct member {
  /// The value's source text (a view into the input of rewrite()).
  std::string_view raw;
  /// The value is a string holding an unpaired surrogate (read as U+FFFD).
  bool lone_surrogate = false;
};

/// A document in strict JSON and what the rewrite changed at its top level.
struct rewritten {
  std::string text;
  /// One entry per member when the root is an object, in the order simdjson iterates.
  std::vector<member> members;
};

/// The strict form of `in`, or nullopt when Python's json.loads refuses `in` as well
/// (a bad token, a control character in a string, an integer of more than 4300
/// digits, nesting deeper than 1024, a byte order mark, trailing data).
/// Unpaired surrogate escapes become \ufffd; other escapes and all text are kept.
std::optional<rewritten> rewrite(std::string_view in);

/// Python's repr() of the string a JSON string token (`raw`, with its quotes)
/// decodes to, unpaired surrogates included.
std::string string_repr(std::string_view raw);

/// Python's repr() of the value json.loads makes of `e` (a stand-in prints its
/// number; of duplicate keys the last value wins, in the first key's place).
std::string repr(const simdjson::dom::element& e);

/// repr() as pydantic quotes an input in its messages: cut to its first 25 and last
/// 24 characters around "..." when longer than 50.
std::string short_repr(const simdjson::dom::element& e);

/// The same cut applied to an already rendered repr.
std::string shorten(std::string_view repr_text);

/// Python's type name of that value: int, float, str, bool, NoneType, list or dict.
std::string_view type_name(const simdjson::dom::element& e);

} // namespace boxrt::json::python
