// The egress policy's JSON (messages/network_policy.hpp): strict reading, one canonical
// text, name and address matching.
#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>

#include "messages/network_policy.hpp"

using namespace boxrt;

namespace {

result<network_policy> parse(std::string_view text) { return parse_network_policy(text, "policy"); }

bool contains(const char* range, const char* address) {
  auto c = cidr::parse(range);
  BOOST_REQUIRE(c);
  uint8_t bytes[16] = {};
  int family = ::inet_pton(AF_INET, address, bytes) == 1 ? 4 : 6;
  if (family == 6)
    BOOST_REQUIRE(::inet_pton(AF_INET6, address, bytes) == 1);
  return c->contains(family, bytes);
}

} // namespace

BOOST_AUTO_TEST_SUITE(network_policy_suite)

BOOST_AUTO_TEST_CASE(a_policy_reads_into_one_canonical_text) {
  auto p = parse(R"({"allow_domains":["B.example.", "*.Example.com", "b.example"],
                     "allow_cidrs":["10.1.2.3/8", "192.0.2.7"], "deny_cidrs":["fd00::1/8"],
                     "allow_ports":[443, 80, 443], "dns":"boxd"})");
  BOOST_REQUIRE(p);
  BOOST_TEST(encode_network_policy(*p)
             == R"({"allow_domains":["*.example.com","b.example"],"allow_cidrs":["10.0.0.0/8","192.0.2.7/32"],)"
                R"("deny_cidrs":["fd00::/8"],"allow_ports":[80,443],"dns":"boxd"})");
  // Its own text reads back to the same policy.
  auto again = parse(encode_network_policy(*p));
  BOOST_REQUIRE(again);
  BOOST_TEST((*again == *p));
  // Left out: ports 80 and 443, nothing else.
  auto empty = parse("{}");
  BOOST_REQUIRE(empty);
  BOOST_TEST(empty->allow_ports == (std::vector<int32_t>{80, 443}));
  BOOST_TEST(empty->allow_domains.empty());
}

BOOST_AUTO_TEST_CASE(bad_values_name_their_place) {
  struct bad_case {
    const char* text;
    const char* says;
  } cases[] = {
    {R"([])", "policy: must be an object"},
    {R"({"allow_domain":[]})", "policy.allow_domain: is not a network policy key"},
    {R"({"allow_domains":"a.com"})", "policy.allow_domains: must be a list of strings"},
    {R"({"allow_domains":["a.com", 7]})", "policy.allow_domains[1]: must be a string"},
    {R"({"allow_domains":["ex ample.com"]})", "policy.allow_domains[0]: must be a DNS name or *.suffix"},
    {R"({"allow_domains":["*"]})", "policy.allow_domains[0]: must be a DNS name"},
    {R"({"allow_domains":["a..com"]})", "policy.allow_domains[0]: must be a DNS name"},
    {R"({"allow_cidrs":["10.0.0.0/33"]})", "policy.allow_cidrs[0]: must be an IPv4 or IPv6 address or CIDR"},
    {R"({"deny_cidrs":["example.com"]})", "policy.deny_cidrs[0]: must be an IPv4 or IPv6 address or CIDR"},
    {R"({"allow_ports":[0]})", "policy.allow_ports[0]: must be an integer between 1 and 65535"},
    {R"({"allow_ports":[80.0]})", "policy.allow_ports[0]: must be an integer between 1 and 65535"},
    {R"({"allow_ports":[53]})", "policy.allow_ports[0]: 53 is DNS"},
    {R"({"dns":"8.8.8.8"})", "policy.dns: must be \"boxd\""},
  };
  for (const auto& c : cases) {
    auto p = parse(c.text);
    BOOST_REQUIRE_MESSAGE(!p, c.text);
    BOOST_TEST((p.error().code == ec::validation));
    BOOST_TEST(p.error().message.starts_with(c.says), c.text << " -> " << p.error().message);
  }
  // Bounded: at most 256 names.
  std::string many = R"({"allow_domains":[)";
  for (int i = 0; i < 257; ++i)
    many += (i ? ",\"" : "\"") + std::string{"n"} + std::to_string(i) + ".test\"";
  auto p = parse(many + "]}");
  BOOST_REQUIRE(!p);
  BOOST_TEST(p.error().message == "policy.allow_domains: may hold at most 256 entries");
}

BOOST_AUTO_TEST_CASE(names_match_exactly_or_strictly_below_a_wildcard) {
  auto p = parse(R"({"allow_domains":["pypi.org", "*.pythonhosted.org"]})");
  BOOST_REQUIRE(p);
  BOOST_TEST(domain_allowed(*p, "pypi.org"));
  BOOST_TEST(!domain_allowed(*p, "evil-pypi.org"));
  BOOST_TEST(!domain_allowed(*p, "x.pypi.org"));
  BOOST_TEST(domain_allowed(*p, "files.pythonhosted.org"));
  BOOST_TEST(domain_allowed(*p, "a.b.pythonhosted.org"));
  BOOST_TEST(!domain_allowed(*p, "pythonhosted.org"));
  BOOST_TEST(!domain_allowed(*p, "evilpythonhosted.org"));
  BOOST_TEST(normalize_dns_name("PyPI.Org.").value() == "pypi.org");
  BOOST_TEST(!normalize_dns_name("a b"));
  BOOST_TEST(!normalize_dns_name(std::string(64, 'a') + ".org"));
  BOOST_TEST(!normalize_dns_name("10.0.0.1/x"));
}

BOOST_AUTO_TEST_CASE(ranges_inside_others_are_left_out) {
  BOOST_TEST(without_covered({"10.1.0.0/16", "10.0.0.0/8", "192.0.2.1", "10.1.2.3", "fd00::/8", "fd00::1", "bad"})
             == (std::vector<std::string>{"10.0.0.0/8", "192.0.2.1/32", "fd00::/8"}));
  auto p = parse(R"({"allow_cidrs":["10.1.0.0/16", "10.0.0.0/8"]})");
  BOOST_REQUIRE(p);
  BOOST_TEST(p->allow_cidrs == (std::vector<std::string>{"10.0.0.0/8"}));
}

BOOST_AUTO_TEST_CASE(ranges_contain_their_addresses) {
  BOOST_TEST(contains("10.0.0.0/8", "10.200.1.1"));
  BOOST_TEST(!contains("10.0.0.0/8", "11.0.0.1"));
  BOOST_TEST(contains("169.254.0.0/16", "169.254.169.254"));
  BOOST_TEST(contains("192.0.2.7", "192.0.2.7"));
  BOOST_TEST(!contains("192.0.2.7", "192.0.2.8"));
  BOOST_TEST(contains("0.0.0.0/0", "203.0.113.9"));
  BOOST_TEST(contains("fd00::/8", "fd12::1"));
  BOOST_TEST(!contains("fd00::/8", "10.0.0.1"));
  BOOST_TEST(contains("10.0.0.0/9", "10.127.255.255"));
  BOOST_TEST(!contains("10.0.0.0/9", "10.128.0.0"));
}

BOOST_AUTO_TEST_SUITE_END()
