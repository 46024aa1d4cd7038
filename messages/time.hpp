// Wall-clock helpers and the two ISO-8601 renderings the protocol uses.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace boxrt {

/// Microseconds since the Unix epoch (wall clock).
int64_t wall_now_us() noexcept;

/// "2026-01-02T03:04:05Z", with ".ffffff" when the microseconds are not zero
/// (pydantic's JSON form, used for BoxSessionInfo and process times).
std::string iso_utc_z(int64_t epoch_us);

/// "2026-01-02T03:04:05+00:00", with ".ffffff" when not zero (Python isoformat()).
std::string iso_utc_offset(int64_t epoch_us);

/// Parses an ISO-8601 date-time that carries a timezone (Z or ±HH:MM) into epoch
/// microseconds. Returns nullopt for malformed text; `has_tz` is set false when the
/// text is otherwise valid but has no timezone.
std::optional<int64_t> parse_iso_datetime(std::string_view text, bool& has_tz);

} // namespace boxrt
