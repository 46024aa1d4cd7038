#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>

#include "messages/base/json.hpp"

using namespace boxrt;

namespace {

std::string render(double v) {
  json::writer w;
  w.value(v);
  return w.take();
}

} // namespace

BOOST_AUTO_TEST_SUITE(json_suite)

BOOST_AUTO_TEST_CASE(writer_inserts_commas_between_members_and_items) {
  json::writer w;
  w.begin_object();
  w.key("a").value(1);
  w.key("b").begin_array().value("x").value(true).null().begin_object().end_object().end_array();
  w.key("c").begin_object().key("d").value(uint64_t{18446744073709551615ull}).end_object();
  w.key("e").raw("[1,2]");
  w.key("f").value(int64_t{-7});
  w.end_object();
  BOOST_CHECK_EQUAL(w.str(),
                    R"({"a":1,"b":["x",true,null,{}],"c":{"d":18446744073709551615},"e":[1,2],"f":-7})");
}

BOOST_AUTO_TEST_CASE(empty_containers_render_without_commas) {
  json::writer w;
  w.begin_array().begin_array().end_array().begin_object().end_object().end_array();
  BOOST_CHECK_EQUAL(w.take(), "[[],{}]");
}

BOOST_AUTO_TEST_CASE(doubles_render_like_python_repr) {
  BOOST_CHECK_EQUAL(render(1.0), "1.0");
  BOOST_CHECK_EQUAL(render(0.5), "0.5");
  BOOST_CHECK_EQUAL(render(2.5), "2.5");
  BOOST_CHECK_EQUAL(render(100.0), "100.0");
  BOOST_CHECK_EQUAL(render(0.1), "0.1");
  BOOST_CHECK_EQUAL(render(123.456), "123.456");
  BOOST_CHECK_EQUAL(render(0.0), "0.0");
  BOOST_CHECK_EQUAL(render(-0.0), "-0.0");
  BOOST_CHECK_EQUAL(render(-1.5), "-1.5");
  BOOST_CHECK_EQUAL(render(1e15), "1000000000000000.0");
  BOOST_CHECK_EQUAL(render(1e16), "1e+16");
  BOOST_CHECK_EQUAL(render(1e22), "1e+22");
  BOOST_CHECK_EQUAL(render(12345678901234567.0), "1.2345678901234568e+16");
  BOOST_CHECK_EQUAL(render(0.0001), "0.0001");
  BOOST_CHECK_EQUAL(render(0.00001), "1e-05");
  BOOST_CHECK_EQUAL(render(1.5e-7), "1.5e-07");
  BOOST_CHECK_EQUAL(render(5e-324), "5e-324");
  BOOST_CHECK_EQUAL(render(1.7976931348623157e308), "1.7976931348623157e+308");
  BOOST_CHECK_EQUAL(render(std::numeric_limits<double>::quiet_NaN()), "NaN");
  BOOST_CHECK_EQUAL(render(std::numeric_limits<double>::infinity()), "Infinity");
  BOOST_CHECK_EQUAL(render(-std::numeric_limits<double>::infinity()), "-Infinity");
}

BOOST_AUTO_TEST_CASE(quote_escapes_quotes_backslashes_and_control_characters) {
  BOOST_CHECK_EQUAL(json::quote("a\"b\\c"), R"("a\"b\\c")");
  BOOST_CHECK_EQUAL(json::quote("\n\t\r\b\f"), R"("\n\t\r\b\f")");
  BOOST_CHECK_EQUAL(json::quote(std::string_view{"\x01\x1f\0", 3}), R"("\u0001\u001f\u0000")");
  BOOST_CHECK_EQUAL(json::quote("/ ~\x7f"), "\"/ ~\x7f\"");
}

BOOST_AUTO_TEST_CASE(quote_keeps_valid_utf8_as_is) {
  BOOST_CHECK_EQUAL(json::quote("\xC3\xA4\xE2\x82\xAC\xF0\x9F\x98\x80"),
                    "\"\xC3\xA4\xE2\x82\xAC\xF0\x9F\x98\x80\"");
}

BOOST_AUTO_TEST_CASE(invalid_utf8_becomes_one_replacement_per_maximal_subpart) {
  const std::string r = "\xEF\xBF\xBD";
  BOOST_CHECK_EQUAL(json::quote("a\xFF" "b"), "\"a" + r + "b\"");
  // A surrogate encoding is three separate errors, as Python decodes it.
  BOOST_CHECK_EQUAL(json::sanitize_utf8("\xED\xA0\x80"), r + r + r);
  // A truncated sequence is one error, the next character survives.
  BOOST_CHECK_EQUAL(json::sanitize_utf8("\xF0\x9F\x98" "A"), r + "A");
  BOOST_CHECK_EQUAL(json::sanitize_utf8("x\xE2\x82"), "x" + r);
  // Overlong encodings are refused byte by byte.
  BOOST_CHECK_EQUAL(json::sanitize_utf8("\xC0\xAF"), r + r);
  BOOST_CHECK_EQUAL(json::sanitize_utf8("\xF4\x90\x80\x80"), r + r + r + r);
  BOOST_CHECK_EQUAL(json::sanitize_utf8("plain \xC3\xA9"), "plain \xC3\xA9");
}

BOOST_AUTO_TEST_SUITE_END()
