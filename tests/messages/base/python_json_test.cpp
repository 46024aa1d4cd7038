#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include <simdjson.h>

#include "messages/base/json.hpp"
#include "messages/base/python_json.hpp"

using namespace boxrt;
namespace py = boxrt::json::python;

namespace {

/// repr() of the document `text` as Python's json.loads would read it.
std::string repr_of(const std::string& text) {
  auto strict = py::rewrite(text);
  BOOST_REQUIRE_MESSAGE(strict, "rewrite refused " + text);
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  BOOST_REQUIRE(parser.parse(strict->text).get(root) == simdjson::SUCCESS);
  return py::repr(root);
}

std::string short_repr_of(const std::string& text) {
  auto strict = py::rewrite(text);
  BOOST_REQUIRE(strict);
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  BOOST_REQUIRE(parser.parse(strict->text).get(root) == simdjson::SUCCESS);
  return py::short_repr(root);
}

} // namespace

BOOST_AUTO_TEST_SUITE(python_json_suite)

BOOST_AUTO_TEST_CASE(floats_print_as_python_repr) {
  BOOST_CHECK_EQUAL(json::float_repr(1.0), "1.0");
  BOOST_CHECK_EQUAL(json::float_repr(100.0), "100.0");
  BOOST_CHECK_EQUAL(json::float_repr(-0.0), "-0.0");
  BOOST_CHECK_EQUAL(json::float_repr(1.5), "1.5");
  BOOST_CHECK_EQUAL(json::float_repr(1e300), "1e+300");
  BOOST_CHECK_EQUAL(json::float_repr(1e16), "1e+16");
  BOOST_CHECK_EQUAL(json::float_repr(1e15), "1000000000000000.0");
  BOOST_CHECK_EQUAL(json::float_repr(0.0001), "0.0001");
  BOOST_CHECK_EQUAL(json::float_repr(0.00001), "1e-05");
  BOOST_CHECK_EQUAL(json::float_repr(0.1), "0.1");
}

BOOST_AUTO_TEST_CASE(numbers_strict_json_cannot_carry_become_stand_ins) {
  for (auto [text, value] : {std::pair{"NaN", "nan"}, {"Infinity", "inf"}, {"-Infinity", "-inf"},
                             {"1e400", "inf"}, {"-1e400", "-inf"},
                             {"123456789012345678901234567890", "123456789012345678901234567890"},
                             {"-99999999999999999999", "-99999999999999999999"}}) {
    BOOST_TEST_CONTEXT(text) {
      auto strict = py::rewrite(std::string{"[1,"} + text + "]");
      BOOST_REQUIRE(strict);
      simdjson::dom::parser parser;
      simdjson::dom::array arr;
      BOOST_REQUIRE(parser.parse(strict->text).get_array().get(arr) == simdjson::SUCCESS);
      auto it = arr.begin();
      ++it;
      auto s = py::stand_in(*it);
      BOOST_REQUIRE(s);
      BOOST_CHECK_EQUAL(*s, value);
    }
  }
  // Integers that still fit 64 bits are left alone.
  BOOST_CHECK_EQUAL(repr_of("[18446744073709551615, -9223372036854775808]"),
                    "[18446744073709551615, -9223372036854775808]");
}

BOOST_AUTO_TEST_CASE(what_pythons_json_refuses_is_refused) {
  for (const std::string& text : {
         std::string{"[1,]"}, std::string{"{\"a\":1,}"}, std::string{"nan"}, std::string{"[NaNx]"},
         std::string{"\"a\tb\""}, std::string{"\xEF\xBB\xBF{}"}, std::string{"{} x"},
         std::string{"[01]"}, std::string(4301, '7'), std::string(1100, '[') + std::string(1100, ']'),
         std::string{"\"\\x41\""}, std::string{"\"\\u12\""}}) {
    BOOST_TEST_CONTEXT(text.substr(0, 40)) {
      BOOST_CHECK(!py::rewrite(text));
    }
  }
  // Within the limits (the depth one is boxd's own bound: Python's depends on its stack).
  BOOST_CHECK(py::rewrite(std::string(4300, '7')));
  BOOST_CHECK(py::rewrite(std::string(1000, '[') + std::string(1000, ']')));
}

