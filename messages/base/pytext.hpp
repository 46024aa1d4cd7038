// Python's text rules, in one place. The reference is Python (and pydantic-core, which
// is Rust); every wire text that it strips, counts or quotes goes through these, so a
// fix here reaches every message that depends on it. CAF-free, allocation-free except
// where a string is returned.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace boxrt::py {

/// What decode_utf8 returns for a malformed sequence.
inline constexpr char32_t bad_code_point = 0xFFFFFFFF;

/// Decodes one code point of `s` at `i` strictly (no overlongs, surrogates or values
/// above U+10FFFF) and advances `i` past it; on malformed input returns bad_code_point
/// and advances one byte.
char32_t decode_utf8(std::string_view s, size_t& i) noexcept;

/// Whether `s` is well-formed UTF-8.
bool valid_utf8(std::string_view s) noexcept;

/// Python's len() of the str `s` encodes: its code points (a malformed byte counts as one).
size_t code_points(std::string_view s) noexcept;

/// Python's str.isspace() for one code point (includes U+001C..U+001F, which Unicode's
/// White_Space property does not).
bool isspace(char32_t cp) noexcept;

/// Python's str.strip(), str.lstrip() and str.rstrip() without arguments.
std::string_view strip(std::string_view s) noexcept;
std::string_view lstrip(std::string_view s) noexcept;
std::string_view rstrip(std::string_view s) noexcept;

/// Unicode White_Space, what Rust's str::trim removes: pydantic-core strips str input
/// this way before its lax int and float parsing (not str.strip()).
bool is_white_space(char32_t cp) noexcept;
std::string_view trim_white_space(std::string_view s) noexcept;

/// Python's repr() of a str: quoted the way Python picks, with its escapes.
std::string repr(std::string_view s);

/// Python's str() of a bool: "True" or "False".
inline std::string bool_text(bool b) {
  return b ? "True" : "False";
}

/// Python's repr() of a finite float: the shortest text that reads back to `x`, with
/// ".0" for whole numbers ("1.0", "0.5").
std::string float_text(double x);

} // namespace boxrt::py
