// Zip-slip and zip-bomb safe extraction of uploaded skill archives (§11.7): every
// member's metadata is checked before anything is written, then members are streamed
// out with byte counters. libzip stays inside skill_zip.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "messages/error.hpp"

namespace boxrt::skills {

/// Python's posixpath.normpath: lexical, "" -> ".", leading ".." kept.
std::string normpath(std::string_view path);

} // namespace boxrt::skills

namespace boxrt::skills::zip {

inline constexpr uint64_t max_upload_bytes = 20ull << 20;
inline constexpr uint64_t max_entries = 512;
inline constexpr uint64_t max_entry_bytes = 16ull << 20;
inline constexpr uint64_t max_total_bytes = 64ull << 20;
inline constexpr uint64_t max_ratio = 100;
inline constexpr size_t copy_chunk = 64 * 1024;

/// Checks the archive in `bytes` and extracts it into the new folder `name` of the
/// directory `parent` (`shown`: its host path, for messages). Every member is written
/// beneath that folder's descriptor, no link followed. Returns a validation error with
/// the reference's text, or a none error. On failure the caller removes the folder.
box_error safe_extract(std::string_view bytes, int parent, const std::string& name, const std::string& shown);

} // namespace boxrt::skills::zip
