// Python's json grammar (NaN, infinities, unbounded integers, unpaired surrogates)
// rewritten into strict JSON, and Python's repr() of parsed values.
#include "messages/base/python_json.hpp"

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <unordered_map>

#include <simdjson.h>

#include "messages/base/json.hpp"

namespace boxrt::json::python {

namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

/// The key of a stand-in object ("\u0000" in JSON).
constexpr std::string_view stand_in_key{"\0", 1};

/// Python's own limit on the digits of an integer it converts from text.
constexpr size_t max_int_digits = 4300;

/// Deeper documents are refused, as simdjson refuses them by default.
constexpr int max_depth = 1024;

bool is_high(uint32_t u) noexcept {
  return u >= 0xD800 && u <= 0xDBFF;
}

bool is_low(uint32_t u) noexcept {
  return u >= 0xDC00 && u <= 0xDFFF;
}

/// The four hex digits at `p` (which has at least four characters), or -1.
int32_t hex4(const char* p) noexcept {
  int32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    int h = json::hex_digit(p[i]);
    if (h < 0)
      return -1;
    v = v * 16 + h;
  }
  return v;
}

bool is_digit(char c) noexcept {
  return c >= '0' && c <= '9';
}

/// True when the decimal integer `digits` (no sign, no leading zero) is at most `max`.
bool fits(std::string_view digits, std::string_view max) noexcept {
  if (digits.size() != max.size())
    return digits.size() < max.size();
  return digits <= max;
}

void append_stand_in(std::string& out, std::string_view value) {
  out += "{\"\\u0000\":";
  append_quoted(out, value);
  out += '}';
}

class rewriter {
 public:
  explicit rewriter(std::string_view in) : in_{in} {
    out_.reserve(in.size() + 16);
  }

  std::optional<rewritten> run() {
    skip_ws();
    if (!value(0))
      return std::nullopt;
    skip_ws();
    if (pos_ != in_.size())
      return std::nullopt;
    return rewritten{std::move(out_), std::move(members_)};
  }

 private:
  char peek() const noexcept {
    return pos_ < in_.size() ? in_[pos_] : '\0';
  }

  bool at_end() const noexcept {
    return pos_ >= in_.size();
  }

  void skip_ws() {
    while (!at_end()) {
      char c = in_[pos_];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
        return;
      ++pos_;
    }
  }

  bool literal(std::string_view word) {
    if (in_.substr(pos_, word.size()) != word)
      return false;
    pos_ += word.size();
    return true;
  }

  /// One value; `lone` (when given) tells whether a string held an unpaired surrogate.
  bool value(int depth, bool* lone = nullptr) {
    if (depth > max_depth)
      return false;
    switch (peek()) {
      case '{': return container(depth, '{', '}', true);
      case '[': return container(depth, '[', ']', false);
      case '"': return string_token(lone);
      case 't':
        if (!literal("true"))
          return false;
        out_ += "true";
        return true;
      case 'f':
        if (!literal("false"))
          return false;
        out_ += "false";
        return true;
      case 'n':
        if (!literal("null"))
          return false;
        out_ += "null";
        return true;
      case 'N':
        if (!literal("NaN"))
          return false;
        append_stand_in(out_, "nan");
        return true;
      case 'I':
        if (!literal("Infinity"))
          return false;
        append_stand_in(out_, "inf");
        return true;
      default: return number();
    }
  }

