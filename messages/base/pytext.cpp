#include "messages/base/pytext.hpp"

#include "messages/base/json.hpp"

namespace boxrt::py {

char32_t decode_utf8(std::string_view s, size_t& i) noexcept {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  size_t len = 0;
  char32_t cp = 0;
  char32_t min = 0;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    ++i;
    return bad_code_point;
  }
  if (i + len > s.size()) {
    ++i;
    return bad_code_point;
  }
  for (size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) {
      ++i;
      return bad_code_point;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    ++i;
    return bad_code_point;
  }
  i += len;
  return cp;
}

bool valid_utf8(std::string_view s) noexcept {
  for (size_t i = 0; i < s.size();)
    if (decode_utf8(s, i) == bad_code_point)
      return false;
  return true;
}

size_t code_points(std::string_view s) noexcept {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n)
    decode_utf8(s, i);
  return n;
}

bool isspace(char32_t cp) noexcept {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0
         || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029
         || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool is_white_space(char32_t cp) noexcept {
  return cp != 0x1C && cp != 0x1D && cp != 0x1E && cp != 0x1F && isspace(cp);
}

namespace {

/// Where the run of `space` code points at the front of `s` ends.
template <class Pred>
size_t leading(std::string_view s, Pred space) noexcept {
  size_t begin = 0;
  while (begin < s.size()) {
    size_t next = begin;
    if (!space(decode_utf8(s, next)))
      break;
    begin = next;
  }
  return begin;
}

/// Where the run of `space` code points at the back of `s` starts.
template <class Pred>
size_t trailing(std::string_view s, Pred space) noexcept {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && end - start < 4 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80)
      --start;
    size_t probe = start;
    if (!space(decode_utf8(s, probe)) || probe != end)
      break;
    end = start;
  }
  return end;
}

} // namespace

std::string_view lstrip(std::string_view s) noexcept {
  return s.substr(leading(s, isspace));
}

std::string_view rstrip(std::string_view s) noexcept {
  return s.substr(0, trailing(s, isspace));
}

std::string_view strip(std::string_view s) noexcept {
  return rstrip(lstrip(s));
}

std::string_view trim_white_space(std::string_view s) noexcept {
  s = s.substr(leading(s, is_white_space));
  return s.substr(0, trailing(s, is_white_space));
}

std::string repr(std::string_view s) {
  const char q = (s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos)
                   ? '"'
                   : '\'';
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out += q;
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (ch == q || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\r') {
      out += "\\r";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xF];
    } else {
      out += ch;
    }
  }
  out += q;
  return out;
}

std::string float_text(double x) {
  json::writer w;
  w.value(x);
  return w.take();
}

} // namespace boxrt::py
