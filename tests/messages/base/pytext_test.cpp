// Python's text rules (messages/base/pytext): what str.strip(), str.isspace(), len()
// and repr() do in the reference, byte for byte.
#include <initializer_list>

#include <boost/test/unit_test.hpp>

#include "messages/base/pytext.hpp"

using namespace boxrt;

BOOST_AUTO_TEST_SUITE(pytext_suite)

BOOST_AUTO_TEST_CASE(isspace_is_pythons_and_white_space_is_unicodes) {
  // "\x1c".isspace() is True in Python; Unicode's White_Space (Rust's trim) lacks it.
  for (char32_t cp : std::initializer_list<char32_t>{0x09u, 0x0Au, 0x0Bu, 0x0Cu, 0x0Du, 0x20u, 0x85u, 0xA0u, 0x1680u, 0x2000u,
                      0x200Au, 0x2028u, 0x2029u, 0x202Fu, 0x205Fu, 0x3000u}) {
    BOOST_TEST(py::isspace(cp));
    BOOST_TEST(py::is_white_space(cp));
  }
  for (char32_t cp : std::initializer_list<char32_t>{0x1Cu, 0x1Du, 0x1Eu, 0x1Fu}) {
    BOOST_TEST(py::isspace(cp));
    BOOST_TEST(!py::is_white_space(cp));
  }
  for (char32_t cp : std::initializer_list<char32_t>{0x00u, 0x08u, 0x0Eu, 0x41u, 0x200Bu, 0xFEFFu, py::bad_code_point}) {
    BOOST_TEST(!py::isspace(cp));
    BOOST_TEST(!py::is_white_space(cp));
  }
}

BOOST_AUTO_TEST_CASE(strip_removes_unicode_spaces_at_both_ends_only) {
  BOOST_CHECK_EQUAL(py::strip("  a b  "), "a b");
  BOOST_CHECK_EQUAL(py::strip("\xc2\xa0" "a\xe3\x80\x80" "b\xe2\x80\xa8"), "a\xe3\x80\x80" "b");
  BOOST_CHECK_EQUAL(py::strip("\x1c\x1f x \x1e"), "x");
  BOOST_CHECK_EQUAL(py::lstrip(" \xc2\x85x "), "x ");
  BOOST_CHECK_EQUAL(py::rstrip(" x\xe2\x80\x80\t"), " x");
  BOOST_CHECK_EQUAL(py::strip(" \t\r\n"), "");
  BOOST_CHECK_EQUAL(py::strip(""), "");
  // A zero-width space is not whitespace to Python.
  BOOST_CHECK_EQUAL(py::strip("\xe2\x80\x8bx"), "\xe2\x80\x8bx");
}

BOOST_AUTO_TEST_CASE(strip_never_cuts_into_malformed_or_multibyte_text) {
  // A lone continuation byte or a cut sequence at an end is not a space.
  BOOST_CHECK_EQUAL(py::strip("x \x80"), "x \x80");
  BOOST_CHECK_EQUAL(py::strip("\xe3\x80 x"), "\xe3\x80 x");
  // "\xc2\xa0" is a space, but its second byte alone after a letter is not.
  BOOST_CHECK_EQUAL(py::rstrip("x\xa0"), "x\xa0");
}

BOOST_AUTO_TEST_CASE(trim_white_space_keeps_the_separator_controls) {
  BOOST_CHECK_EQUAL(py::trim_white_space("\xc2\xa0 12 \xe3\x80\x80"), "12");
  BOOST_CHECK_EQUAL(py::trim_white_space("\x1c" "12"), "\x1c" "12");
}

BOOST_AUTO_TEST_CASE(code_points_count_what_len_counts) {
  BOOST_CHECK_EQUAL(py::code_points(""), 0u);
  BOOST_CHECK_EQUAL(py::code_points("abc"), 3u);
  BOOST_CHECK_EQUAL(py::code_points("\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80"), 3u);
  BOOST_CHECK_EQUAL(py::code_points("a\xff" "b"), 3u);
}

BOOST_AUTO_TEST_CASE(decode_is_strict) {
  for (std::string_view bad : {"\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82", "\xff"}) {
    size_t i = 0;
    BOOST_TEST((py::decode_utf8(bad, i) == py::bad_code_point));
    BOOST_CHECK_EQUAL(i, 1u);
    BOOST_TEST(!py::valid_utf8(bad));
  }
  size_t i = 0;
  BOOST_TEST((py::decode_utf8("\xf0\x9f\x98\x80", i) == char32_t{0x1F600}));
  BOOST_CHECK_EQUAL(i, 4u);
}

BOOST_AUTO_TEST_CASE(repr_quotes_as_python_does) {
  BOOST_CHECK_EQUAL(py::repr("a"), "'a'");
  BOOST_CHECK_EQUAL(py::repr("it's"), "\"it's\"");
  BOOST_CHECK_EQUAL(py::repr("both ' and \""), "'both \\' and \"'");
  BOOST_CHECK_EQUAL(py::repr("t\tn\nr\r\x01\x7f\\"), "'t\\tn\\nr\\r\\x01\\x7f\\\\'");
}

BOOST_AUTO_TEST_CASE(bool_and_float_texts_are_pythons) {
  BOOST_CHECK_EQUAL(py::bool_text(true), "True");
  BOOST_CHECK_EQUAL(py::bool_text(false), "False");
  BOOST_CHECK_EQUAL(py::float_text(1.0), "1.0");
  BOOST_CHECK_EQUAL(py::float_text(0.5), "0.5");
  BOOST_CHECK_EQUAL(py::float_text(1e16), "1e+16");
}

BOOST_AUTO_TEST_SUITE_END()
