// Captured-output rules every backend shares: the reference strips decoded output and
// caps each stream with an exact clip notice (backends-and-skills.md §2).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace boxrt {

/// Caps one stream of `total` bytes, of which `kept` (at most `limit`) were kept, as
/// the reference's _clip_captured_bytes does: decode (a cut UTF-8 sequence becomes
/// U+FFFD), strip, then, when bytes were dropped, append
/// "\n... [raw output clipped at <limit> bytes, <total - limit> bytes discarded]".
std::string clip_captured(std::string_view kept, uint64_t total, int64_t limit);

/// clip_captured for a stream held whole in memory.
inline std::string clip_output(std::string_view text, int64_t limit) {
  auto cap = static_cast<size_t>(limit < 0 ? 0 : limit);
  return clip_captured(text.substr(0, cap), text.size(), limit);
}

} // namespace boxrt
