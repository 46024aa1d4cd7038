// What the egress filter and resolver read of a sandbox's bytes
// (backends/linux/egress_parse.hpp), and the rule sets boxd installs
// (backends/linux/egress.hpp). The enforcement itself is tested on real sandboxes in
// tests/wire/network_test.cpp.
#include <boost/test/unit_test.hpp>

#include <string>

#include "backends/linux/egress.hpp"
#include "backends/linux/egress_parse.hpp"

using namespace boxrt;
using namespace boxrt::egress;

namespace {

std::string u16(size_t n) { return {static_cast<char>(n >> 8), static_cast<char>(n & 0xFF)}; }
std::string u24(size_t n) { return std::string{static_cast<char>(n >> 16)} + u16(n & 0xFFFF); }

/// A ClientHello record carrying `sni` (none when empty).
std::string client_hello(const std::string& sni) {
  std::string ext;
  if (!sni.empty()) {
    std::string entry = std::string{'\0'} + u16(sni.size()) + sni;
    std::string list = u16(entry.size()) + entry;
    ext = u16(0) + u16(list.size()) + list;
  }
  ext = u16(10) + u16(4) + u16(2) + u16(0x001d) + ext;  // supported_groups first
  std::string hello = u16(0x0303) + std::string(32, 'r') + std::string{'\0'} + u16(2) + u16(0x1301)
                      + std::string{'\1', '\0'} + u16(ext.size()) + ext;
  std::string handshake = std::string{'\1'} + u24(hello.size()) + hello;
  return std::string{'\x16', '\x03', '\x01'} + u16(handshake.size()) + handshake;
}

} // namespace

BOOST_AUTO_TEST_SUITE(egress_suite)

BOOST_AUTO_TEST_CASE(the_name_of_a_tls_connection_is_its_sni) {
  auto hello = client_hello("pypi.org");
  auto r = peek_name(hello);
  BOOST_TEST((r.status == peek_status::name));
  BOOST_TEST(r.tls);
  BOOST_TEST(r.name == "pypi.org");
  // Every shorter prefix asks for more, never reads past its end.
  for (size_t n = 1; n < hello.size(); ++n)
    BOOST_TEST((peek_name(std::string_view{hello}.substr(0, n)).status == peek_status::need_more), n);
  BOOST_TEST((peek_name(client_hello("")).status == peek_status::no_name));
  // A record length past TLS's maximum is not TLS.
  BOOST_TEST((peek_name(std::string{"\x16\x03\x01\x7f\xff", 5}).status == peek_status::not_http));
}

BOOST_AUTO_TEST_CASE(the_name_of_an_http_request_is_its_host) {
  auto r = peek_name("GET / HTTP/1.1\r\nUser-Agent: x\r\nhOsT:  example.org:8080 \r\n\r\n");
  BOOST_TEST((r.status == peek_status::name));
  BOOST_TEST(!r.tls);
  BOOST_TEST(r.name == "example.org");
  BOOST_TEST((peek_name("GET / HTTP/1.1\r\nHost: a").status == peek_status::need_more));
  BOOST_TEST((peek_name("GET / HTTP/1.0\r\n\r\n").status == peek_status::no_name));
  BOOST_TEST((peek_name("GET / HTTP/1.1\r\nHost: [::1]\r\n\r\n").name == "[::1]"));
  BOOST_TEST((peek_name("\x01\x02junk").status == peek_status::not_http));
  BOOST_TEST((peek_name("SSH-2.0-OpenSSH\r\n").status == peek_status::not_http));
  // A head that never ends is no name once the filter's bound is reached.
  BOOST_TEST((peek_name("GET / HTTP/1.1\r\nX: " + std::string(max_peek_bytes, 'a')).status == peek_status::no_name));
}

BOOST_AUTO_TEST_CASE(a_dns_query_gives_its_question_and_refusals_keep_it) {
  std::string q = u16(0xBEEF) + u16(0x0100) + u16(1) + u16(0) + u16(0) + u16(1)
                  + std::string{"\x06" "Denied" "\x04" "test" "\x00", 13} + u16(1) + u16(1)
                  + std::string(11, '\0');  // an OPT record the reply drops
  auto question = parse_dns_query(q);
  BOOST_REQUIRE(question);
  BOOST_TEST(question->name == "Denied.test");
  BOOST_TEST(question->type == 1);
  BOOST_TEST(question->end == 12u + 13u + 4u);
  auto nx = dns_reply(q, question->end, 3);
  BOOST_TEST(nx.size() == question->end);
  BOOST_TEST(nx.substr(0, 2) == u16(0xBEEF));
  BOOST_TEST((static_cast<uint8_t>(nx[2]) & 0x81) == 0x81);  // a reply, RD kept
  BOOST_TEST((static_cast<uint8_t>(nx[3]) & 0x0F) == 3);
  BOOST_TEST(nx.substr(6, 6) == std::string(6, '\0'));
  // Not one query with one question: nothing.
  BOOST_TEST(!parse_dns_query(q.substr(0, 20)));
  auto reply = q;
  reply[2] = static_cast<char>(0x81);
  BOOST_TEST(!parse_dns_query(reply));
  // The name checked is the name asked: a dot inside a label is no name.
  auto dotted = q;
  dotted[13 + 2] = '.';
  BOOST_TEST(!parse_dns_query(dotted));
  auto pointer = q;
  pointer[12] = static_cast<char>(0xC0);
  BOOST_TEST(!parse_dns_query(pointer));
}

BOOST_AUTO_TEST_CASE(rules_deny_by_default_under_a_policy_and_stay_as_before_without_one) {
  refused_destinations refused{{"10.0.2.2", "169.254.0.0/16", "10.203.0.2"}, {"fe80::/10"}};
  auto today = rules_for(refused, std::nullopt);
  BOOST_TEST(today.find("redirect") == std::string::npos);
  BOOST_TEST(today.find("ip daddr { 10.0.2.2/32, 169.254.0.0/16, 10.203.0.2/32 } reject") != std::string::npos);
  // A host address inside a refused range is left to the range: nftables refuses
  // overlapping intervals in one set.
  refused.v4.push_back("169.254.20.10");
  BOOST_TEST(rules_for(refused, std::nullopt).find("169.254.20.10") == std::string::npos);
  network_policy p;
  p.allow_domains = {"allowed.test"};
  p.allow_cidrs = {"192.0.2.0/24"};
  p.deny_cidrs = {"192.0.2.9/32"};
  auto rules = rules_for(refused, p);
  // Replaced in one transaction, whatever was there.
  BOOST_TEST(rules.starts_with("add table inet boxrt\ndelete table inet boxrt\n"));
  BOOST_TEST(rules.find("udp dport 53 redirect to :53") != std::string::npos);
  BOOST_TEST(rules.find("ip daddr { 192.0.2.9/32 } meta l4proto tcp redirect to :1001") != std::string::npos);
  BOOST_TEST(rules.find("ip daddr { 192.0.2.0/24 } return") != std::string::npos);
  BOOST_TEST(rules.find("meta nfproto ipv4 meta l4proto tcp redirect to :1001") != std::string::npos);
  // The host's own addresses are refused before anything is steered.
  BOOST_TEST(rules.find("priority -200") < rules.find("redirect"));
  // What is left is refused at once: a reset for TCP, an ICMP error for the rest.
  BOOST_TEST(rules.find("meta l4proto tcp reject with tcp reset\n    reject\n") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
