#include <boost/test/unit_test.hpp>

#include <string>

#include "messages/base/base64.hpp"

using namespace boxrt;

BOOST_AUTO_TEST_SUITE(base64)

BOOST_AUTO_TEST_CASE(round_trips_every_byte) {
  std::string all;
  for (int i = 0; i < 256; ++i)
    all.push_back(static_cast<char>(i));
  for (size_t n : {0u, 1u, 2u, 3u, 4u, 255u, 256u}) {
    auto text = base64_encode(all.substr(0, n));
    auto back = base64_decode(text);
    BOOST_REQUIRE(back);
    BOOST_TEST(*back == all.substr(0, n));
  }
  BOOST_TEST(*base64_decode("QQ==") == "A");
}

// Python's base64.b64decode(s, validate=True) and its binascii.Error texts.
BOOST_AUTO_TEST_CASE(refuses_as_python_does_with_its_texts) {
  auto why_of = [](std::string_view text) {
    std::string why;
    BOOST_TEST(!base64_decode(text, &why), text);
    return why;
  };
  BOOST_TEST(why_of("QUJD\n") == "Only base64 data is allowed");
  BOOST_TEST(why_of("abc") == "Incorrect padding");
  // Misplaced padding is refused; newer Pythons word these differently ("Excess data
  // after padding", "Discontinuous padding not allowed", "Leading padding not allowed").
  for (auto bad : {"QQ==    ", "A=BC", "QQ==QUJD", "QQ=A", "===="})
    BOOST_TEST(!why_of(bad).empty(), bad);
  BOOST_TEST(why_of("QUJDR") == "Invalid base64-encoded string: number of data characters (5) cannot be 1 more than a multiple of 4");
  // Without `why`, a refusal is nullopt alone.
  BOOST_TEST(!base64_decode("abc"));
}

BOOST_AUTO_TEST_SUITE_END()
