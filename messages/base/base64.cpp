#include "messages/base/base64.hpp"

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

std::optional<std::string> base64_decode(std::string_view s, std::string* why) {
  auto refuse = [why](std::string text) -> std::optional<std::string> {
    if (why != nullptr)
      *why = std::move(text);
    return std::nullopt;
  };
  auto digit = [](char c) -> int {
    if (c >= 'A' && c <= 'Z')
      return c - 'A';
    if (c >= 'a' && c <= 'z')
      return c - 'a' + 26;
    if (c >= '0' && c <= '9')
      return c - '0' + 52;
    if (c == '+')
      return 62;
    if (c == '/')
      return 63;
    return -1;
  };
  size_t data_chars = s.size();
  while (data_chars > 0 && s[data_chars - 1] == '=')
    --data_chars;
  const size_t pads = s.size() - data_chars;
  for (size_t i = 0; i < data_chars; ++i)
    if (digit(s[i]) < 0)
      return refuse("Only base64 data is allowed");
  if (pads > 2 || s.size() % 4 != 0) {
    if (data_chars % 4 == 1)
      return refuse("Invalid base64-encoded string: number of data characters ("
                    + std::to_string(data_chars) + ") cannot be 1 more than a multiple of 4");
    return refuse("Incorrect padding");
  }
  std::string out;
  out.reserve(data_chars / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < data_chars; ++i) {
    acc = (acc << 6) | static_cast<uint32_t>(digit(s[i]));
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

} // namespace boxrt
