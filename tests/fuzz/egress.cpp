// What the egress filter and resolver read from a sandbox (backends/linux/egress_parse.cpp)
// and the policy JSON a host sends (messages/network_policy.cpp). The first byte chooses:
// 0 the first bytes of a connection (TLS ClientHello SNI or HTTP Host), 1 a DNS query
// and the refusal built from it, 2 a policy, whose canonical text must read back the same.
#include "fuzz_common.hpp"
#include "backends/linux/egress_parse.hpp"
#include "messages/network_policy.hpp"

using namespace boxrt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  auto text = fuzz::as_text(data + 1, size - 1);
  switch (data[0] % 3) {
    case 0: {
      auto r = egress::peek_name(text);
      if (r.status == egress::peek_status::name)
        fuzz::require(r.name.size() <= text.size(), "a name is part of what was read");
      if (auto n = normalize_dns_name(r.name))
        fuzz::require(normalize_dns_name(*n) == n, "a normalized name stays as it is");
      break;
    }
    case 1: {
      auto q = egress::parse_dns_query(text);
      if (!q)
        break;
      fuzz::require(q->end <= text.size() && q->end >= 17, "the question lies inside the query");
      auto reply = egress::dns_reply(text, q->end, 3);
      fuzz::require(reply.size() == q->end, "a refusal is the header and the question");
      fuzz::require((static_cast<uint8_t>(reply[3]) & 0x0F) == 3, "the refusal carries its rcode");
      break;
    }
    case 2: {
      auto p = parse_network_policy(text, "policy");
      if (!p)
        break;
      auto canonical = encode_network_policy(*p);
      auto again = parse_network_policy(canonical, "policy");
      fuzz::require(again && encode_network_policy(*again) == canonical, "a policy's text reads back the same");
      break;
    }
  }
  return 0;
}
