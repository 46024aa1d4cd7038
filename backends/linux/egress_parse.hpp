// What the egress filter reads of a sandbox's first bytes (docs/network.md): the name a
// TLS ClientHello asks for (SNI) or an HTTP request's Host, and the question of a DNS
// query. Pure functions over untrusted bytes: every length is checked against what is
// there, nothing is read past `data`'s end.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace boxrt::egress {

/// What the first bytes of a connection tell.
enum class peek_status {
  need_more,  // not enough bytes yet to decide
  name,       // a name was found
  no_name,    // a whole ClientHello without SNI, or a request head without Host
  not_http,   // neither TLS nor an HTTP request
};

struct peek_result {
  peek_status status = peek_status::need_more;
  std::string name;  // raw (not yet normalized)
  bool tls = false;
};

/// The largest first flight the filter reads before it decides (a ClientHello record,
/// or an HTTP request head).
inline constexpr size_t max_peek_bytes = 16 * 1024 + 5;

/// Reads the name a connection asks for from its first bytes.
peek_result peek_name(std::string_view data);

/// A DNS query's question: its name (as written, without the trailing dot), type and
/// where the question section ends. nullopt when `query` is not one query with one
/// question.
struct dns_question {
  std::string name;
  uint16_t type = 0;
  size_t end = 0;
};
std::optional<dns_question> parse_dns_query(std::string_view query);

/// The answer to `query` (whose question ends at `question_end`) with `rcode` and no
/// records: NXDOMAIN (3), REFUSED (5), SERVFAIL (2), FORMERR (1).
std::string dns_reply(std::string_view query, size_t question_end, int rcode);

}  // namespace boxrt::egress