BOOST_AUTO_TEST_CASE(unpaired_surrogates_read_as_replacement_and_are_flagged) {
  auto strict = py::rewrite(R"({"a":"x\ud800y","b":"\ud83d\ude00","c":"\udc00"})");
  BOOST_REQUIRE(strict);
  BOOST_REQUIRE_EQUAL(strict->members.size(), 3u);
  BOOST_CHECK(strict->members[0].lone_surrogate);
  BOOST_CHECK(!strict->members[1].lone_surrogate);
  BOOST_CHECK(strict->members[2].lone_surrogate);
  BOOST_CHECK_EQUAL(strict->members[0].raw, R"("x\ud800y")");
  simdjson::dom::parser parser;
  simdjson::dom::object obj;
  BOOST_REQUIRE(parser.parse(strict->text).get_object().get(obj) == simdjson::SUCCESS);
  std::string_view a;
  BOOST_REQUIRE(obj["a"].get_string().get(a) == simdjson::SUCCESS);
  BOOST_CHECK_EQUAL(a, "x\xEF\xBF\xBDy");
  // Python's repr shows the surrogate itself.
  BOOST_CHECK_EQUAL(py::string_repr(R"("x\ud800y")"), R"('x\ud800y')");
}

BOOST_AUTO_TEST_CASE(repr_matches_python) {
  BOOST_CHECK_EQUAL(repr_of(R"({"action":"__ping","data":{}})"),
                    "{'action': '__ping', 'data': {}}");
  BOOST_CHECK_EQUAL(repr_of(R"([null,true,false,1.0,-0.0,"it's"])"),
                    R"([None, True, False, 1.0, -0.0, "it's"])");
  BOOST_CHECK_EQUAL(repr_of(R"("a'b\"c")"), R"('a\'b"c')");
  BOOST_CHECK_EQUAL(repr_of(R"("\n\t\u0001\u007f\u00a0\u00e9")"), R"('\n\t\x01\x7f\xa0é')");
  BOOST_CHECK_EQUAL(repr_of(R"([NaN,Infinity,-Infinity,1e999])"), "[nan, inf, -inf, inf]");
  // A duplicate key keeps its first place and its last value.
  BOOST_CHECK_EQUAL(repr_of(R"({"a":1,"b":2,"a":3})"), "{'a': 3, 'b': 2}");
}

BOOST_AUTO_TEST_CASE(short_repr_cuts_as_pydantic_does) {
  const std::string fifty(48, 'x');  // with quotes: 50 code points, not cut
  BOOST_CHECK_EQUAL(short_repr_of('"' + fifty + '"'), "'" + fifty + "'");
  const std::string long_text(100, 'y');
  BOOST_CHECK_EQUAL(short_repr_of('"' + long_text + '"'),
                    "'" + std::string(24, 'y') + "..." + std::string(23, 'y') + "'");
  // Cut on code points, not bytes.
  std::string accents;
  for (int i = 0; i < 60; ++i)
    accents += "\xC3\xA9";
  auto cut = short_repr_of('"' + accents + '"');
  BOOST_CHECK_EQUAL(cut.size(), 1 + 24 * 2 + 3 + 23 * 2 + 1);
  // A huge input is cut without being printed whole first.
  std::string big = "[";
  for (int i = 0; i < 200000; ++i)
    big += "1,";
  big += "1]";
  BOOST_CHECK_EQUAL(short_repr_of(big), "[1, 1, 1, 1, 1, 1, 1, 1, ... 1, 1, 1, 1, 1, 1, 1, 1]");
}

BOOST_AUTO_TEST_CASE(type_names_are_pythons) {
  simdjson::dom::parser parser;
  auto strict = py::rewrite(R"([null,true,1,1.5,"s",[],{},NaN,123456789012345678901234567890])");
  BOOST_REQUIRE(strict);
  simdjson::dom::array arr;
  BOOST_REQUIRE(parser.parse(strict->text).get_array().get(arr) == simdjson::SUCCESS);
  std::vector<std::string> names;
  for (auto e : arr)
    names.emplace_back(py::type_name(e));
  const std::vector<std::string> expected{"NoneType", "bool", "int",   "float", "str",
                                          "list",     "dict", "float", "int"};
  BOOST_CHECK_EQUAL_COLLECTIONS(names.begin(), names.end(), expected.begin(), expected.end());
}

BOOST_AUTO_TEST_SUITE_END()