  bool container(int depth, char open, char close, bool keyed) {
    ++pos_;
    out_ += open;
    skip_ws();
    if (peek() == close) {
      ++pos_;
      out_ += close;
      return true;
    }
    for (;;) {
      skip_ws();
      if (keyed) {
        if (!string_token(nullptr))
          return false;
        skip_ws();
        if (peek() != ':')
          return false;
        ++pos_;
        out_ += ':';
        skip_ws();
      }
      // The root object's members are recorded as they are rewritten.
      const bool record = keyed && depth == 0;
      const size_t start = pos_;
      bool lone = false;
      if (!value(depth + 1, record ? &lone : nullptr))
        return false;
      if (record)
        members_.push_back(member{in_.substr(start, pos_ - start), lone});
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        out_ += ',';
        continue;
      }
      if (peek() == close) {
        ++pos_;
        out_ += close;
        return true;
      }
      return false;
    }
  }

  /// A string token, copied with its unpaired surrogate escapes replaced by \ufffd.
  bool string_token(bool* lone) {
    if (peek() != '"')
      return false;
    ++pos_;
    out_ += '"';
    for (;;) {
      if (at_end())
        return false;
      const char c = in_[pos_];
      if (c == '"') {
        ++pos_;
        out_ += '"';
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20)
        return false; // Python's strict mode refuses control characters
      if (c != '\\') {
        out_ += c;
        ++pos_;
        continue;
      }
      if (pos_ + 1 >= in_.size())
        return false;
      const char e = in_[pos_ + 1];
      if (e != 'u') {
        if (e != '"' && e != '\\' && e != '/' && e != 'b' && e != 'f' && e != 'n' && e != 'r'
            && e != 't')
          return false;
        out_.append(in_.data() + pos_, 2);
        pos_ += 2;
        continue;
      }
      if (pos_ + 6 > in_.size())
        return false;
      const int32_t u = hex4(in_.data() + pos_ + 2);
      if (u < 0)
        return false;
      if (is_high(static_cast<uint32_t>(u)) && pos_ + 12 <= in_.size() && in_[pos_ + 6] == '\\'
          && in_[pos_ + 7] == 'u') {
        const int32_t v = hex4(in_.data() + pos_ + 8);
        if (v >= 0 && is_low(static_cast<uint32_t>(v))) {
          out_.append(in_.data() + pos_, 12);
          pos_ += 12;
          continue;
        }
      }
      if (is_high(static_cast<uint32_t>(u)) || is_low(static_cast<uint32_t>(u))) {
        out_ += "\\ufffd";
        if (lone != nullptr)
          *lone = true;
      } else {
        out_.append(in_.data() + pos_, 6);
      }
      pos_ += 6;
    }
  }

  /// A number as Python's json reads it: -?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?, or
  /// -Infinity. Integers beyond 64 bits and floats beyond a double become stand-ins.
  bool number() {
    const size_t start = pos_;
    bool negative = false;
    if (peek() == '-') {
      negative = true;
      ++pos_;
      if (peek() == 'I') {
        if (!literal("Infinity"))
          return false;
        append_stand_in(out_, "-inf");
        return true;
      }
    }
    const size_t digits_start = pos_;
    if (peek() == '0') {
      ++pos_;
    } else if (peek() >= '1' && peek() <= '9') {
      while (is_digit(peek()))
        ++pos_;
    } else {
      return false;
    }
    const std::string_view digits = in_.substr(digits_start, pos_ - digits_start);
    bool is_float = false;
    if (peek() == '.' && pos_ + 1 < in_.size() && is_digit(in_[pos_ + 1])) {
      is_float = true;
      ++pos_;
      while (is_digit(peek()))
        ++pos_;
    }
    if (peek() == 'e' || peek() == 'E') {
      size_t p = pos_ + 1;
      if (p < in_.size() && (in_[p] == '+' || in_[p] == '-'))
        ++p;
      if (p < in_.size() && is_digit(in_[p])) {
        is_float = true;
        pos_ = p;
        while (is_digit(peek()))
          ++pos_;
      }
    }
    const std::string_view token = in_.substr(start, pos_ - start);
    if (!is_float) {
      const bool in_range = negative ? fits(digits, "9223372036854775808")
                                     : fits(digits, "18446744073709551615");
      if (in_range) {
        out_ += token;
      } else if (digits.size() > max_int_digits) {
        return false; // ValueError in Python: the frame is not JSON to the reference
      } else {
        append_stand_in(out_, token);
      }
      return true;
    }
    // strtod reads the C locale's '.', which boxd never changes.
    std::string copy{token};
    errno = 0;
    const double v = std::strtod(copy.c_str(), nullptr);
    if (errno == ERANGE && std::isinf(v))
      append_stand_in(out_, v < 0 ? "-inf" : "inf");
    else
      out_ += token; // underflow reads as 0.0 in both
    return true;
  }

  std::string_view in_;
  size_t pos_ = 0;
  std::string out_;
  std::vector<member> members_;
};

