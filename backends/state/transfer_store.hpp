// Storage of `__file_chunk` uploads (protocol.md §1.11): one private folder per
// connection below the transfer root, a file per key. The root may be a folder tenants
// can write (a shared upload directory), so the folder and every file are reached by
// descriptor, beneath the root, following no link.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "messages/error.hpp"

namespace boxrt {

/// Writes one chunk of `key` into `dir` (the connection's folder, "<root>/<name>";
/// created 0700 on first use). Chunk 0 truncates, later chunks append; the file may not
/// grow beyond `max_bytes`. Errors carry the reference's texts. Blocking.
box_error write_transfer_chunk(const std::string& dir, const std::string& key, std::string_view bytes, bool first,
                               int64_t max_bytes);

/// Removes one uploaded file ("<dir>/<key>") once its consumer is done with it, by
/// descriptor of its folder. Blocking.
void remove_transfer_file(const std::string& path);

/// Removes the connection's folder `dir` and everything in it (by descriptor); logs
/// what it cannot remove. Blocking.
void remove_transfer_folder(const std::string& dir);

} // namespace boxrt
