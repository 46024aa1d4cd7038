// Lower-case hex of bytes: digests, etcd keys built from ids that hold a NUL.
#pragma once

#include <string>
#include <string_view>

namespace boxrt {

/// Two lower-case hex digits per byte of `bytes`.
inline std::string hex_of(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 0xf]);
  }
  return out;
}

} // namespace boxrt
