// The two forms of a structured log event.
#include <boost/test/unit_test.hpp>
#include <simdjson.h>

#include "messages/base/log.hpp"

using namespace boxrt;

BOOST_AUTO_TEST_SUITE(log_events)

BOOST_AUTO_TEST_CASE(text_form_quotes_only_what_needs_it) {
  auto text = logs::text_payload("session_stop", {{"ws", "ws-0123"}, {"lifetime_ms", int64_t{42}},
                                                   {"reason", "BoxSessionNotFoundError: session s is being deleted"},
                                                   {"empty", ""}});
  BOOST_CHECK_EQUAL(text, "session_stop ws=ws-0123 lifetime_ms=42 "
                          "reason=\"BoxSessionNotFoundError: session s is being deleted\" empty=\"\"");
}

BOOST_AUTO_TEST_CASE(json_form_is_the_members_of_one_object) {
  auto members = logs::json_members("admission", {{"ws", "ws-0123"}, {"generation", 2},
                                                  {"reason", "a \"quoted\"\nline"}});
  simdjson::dom::parser p;
  simdjson::dom::element e;
  auto text = "{" + members + "}";
  BOOST_REQUIRE(p.parse(text).get(e) == simdjson::SUCCESS);
  BOOST_CHECK_EQUAL(std::string_view{e["event"].get_string().value()}, "admission");
  BOOST_CHECK_EQUAL(e["generation"].get_int64().value(), 2);
  BOOST_CHECK_EQUAL(std::string_view{e["reason"].get_string().value()}, "a \"quoted\"\nline");
}

BOOST_AUTO_TEST_SUITE_END()
