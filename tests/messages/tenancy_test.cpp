#include <boost/test/unit_test.hpp>

#include <set>

#include "helpers.hpp"
#include "messages/tenancy.hpp"

using namespace boxrt;
using boxrt::test::check_error;
using boxrt::test::check_ok;

namespace {

const std::string placement = "ws-695136eeae1cb9b6af4a8226-g1";

std::string physical(std::string_view logical) {
  return check_ok(physical_session_id("instance-a", "workspace-a", 1, logical));
}

} // namespace

BOOST_AUTO_TEST_SUITE(tenancy_suite)

BOOST_AUTO_TEST_CASE(sha256_hex_is_lower_case_hex) {
  BOOST_CHECK_EQUAL(sha256_hex("abc"),
                    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  BOOST_CHECK_EQUAL(sha256_hex(""),
                    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

BOOST_AUTO_TEST_CASE(box_namespace_matches_the_reference_example) {
  BOOST_CHECK_EQUAL(box_namespace("instance-a", "workspace-a"), "ws-695136eeae1cb9b6af4a8226");
}

BOOST_AUTO_TEST_CASE(box_namespace_separates_instance_and_workspace_with_nul) {
  BOOST_CHECK_NE(box_namespace("ab", "c"), box_namespace("a", "bc"));
}

BOOST_AUTO_TEST_CASE(runtime_namespace_appends_the_generation) {
  BOOST_CHECK_EQUAL(runtime_namespace("instance-a", "workspace-a", 1), placement);
  BOOST_CHECK_EQUAL(runtime_namespace("instance-a", "workspace-a", 10),
                    "ws-695136eeae1cb9b6af4a8226-g10");
}

BOOST_AUTO_TEST_CASE(global_maps_to_the_reference_physical_id) {
  BOOST_CHECK_EQUAL(physical("global"), "ws-695136eeae1cb9b6af4a8226-g1-global");
}

BOOST_AUTO_TEST_CASE(ids_of_safe_characters_map_exactly_as_the_reference) {
  for (auto id : {"global", "a-b", "A_b.c-9", "..", "a--b", "x.y_z", "0"})
    BOOST_CHECK_EQUAL(physical(id), placement + "-" + id);
}

BOOST_AUTO_TEST_CASE(surrounding_whitespace_is_stripped_without_a_hash) {
  BOOST_CHECK_EQUAL(physical("  global \n"), placement + "-global");
}

BOOST_AUTO_TEST_CASE(sanitised_ids_carry_a_hash_of_the_stripped_original) {
  BOOST_CHECK_EQUAL(check_ok(safe_session_suffix("a b")), "a-b~c8687a08");
  BOOST_CHECK_EQUAL(check_ok(safe_session_suffix("a/b")), "a-b~c14cddc0");
  BOOST_CHECK_EQUAL(check_ok(safe_session_suffix("-x-")), "x~c6cf95e5");
  BOOST_CHECK_EQUAL(check_ok(safe_session_suffix("x..y/z")), "x..y-z~cdd62e10");
  BOOST_CHECK_EQUAL(check_ok(safe_session_suffix("caf\xC3\xA9")), "caf~850f7dc4");
  BOOST_CHECK_EQUAL(check_ok(safe_session_suffix(" a b ")), "a-b~c8687a08");
}

BOOST_AUTO_TEST_CASE(ids_that_sanitise_alike_never_collide) {
  std::set<std::string> ids{physical("a b"), physical("a/b"), physical("a-b")};
  BOOST_CHECK_EQUAL(ids.size(), 3u);
  BOOST_CHECK_EQUAL(physical("a-b"), placement + "-a-b");
}

BOOST_AUTO_TEST_CASE(empty_logical_ids_are_refused) {
  check_error(safe_session_suffix(""), ec::value, "Box session_id must not be empty");
  check_error(safe_session_suffix(" \t "), ec::value, "Box session_id must not be empty");
  check_error(physical_session_id("i", "w", 1, ""), ec::value, "Box session_id must not be empty");
}

BOOST_AUTO_TEST_CASE(ids_without_a_valid_character_are_refused) {
  check_error(safe_session_suffix("///"), ec::value,
              "Box session_id must contain a valid character");
  check_error(safe_session_suffix("---"), ec::value,
              "Box session_id must contain a valid character");
  check_error(physical_session_id("i", "w", 1, "\xC3\xA9"), ec::value,
              "Box session_id must contain a valid character");
}

BOOST_AUTO_TEST_SUITE_END()
