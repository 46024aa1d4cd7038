#include "backends/linux/output.hpp"

#include <algorithm>

#include "messages/base/pytext.hpp"

namespace boxrt {

namespace {

/// Length of an incomplete UTF-8 sequence at the end of `s` (0 when it ends cleanly).
size_t partial_utf8_tail(std::string_view s) noexcept {
  auto n = s.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80)
      continue; // continuation byte: keep looking for the lead byte
    size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return back < need ? back : 0;
  }
  return 0;
}

} // namespace

std::string clip_captured(std::string_view kept, uint64_t total, int64_t limit) {
  auto cap = static_cast<uint64_t>(limit < 0 ? 0 : limit);
  // What was kept is part of the total, whatever the producer claimed.
  total = std::max<uint64_t>(total, kept.size());
  if (total <= cap)
    return std::string{py::strip(kept)};
  if (kept.size() > cap)
    kept = kept.substr(0, cap);
  std::string out;
  if (auto tail = partial_utf8_tail(kept); tail > 0) {
    // U+FFFD ends the decoded text, so only leading whitespace is stripped.
    out = py::lstrip(kept.substr(0, kept.size() - tail));
    out += "\xEF\xBF\xBD";
  } else {
    out = py::strip(kept);
  }
  out += "\n... [raw output clipped at ";
  out += std::to_string(cap);
  out += " bytes, ";
  out += std::to_string(total - cap);
  out += " bytes discarded]";
  return out;
}

} // namespace boxrt