// -- repr -------------------------------------------------------------------------------

/// Collects a repr, or only its first 25 and last 24 code points once it grows past
/// 50 (pydantic's cut), so quoting a 16 MiB input takes no more memory than that.
class repr_sink {
 public:
  explicit repr_sink(bool cut) : cut_{cut} {}

  void put(std::string_view code_point) {
    ++count_;
    if (!cut_ || count_ <= cut_length) {
      head_ += code_point;
      return;
    }
    if (count_ == cut_length + 1) {
      // Split what is kept so far into the first 25 and the rest as the tail.
      std::string all = std::move(head_);
      head_.clear();
      size_t i = 0;
      size_t n = 0;
      while (i < all.size()) {
        size_t len = sequence_length(all, i);
        std::string_view cp{all.data() + i, len};
        if (n < head_length)
          head_ += cp;
        else
          tail_.emplace_back(cp);
        ++n;
        i += len;
      }
    }
    tail_.emplace_back(code_point);
    while (tail_.size() > tail_length)
      tail_.pop_front();
  }

  void put_ascii(std::string_view text) {
    for (char c : text)
      put(std::string_view{&c, 1});
  }

  std::string take() {
    if (count_ <= cut_length || !cut_)
      return std::move(head_);
    std::string out = std::move(head_);
    out += "...";
    for (auto& cp : tail_)
      out += cp;
    return out;
  }

 private:
  static constexpr size_t cut_length = 50;
  static constexpr size_t head_length = 25;
  static constexpr size_t tail_length = 24;

  static size_t sequence_length(const std::string& s, size_t i) {
    const auto b = static_cast<unsigned char>(s[i]);
    size_t len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    return std::min(len, s.size() - i);
  }

  bool cut_;
  size_t count_ = 0;
  std::string head_;
  std::deque<std::string> tail_;
};

/// Python's str.isprintable() for one code point, for the characters that occur in
/// practice: controls, separators, format characters, surrogates and private use
/// are not printable; unassigned code points are treated as printable.
bool printable(uint32_t cp) noexcept {
  if (cp < 0x20 || cp == 0x7F)
    return false;
  if (cp < 0x7F)
    return true;
  if (cp <= 0xA0 || cp == 0xAD)
    return false;
  if ((cp >= 0x600 && cp <= 0x605) || cp == 0x61C || cp == 0x6DD || cp == 0x70F || cp == 0x8E2
      || cp == 0x180E || cp == 0x1680)
    return false;
  if ((cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F)
      || (cp >= 0x205F && cp <= 0x2064) || (cp >= 0x2066 && cp <= 0x206F) || cp == 0x3000)
    return false;
  if ((cp >= 0xD800 && cp <= 0xF8FF) || cp == 0xFEFF || (cp >= 0xFFF9 && cp <= 0xFFFB)
      || cp == 0xFFFE || cp == 0xFFFF)
    return false;
  if ((cp >= 0x1BCA0 && cp <= 0x1BCA3) || (cp >= 0x1D173 && cp <= 0x1D17A) || cp == 0xE0001
      || (cp >= 0xE0020 && cp <= 0xE007F) || cp >= 0xF0000)
    return false;
  return true;
}

void put_utf8(repr_sink& out, uint32_t cp) {
  char buf[4];
  size_t n = 0;
  if (cp < 0x80) {
    buf[n++] = static_cast<char>(cp);
  } else if (cp < 0x800) {
    buf[n++] = static_cast<char>(0xC0 | (cp >> 6));
    buf[n++] = static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    buf[n++] = static_cast<char>(0xE0 | (cp >> 12));
    buf[n++] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    buf[n++] = static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    buf[n++] = static_cast<char>(0xF0 | (cp >> 18));
    buf[n++] = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    buf[n++] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    buf[n++] = static_cast<char>(0x80 | (cp & 0x3F));
  }
  out.put(std::string_view{buf, n});
}

