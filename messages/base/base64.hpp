// Base64 (RFC 4648, the standard alphabet with '=' padding): the etcd gateway's keys and
// values, and __file_chunk's chunks, which are read as Python's
// base64.b64decode(s, validate=True) reads them (protocol.md §1.11).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace boxrt {

std::string base64_encode(std::string_view bytes);

/// The alphabet only, '=' padding only at the end, a length of a multiple of 4. On a
/// refusal, nullopt, and `why` (when given) holds the text of Python's binascii.Error.
std::optional<std::string> base64_decode(std::string_view text, std::string* why = nullptr);

} // namespace boxrt
