// A workspace's egress policy (docs/network.md): where a network-on sandbox may go.
// `allow_domains` are names the sandbox may resolve and reach on `allow_ports` (exact
// names, or `*.suffix` for every name below suffix); `allow_cidrs` are addresses it may
// reach directly by TCP on any port, `deny_cidrs` addresses it never reaches (before
// anything else). DNS goes only to boxd's resolver (`dns` "boxd", the one value).
// The JSON text is canonical: names lower case without a trailing dot, CIDRs with
// their host bits cleared, every list sorted and without duplicates, so two policies
// compare by their text.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <simdjson.h>

#include "messages/error.hpp"

namespace boxrt {

/// An address range: IPv4 (family 4, the first 4 bytes) or IPv6 (family 6).
struct cidr {
  int family = 4;
  std::array<uint8_t, 16> bytes{};
  int prefix = 32;

  /// "10.0.0.0/8", "192.0.2.7" (a /32), "fd00::/8". nullopt when it is not one.
  static std::optional<cidr> parse(std::string_view text);
  /// The canonical text (host bits cleared).
  std::string text() const;
  /// True when `address` (4 or 16 bytes, in network order) lies in the range.
  bool contains(int family, const uint8_t* address) const;

  friend bool operator==(const cidr&, const cidr&) = default;
};

struct network_policy {
  std::vector<std::string> allow_domains;
  std::vector<std::string> allow_cidrs;
  std::vector<std::string> deny_cidrs;
  std::vector<int32_t> allow_ports{80, 443};
  std::string dns = "boxd";
  /// The operator's profile this policy came from (box.network_profiles), "" = none.
  std::string profile;

  friend bool operator==(const network_policy&, const network_policy&) = default;
};

/// `cidrs` (texts cidr::parse reads; others are dropped) as canonical texts, without
/// those another entry covers: nftables refuses overlapping intervals in one set.
std::vector<std::string> without_covered(const std::vector<std::string>& cidrs);

/// Limits on one policy: what a host may push, and what boxd keeps per workspace.
inline constexpr size_t max_policy_domains = 256;
inline constexpr size_t max_policy_cidrs = 256;
inline constexpr size_t max_policy_ports = 64;

/// Reads a policy object strictly (unknown keys, bad names, CIDRs or ports are
/// errors naming `path`, e.g. "box.network_policy.allow_domains[2]: ..."). Class
/// `code` for every error.
result<network_policy> decode_network_policy(const simdjson::dom::element& v, std::string_view path,
                                             ec code = ec::validation);
/// Parses `text` (JSON) as decode_network_policy does.
result<network_policy> parse_network_policy(std::string_view text, std::string_view path,
                                            ec code = ec::validation);

/// The canonical JSON text of `p`.
std::string encode_network_policy(const network_policy& p);

/// `name` lower case without its trailing dot when it is a valid DNS name (letters,
/// digits, '-', '_', labels of 1..63 bytes, at most 253 bytes), else nullopt.
std::optional<std::string> normalize_dns_name(std::string_view name);

/// True when `name` (normalized) is one of `p.allow_domains`: equal to an exact entry,
/// or strictly below a `*.suffix` entry's suffix.
bool domain_allowed(const network_policy& p, std::string_view name);

} // namespace boxrt
