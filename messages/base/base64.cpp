#include "messages/base/base64.hpp"

#include <array>
#include <cstdint>

#include <openssl/evp.h>

namespace boxrt {

std::string base64_encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  auto n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                           reinterpret_cast<const unsigned char*>(bytes.data()),
                           static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

namespace {

/// Each byte's 6-bit value, or 0xFF when it is no base64 digit.
constexpr auto digit_table = [] {
  std::array<uint8_t, 256> t{};
  t.fill(0xFF);
  const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (uint8_t i = 0; i < 64; ++i)
    t[static_cast<uint8_t>(digits[i])] = i;
  return t;
}();

} // namespace

std::optional<std::string> base64_decode(std::string_view s, std::string* why) {
  auto refuse = [why](std::string text) -> std::optional<std::string> {
    if (why != nullptr)
      *why = std::move(text);
    return std::nullopt;
  };
  size_t data_chars = s.size();
  while (data_chars > 0 && s[data_chars - 1] == '=')
    --data_chars;
  const size_t pads = s.size() - data_chars;
  const auto* in = reinterpret_cast<const uint8_t*>(s.data());
  // One pass over the digits (a table, no branches per kind): any non-digit refuses.
  uint8_t bad = 0;
  for (size_t i = 0; i < data_chars; ++i)
    bad |= digit_table[in[i]];
  if (bad & 0x80)
    return refuse("Only base64 data is allowed");
  if (pads > 2 || s.size() % 4 != 0) {
    if (data_chars % 4 == 1)
      return refuse("Invalid base64-encoded string: number of data characters ("
                    + std::to_string(data_chars) + ") cannot be 1 more than a multiple of 4");
    return refuse("Incorrect padding");
  }
  std::string out(data_chars / 4 * 3 + (data_chars % 4 == 0 ? 0 : data_chars % 4 - 1), '\0');
  auto* o = reinterpret_cast<uint8_t*>(out.data());
  size_t i = 0;
  for (; i + 4 <= data_chars; i += 4) {
    uint32_t v = (uint32_t{digit_table[in[i]]} << 18) | (uint32_t{digit_table[in[i + 1]]} << 12)
                 | (uint32_t{digit_table[in[i + 2]]} << 6) | uint32_t{digit_table[in[i + 3]]};
    *o++ = static_cast<uint8_t>(v >> 16);
    *o++ = static_cast<uint8_t>(v >> 8);
    *o++ = static_cast<uint8_t>(v);
  }
  // The last 2 or 3 digits (before the padding): 1 or 2 bytes.
  const size_t rest = data_chars - i;
  if (rest >= 2) {
    uint32_t v = (uint32_t{digit_table[in[i]]} << 18) | (uint32_t{digit_table[in[i + 1]]} << 12)
                 | (rest == 3 ? uint32_t{digit_table[in[i + 2]]} << 6 : 0);
    *o++ = static_cast<uint8_t>(v >> 16);
    if (rest == 3)
      *o++ = static_cast<uint8_t>(v >> 8);
  }
  return out;
}

} // namespace boxrt
