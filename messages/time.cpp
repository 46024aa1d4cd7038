// Wall clock and ISO-8601 rendering/parsing in UTC, without locale or tz database.
#include "messages/time.hpp"

#include <chrono>
#include <cstdio>

namespace boxrt {

namespace {

constexpr int64_t us_per_sec = 1'000'000;
constexpr int64_t sec_per_day = 86'400;

int64_t floor_div(int64_t a, int64_t b) noexcept {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0)))
    --q;
  return q;
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
int64_t days_from_civil(int64_t y, unsigned m, unsigned d) noexcept {
  y -= m <= 2;
  const int64_t era = floor_div(y, 400);
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

void civil_from_days(int64_t z, int64_t& y, unsigned& m, unsigned& d) noexcept {
  z += 719468;
  const int64_t era = floor_div(z, 146097);
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  y = static_cast<int64_t>(yoe) + era * 400 + (m <= 2);
}

bool is_leap(int64_t y) noexcept {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

unsigned days_in_month(int64_t y, unsigned m) noexcept {
  static constexpr unsigned days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

std::string iso_utc(int64_t epoch_us, const char* zone) {
  const int64_t secs = floor_div(epoch_us, us_per_sec);
  const int64_t micros = epoch_us - secs * us_per_sec;
  const int64_t days = floor_div(secs, sec_per_day);
  const int64_t sod = secs - days * sec_per_day;
  int64_t y = 0;
  unsigned m = 0;
  unsigned d = 0;
  civil_from_days(days, y, m, d);
  char buf[64];
  int n = std::snprintf(buf, sizeof(buf), "%04lld-%02u-%02uT%02d:%02d:%02d",
                        static_cast<long long>(y), m, d, static_cast<int>(sod / 3600),
                        static_cast<int>(sod / 60 % 60), static_cast<int>(sod % 60));
  std::string out{buf, static_cast<size_t>(n)};
  if (micros != 0) {
    n = std::snprintf(buf, sizeof(buf), ".%06lld", static_cast<long long>(micros));
    out.append(buf, static_cast<size_t>(n));
  }
  out += zone;
  return out;
}

/// Reads exactly `count` decimal digits at `pos`.
bool digits(std::string_view text, size_t& pos, size_t count, int& out) noexcept {
  if (pos + count > text.size())
    return false;
  int v = 0;
  for (size_t i = 0; i < count; ++i) {
    char c = text[pos + i];
    if (c < '0' || c > '9')
      return false;
    v = v * 10 + (c - '0');
  }
  pos += count;
  out = v;
  return true;
}

} // namespace

int64_t wall_now_us() noexcept {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
}

std::string iso_utc_z(int64_t epoch_us) {
  return iso_utc(epoch_us, "Z");
}

std::string iso_utc_offset(int64_t epoch_us) {
  return iso_utc(epoch_us, "+00:00");
}

std::optional<int64_t> parse_iso_datetime(std::string_view text, bool& has_tz) {
  has_tz = false;
  size_t pos = 0;
  int year = 0;
  int month = 0;
  int day = 0;
  int hour = 0;
  int minute = 0;
  int second = 0;
  if (!digits(text, pos, 4, year) || pos >= text.size() || text[pos++] != '-'
      || !digits(text, pos, 2, month) || pos >= text.size() || text[pos++] != '-'
      || !digits(text, pos, 2, day))
    return std::nullopt;
  if (pos >= text.size() || (text[pos] != 'T' && text[pos] != 't' && text[pos] != ' '))
    return std::nullopt;
  ++pos;
  if (!digits(text, pos, 2, hour) || pos >= text.size() || text[pos++] != ':'
      || !digits(text, pos, 2, minute) || pos >= text.size() || text[pos++] != ':'
      || !digits(text, pos, 2, second))
    return std::nullopt;
  int64_t micros = 0;
  if (pos < text.size() && (text[pos] == '.' || text[pos] == ',')) {
    ++pos;
    size_t start = pos;
    int64_t scale = 100'000;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      // Digits beyond microseconds are truncated.
      micros += (text[pos] - '0') * scale;
      scale /= 10;
      ++pos;
    }
    if (pos == start || pos - start > 9)
      return std::nullopt;
  }
  if (year < 1 || month < 1 || month > 12 || day < 1
      || static_cast<unsigned>(day) > days_in_month(year, static_cast<unsigned>(month))
      || hour > 23 || minute > 59 || second > 59)
    return std::nullopt;
  int64_t offset_sec = 0;
  if (pos < text.size()) {
    char z = text[pos];
    if (z == 'Z' || z == 'z') {
      ++pos;
    } else if (z == '+' || z == '-') {
      ++pos;
      int oh = 0;
      int om = 0;
      if (!digits(text, pos, 2, oh))
        return std::nullopt;
      if (pos < text.size() && text[pos] == ':')
        ++pos;
      if (!digits(text, pos, 2, om))
        return std::nullopt;
      if (oh > 23 || om > 59)
        return std::nullopt;
      offset_sec = (oh * 3600 + om * 60) * (z == '-' ? -1 : 1);
    } else {
      return std::nullopt;
    }
    if (pos != text.size())
      return std::nullopt;
    has_tz = true;
  }
  const int64_t days =
    days_from_civil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  const int64_t secs = days * sec_per_day + hour * 3600 + minute * 60 + second - offset_sec;
  return secs * us_per_sec + micros;
}

} // namespace boxrt