void put_escape(repr_sink& out, char kind, uint32_t cp, int width) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string esc{'\\', kind};
  for (int shift = (width - 1) * 4; shift >= 0; shift -= 4)
    esc += hex[(cp >> shift) & 0xF];
  out.put_ascii(esc);
}

/// Python's unicode_repr over a sequence of code points.
void put_str_repr(repr_sink& out, const std::vector<uint32_t>& cps) {
  bool single = false;
  bool dbl = false;
  for (auto cp : cps) {
    single = single || cp == '\'';
    dbl = dbl || cp == '"';
  }
  const char quote = single && !dbl ? '"' : '\'';
  out.put(std::string_view{&quote, 1});
  for (auto cp : cps) {
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out.put("\\");
      put_utf8(out, cp);
    } else if (cp == '\t') {
      out.put_ascii("\\t");
    } else if (cp == '\n') {
      out.put_ascii("\\n");
    } else if (cp == '\r') {
      out.put_ascii("\\r");
    } else if (printable(cp)) {
      put_utf8(out, cp);
    } else if (cp <= 0xFF) {
      put_escape(out, 'x', cp, 2);
    } else if (cp <= 0xFFFF) {
      put_escape(out, 'u', cp, 4);
    } else {
      put_escape(out, 'U', cp, 8);
    }
  }
  out.put(std::string_view{&quote, 1});
}

/// Code points of valid UTF-8 text (simdjson has validated it).
std::vector<uint32_t> code_points(std::string_view s) {
  std::vector<uint32_t> cps;
  cps.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    uint32_t cp = 0;
    size_t len = 1;
    if (b < 0x80) {
      cp = b;
    } else if (b < 0xE0) {
      cp = b & 0x1F;
      len = 2;
    } else if (b < 0xF0) {
      cp = b & 0x0F;
      len = 3;
    } else {
      cp = b & 0x07;
      len = 4;
    }
    for (size_t k = 1; k < len && i + k < s.size(); ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    cps.push_back(cp);
    i += len;
  }
  return cps;
}

/// Code points of a JSON string token (with quotes), unpaired surrogates kept.
std::vector<uint32_t> token_code_points(std::string_view raw) {
  if (raw.size() >= 2 && raw.front() == '"' && raw.back() == '"')
    raw = raw.substr(1, raw.size() - 2);
  std::vector<uint32_t> cps;
  for (size_t i = 0; i < raw.size();) {
    if (raw[i] != '\\') {
      size_t j = i + 1;
      while (j < raw.size() && raw[j] != '\\')
        ++j;
      auto part = code_points(raw.substr(i, j - i));
      cps.insert(cps.end(), part.begin(), part.end());
      i = j;
      continue;
    }
    if (i + 1 >= raw.size())
      break;
    const char e = raw[i + 1];
    if (e != 'u' || i + 6 > raw.size()) {
      switch (e) {
        case 'b': cps.push_back('\b'); break;
        case 'f': cps.push_back('\f'); break;
        case 'n': cps.push_back('\n'); break;
        case 'r': cps.push_back('\r'); break;
        case 't': cps.push_back('\t'); break;
        default: cps.push_back(static_cast<unsigned char>(e));
      }
      i += 2;
      continue;
    }
    auto u = static_cast<uint32_t>(std::max(hex4(raw.data() + i + 2), 0));
    i += 6;
    if (is_high(u) && i + 6 <= raw.size() && raw[i] == '\\' && raw[i + 1] == 'u') {
      const int32_t v = hex4(raw.data() + i + 2);
      if (v >= 0 && is_low(static_cast<uint32_t>(v))) {
        u = 0x10000 + ((u - 0xD800) << 10) + (static_cast<uint32_t>(v) - 0xDC00);
        i += 6;
      }
    }
    cps.push_back(u);
  }
  return cps;
}

