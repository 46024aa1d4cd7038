// The reply writer and the UTF-8/whitespace helpers shared by every codec.
#include "messages/base/json.hpp"

#include <cstring>

#include <charconv>
#include <cmath>
#include <cstdio>

namespace boxrt::json {

namespace {

constexpr std::string_view replacement = "\xEF\xBF\xBD";

/// Length of the well-formed UTF-8 sequence at the start of `p[0..n)`, or 0 when it is
/// ill-formed; then `bad` is the length of the maximal ill-formed subpart, which
/// becomes one U+FFFD (the policy of Python's errors="replace").
size_t utf8_sequence(const unsigned char* p, size_t n, size_t& bad) noexcept {
  const unsigned char b0 = p[0];
  if (b0 < 0x80)
    return 1;
  size_t need = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 == 0xE0) {
    need = 2;
    lo = 0xA0;
  } else if ((b0 >= 0xE1 && b0 <= 0xEC) || b0 == 0xEE || b0 == 0xEF) {
    need = 2;
  } else if (b0 == 0xED) {
    need = 2;
    hi = 0x9F;
  } else if (b0 == 0xF0) {
    need = 3;
    lo = 0x90;
  } else if (b0 >= 0xF1 && b0 <= 0xF3) {
    need = 3;
  } else if (b0 == 0xF4) {
    need = 3;
    hi = 0x8F;
  } else {
    bad = 1;
    return 0;
  }
  for (size_t i = 1; i <= need; ++i) {
    // Only the first continuation byte has a narrowed range.
    const unsigned char min = i == 1 ? lo : 0x80;
    const unsigned char max = i == 1 ? hi : 0xBF;
    if (i >= n || p[i] < min || p[i] > max) {
      bad = i;
      return 0;
    }
  }
  return need + 1;
}

/// Appends the UTF-8 sequence that starts `text` (non-empty), or one U+FFFD for its
/// ill-formed part, and returns how many bytes of `text` that used.
size_t append_sequence(std::string& out, std::string_view text) {
  size_t bad = 0;
  const size_t len =
    utf8_sequence(reinterpret_cast<const unsigned char*>(text.data()), text.size(), bad);
  if (len == 0) {
    out += replacement;
    return bad;
  }
  out.append(text.data(), len);
  return len;
}

/// Renders a finite double the way Python's repr() does: shortest round-trip digits,
/// fixed notation for decimal exponents in [-4, 16), else "1e+16" / "1.5e-05".
void append_double(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
    return;
  }
  if (std::isinf(v)) {
    out += v < 0 ? "-Infinity" : "Infinity";
    return;
  }
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string_view sci{buf, static_cast<size_t>(res.ptr - buf)};
  std::string sign;
  if (!sci.empty() && sci.front() == '-') {
    sign = "-";
    sci.remove_prefix(1);
  }
  auto epos = sci.find('e');
  std::string_view mantissa = sci.substr(0, epos);
  int exponent = 0;
  std::from_chars(sci.data() + epos + 1 + (sci[epos + 1] == '+' ? 1 : 0),
                  sci.data() + sci.size(), exponent);
  std::string digits;
  for (char c : mantissa)
    if (c != '.')
      digits += c;
  const int decpt = exponent + 1; // position of the decimal point after the first digit
  const int ndigits = static_cast<int>(digits.size());
  out += sign;
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0.";
      out.append(static_cast<size_t>(-decpt), '0');
      out += digits;
    } else if (decpt >= ndigits) {
      out += digits;
      out.append(static_cast<size_t>(decpt - ndigits), '0');
      out += ".0";
    } else {
      out.append(digits, 0, static_cast<size_t>(decpt));
      out += '.';
      out.append(digits, static_cast<size_t>(decpt));
    }
    return;
  }
  out += digits[0];
  if (ndigits > 1) {
    out += '.';
    out.append(digits, 1);
  }
  char ebuf[16];
  std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exponent < 0 ? '-' : '+',
                exponent < 0 ? -exponent : exponent);
  out += ebuf;
}

/// Decimal digits of an integer (at most 20 and a sign).
template <class Int>
void append_integer(std::string& out, Int v) {
  char buf[24];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, res.ptr);
}

} // namespace

void append_quoted(std::string& out, std::string_view text) {
  static constexpr char hex[] = "0123456789abcdef";
  out.reserve(out.size() + text.size() + 2);
  out += '"';
  size_t i = 0;
  while (i < text.size()) {
    // Bytes that need no escape go in one append: command output is mostly such runs.
    size_t run = i;
    // Eight bytes at a time: stop at the word holding a byte below 0x20, at or above
    // 0x80, a quote or a backslash.
    constexpr uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    while (run + 8 <= text.size()) {
      uint64_t w;
      std::memcpy(&w, text.data() + run, 8);
      const uint64_t below_space = (w - ones * 0x20) & ~w;
      const uint64_t quote = w ^ (ones * '"'), backslash = w ^ (ones * '\\');
      const uint64_t special = below_space | ((quote - ones) & ~quote)
                               | ((backslash - ones) & ~backslash) | w;
      if (special & highs)
        break;
      run += 8;
    }
    while (run < text.size()) {
      const auto b = static_cast<unsigned char>(text[run]);
      if (b < 0x20 || b >= 0x80 || b == '"' || b == '\\')
        break;
      ++run;
    }
    if (run > i) {
      out.append(text.data() + i, run - i);
      i = run;
      if (i == text.size())
        break;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      i += append_sequence(out, text.substr(i));
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 0xF];
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  out += '"';
}

std::string float_repr(double v) {
  std::string out;
  append_double(out, v);
  return out;
}

std::string quote(std::string_view text) {
  std::string out;
  append_quoted(out, text);
  return out;
}

std::string sanitize_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();)
    i += append_sequence(out, text.substr(i));
  return out;
}

void writer::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!has_items_.empty()) {
    if (has_items_.back())
      out_ += ',';
    has_items_.back() = true;
  }
}

writer& writer::begin_object() {
  before_value();
  out_ += '{';
  has_items_.push_back(false);
  return *this;
}

writer& writer::end_object() {
  has_items_.pop_back();
  out_ += '}';
  return *this;
}

writer& writer::begin_array() {
  before_value();
  out_ += '[';
  has_items_.push_back(false);
  return *this;
}

writer& writer::end_array() {
  has_items_.pop_back();
  out_ += ']';
  return *this;
}

writer& writer::key(std::string_view k) {
  before_value();
  append_quoted(out_, k);
  out_ += ':';
  after_key_ = true;
  return *this;
}

writer& writer::value(std::string_view v) {
  before_value();
  append_quoted(out_, v);
  return *this;
}

writer& writer::value(int64_t v) {
  before_value();
  append_integer(out_, v);
  return *this;
}

writer& writer::value(uint64_t v) {
  before_value();
  append_integer(out_, v);
  return *this;
}

writer& writer::value(double v) {
  before_value();
  append_double(out_, v);
  return *this;
}

writer& writer::value(bool v) {
  before_value();
  out_ += v ? "true" : "false";
  return *this;
}

writer& writer::null() {
  before_value();
  out_ += "null";
  return *this;
}

writer& writer::raw(std::string_view encoded) {
  before_value();
  out_ += encoded;
  return *this;
}

} // namespace boxrt::json
