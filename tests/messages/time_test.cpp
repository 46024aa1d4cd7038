#include <boost/test/unit_test.hpp>

#include "messages/time.hpp"

using namespace boxrt;

namespace {

constexpr int64_t jan2_2026 = 1767323045000000; // 2026-01-02T03:04:05Z

std::optional<int64_t> parse(std::string_view text, bool& has_tz) {
  return parse_iso_datetime(text, has_tz);
}

} // namespace

BOOST_AUTO_TEST_SUITE(time_suite)

BOOST_AUTO_TEST_CASE(iso_utc_z_omits_zero_microseconds) {
  BOOST_CHECK_EQUAL(iso_utc_z(0), "1970-01-01T00:00:00Z");
  BOOST_CHECK_EQUAL(iso_utc_z(jan2_2026), "2026-01-02T03:04:05Z");
}

BOOST_AUTO_TEST_CASE(iso_utc_z_shows_nonzero_microseconds_before_the_zone) {
  BOOST_CHECK_EQUAL(iso_utc_z(jan2_2026 + 123456), "2026-01-02T03:04:05.123456Z");
  BOOST_CHECK_EQUAL(iso_utc_z(jan2_2026 + 1), "2026-01-02T03:04:05.000001Z");
}

BOOST_AUTO_TEST_CASE(iso_utc_offset_renders_like_python_isoformat) {
  BOOST_CHECK_EQUAL(iso_utc_offset(jan2_2026), "2026-01-02T03:04:05+00:00");
  BOOST_CHECK_EQUAL(iso_utc_offset(jan2_2026 + 123456), "2026-01-02T03:04:05.123456+00:00");
}

BOOST_AUTO_TEST_CASE(times_before_the_epoch_render_correctly) {
  BOOST_CHECK_EQUAL(iso_utc_z(-1), "1969-12-31T23:59:59.999999Z");
  BOOST_CHECK_EQUAL(iso_utc_z(-86400LL * 1000000), "1969-12-31T00:00:00Z");
}

BOOST_AUTO_TEST_CASE(leap_days_render_and_parse) {
  bool tz = false;
  auto v = parse("2024-02-29T12:00:00Z", tz);
  BOOST_REQUIRE(v);
  BOOST_CHECK_EQUAL(iso_utc_z(*v), "2024-02-29T12:00:00Z");
  BOOST_CHECK(!parse("2026-02-29T12:00:00Z", tz));
  BOOST_CHECK(parse("2000-02-29T00:00:00Z", tz));
  BOOST_CHECK(!parse("2100-02-29T00:00:00Z", tz));
}

BOOST_AUTO_TEST_CASE(parse_accepts_z_and_offsets) {
  bool tz = false;
  auto z = parse("2026-01-02T03:04:05Z", tz);
  BOOST_REQUIRE(z);
  BOOST_CHECK(tz);
  BOOST_CHECK_EQUAL(*z, jan2_2026);
  auto plus = parse("2026-01-02T05:04:05+02:00", tz);
  BOOST_REQUIRE(plus);
  BOOST_CHECK_EQUAL(*plus, jan2_2026);
  auto minus = parse("2026-01-01T22:34:05-04:30", tz);
  BOOST_REQUIRE(minus);
  BOOST_CHECK_EQUAL(*minus, jan2_2026);
  auto compact = parse("2026-01-02T03:04:05+0000", tz);
  BOOST_REQUIRE(compact);
  BOOST_CHECK_EQUAL(*compact, jan2_2026);
}

BOOST_AUTO_TEST_CASE(parse_accepts_a_space_and_fractions) {
  bool tz = false;
  auto v = parse("2026-01-02 03:04:05.5+00:00", tz);
  BOOST_REQUIRE(v);
  BOOST_CHECK(tz);
  BOOST_CHECK_EQUAL(*v, jan2_2026 + 500000);
  auto micros = parse("2026-01-02T03:04:05.123456Z", tz);
  BOOST_REQUIRE(micros);
  BOOST_CHECK_EQUAL(*micros, jan2_2026 + 123456);
  auto nanos = parse("2026-01-02T03:04:05.123456789Z", tz);
  BOOST_REQUIRE(nanos);
  BOOST_CHECK_EQUAL(*nanos, jan2_2026 + 123456);
}

BOOST_AUTO_TEST_CASE(parse_reports_a_missing_timezone) {
  bool tz = true;
  auto v = parse("2026-01-02T03:04:05", tz);
  BOOST_REQUIRE(v);
  BOOST_CHECK(!tz);
  BOOST_CHECK_EQUAL(*v, jan2_2026);
}

BOOST_AUTO_TEST_CASE(parse_refuses_malformed_text) {
  bool tz = false;
  for (auto bad : {"", "2026", "2026-01-02", "2026-13-02T03:04:05Z", "2026-01-32T03:04:05Z",
                   "2026-01-02T24:00:00Z", "2026-01-02T03:60:05Z", "2026-01-02T03:04:60Z",
                   "2026-01-02T03:04:05ZZ", "2026-01-02T03:04:05+25:00", "2026-01-02T03:04:05.Z",
                   "2026-01-02X03:04:05Z", "0000-01-01T00:00:00Z", "2026-01-02T03:04:05 extra",
                   "20260102T030405Z"})
    BOOST_CHECK_MESSAGE(!parse(bad, tz), bad);
}

BOOST_AUTO_TEST_CASE(rendering_round_trips_through_parse) {
  bool tz = false;
  for (int64_t us : {int64_t{0}, jan2_2026, jan2_2026 + 999999, int64_t{253402300799000000}}) {
    auto v = parse(iso_utc_offset(us), tz);
    BOOST_REQUIRE(v);
    BOOST_CHECK_EQUAL(*v, us);
  }
}

BOOST_AUTO_TEST_CASE(wall_clock_is_in_the_present) {
  BOOST_CHECK_GT(wall_now_us(), jan2_2026 - 365LL * 86400 * 1000000);
}

BOOST_AUTO_TEST_SUITE_END()