void put_repr(repr_sink& out, const element& e) {
  switch (e.type()) {
    case element_type::NULL_VALUE: out.put_ascii("None"); return;
    case element_type::BOOL: out.put_ascii(e.get_bool().value_unsafe() ? "True" : "False"); return;
    case element_type::INT64: out.put_ascii(std::to_string(e.get_int64().value_unsafe())); return;
    case element_type::UINT64: out.put_ascii(std::to_string(e.get_uint64().value_unsafe())); return;
    case element_type::DOUBLE: out.put_ascii(float_repr(e.get_double().value_unsafe())); return;
    case element_type::STRING:
      put_str_repr(out, code_points(e.get_string().value_unsafe()));
      return;
    case element_type::ARRAY: {
      out.put("[");
      bool first = true;
      const simdjson::dom::array items = e.get_array().value_unsafe();
      for (element item : items) {
        if (!first)
          out.put_ascii(", ");
        first = false;
        put_repr(out, item);
      }
      out.put("]");
      return;
    }
    case element_type::OBJECT: {
      if (auto s = stand_in(e)) {
        out.put_ascii(*s);
        return;
      }
      // A dict keeps the first position of a duplicated key and its last value.
      std::vector<std::pair<std::string_view, element>> fields;
      std::unordered_map<std::string_view, size_t> seen;
      const object members = e.get_object().value_unsafe();
      for (auto field : members) {
        auto [it, fresh] = seen.emplace(field.key, fields.size());
        if (fresh)
          fields.emplace_back(field.key, field.value);
        else
          fields[it->second].second = field.value;
      }
      out.put("{");
      bool first = true;
      for (auto& [key, value] : fields) {
        if (!first)
          out.put_ascii(", ");
        first = false;
        put_str_repr(out, code_points(key));
        out.put_ascii(": ");
        put_repr(out, value);
      }
      out.put("}");
      return;
    }
  }
}

} // namespace

std::optional<std::string_view> stand_in(const element& e) {
  object obj;
  if (e.get_object().get(obj) != simdjson::SUCCESS || obj.size() != 1)
    return std::nullopt;
  auto field = *obj.begin();
  std::string_view value;
  if (field.key != stand_in_key || field.value.get_string().get(value) != simdjson::SUCCESS)
    return std::nullopt;
  // A client can write such an object itself: only a number's text is a stand-in, so
  // what is echoed raw is always a number.
  if (value == "nan" || value == "inf" || value == "-inf")
    return value;
  auto digits = value.substr(!value.empty() && value[0] == '-' ? 1 : 0);
  if (digits.empty() || digits.size() > 4300
      || digits.find_first_not_of("0123456789") != std::string_view::npos)
    return std::nullopt;
  return value;
}

std::optional<rewritten> rewrite(std::string_view in) {
  return rewriter{in}.run();
}

std::string string_repr(std::string_view raw) {
  repr_sink out{false};
  put_str_repr(out, token_code_points(raw));
  return out.take();
}

std::string repr(const element& e) {
  repr_sink out{false};
  put_repr(out, e);
  return out.take();
}

std::string short_repr(const element& e) {
  repr_sink out{true};
  put_repr(out, e);
  return out.take();
}

std::string shorten(std::string_view repr_text) {
  repr_sink out{true};
  auto cps = code_points(repr_text);
  for (auto cp : cps)
    put_utf8(out, cp);
  return out.take();
}

std::string_view type_name(const element& e) {
  switch (e.type()) {
    case element_type::NULL_VALUE: return "NoneType";
    case element_type::BOOL: return "bool";
    case element_type::INT64:
    case element_type::UINT64: return "int";
    case element_type::DOUBLE: return "float";
    case element_type::STRING: return "str";
    case element_type::ARRAY: return "list";
    case element_type::OBJECT:
      if (auto s = stand_in(e))
        return (*s == "nan" || *s == "inf" || *s == "-inf") ? "float" : "int";
      return "dict";
  }
  return "object";
}

} // namespace boxrt::json::python
