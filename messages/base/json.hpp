// A small JSON writer for replies and a few helpers to read simdjson DOM values
// strictly. simdjson parses; this only renders.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace boxrt::json {

/// Appends `text` to `out` as a JSON string literal. Invalid UTF-8 becomes U+FFFD.
void append_quoted(std::string& out, std::string_view text);

/// Returns `text` as a JSON string literal.
std::string quote(std::string_view text);

/// Streaming writer that inserts commas itself.
class writer {
 public:
  writer& begin_object();
  writer& end_object();
  writer& begin_array();
  writer& end_array();
  writer& key(std::string_view k);
  writer& value(std::string_view v);
  writer& value(const char* v) { return value(std::string_view{v}); }
  writer& value(const std::string& v) { return value(std::string_view{v}); }
  writer& value(int64_t v);
  writer& value(int v) { return value(static_cast<int64_t>(v)); }
  writer& value(uint64_t v);
  writer& value(double v);
  writer& value(bool v);
  writer& null();
  /// Inserts already-encoded JSON as one value.
  writer& raw(std::string_view encoded);

  const std::string& str() const noexcept { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void before_value();
  std::string out_;
  std::vector<bool> has_items_;
  bool after_key_ = false;
};

/// A double as Python's repr() prints it (shortest round trip; "1e+16", "1e-05",
/// "100.0"); NaN and the infinities as JSON's extensions "NaN", "Infinity".
std::string float_repr(double v);

/// Replaces invalid UTF-8 sequences in `text` by U+FFFD.
std::string sanitize_utf8(std::string_view text);

/// The value of one hex digit (either case), or -1.
constexpr int hex_digit(char c) noexcept {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

} // namespace boxrt::json
