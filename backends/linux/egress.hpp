// Egress policy enforcement for network-on sandboxes (docs/network.md "Egress policy").
//
// One service per boxd, shared by every sandbox: a thread running Boost.Asio that holds,
// for each network-on sandbox, two sockets made inside the sandbox's own network
// namespace (a DNS socket on 127.0.0.1:53 and the filter's TCP listener on
// 127.0.0.1:1001), so the listening socket itself tells which sandbox a lookup or a
// connection comes from. When a policy applies, the nftables rule set boxd installs in
// that namespace before the first command sends every DNS query to the first socket and
// every TCP connection (but to the policy's allow_cidrs) to the second, and refuses the
// rest (UDP, IPv6, the host's own addresses). The resolver answers listed names from
// the upstream resolvers and NXDOMAIN for the rest; the filter reads the TLS SNI or the
// HTTP Host, checks it against the policy, resolves it itself and connects to that name
// from boxd's namespace, refusing addresses of boxd's host, loopback, link-local and
// deny_cidrs (DNS rebinding). Without a policy the namespace keeps the rules it always
// had (refuse the host's addresses, link-local and the stack's gateway) and the sockets
// stay idle.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backends/linux/netstack.hpp"
#include "messages/error.hpp"
#include "messages/models.hpp"
#include "messages/network_policy.hpp"

namespace boxrt::egress {

/// One refused connection, for the audit log. Never a lookup (those are counted only).
struct denial {
  std::string scope;    // the workspace's ws-<24 hex>
  std::string name;     // what it asked for ("" when it named nothing)
  std::string address;  // the address it connected to
  int port = 0;
  std::string reason;   // domain, port, no_name, deny_cidr, address, resolve, limit
};

/// Ports inside the sandbox's namespace (on its loopback) where boxd's sockets listen.
inline constexpr int resolver_port = 53;
inline constexpr int filter_port = 1001;

class attachment;

class service {
 public:
  /// The one service of this process (its thread starts with the first attachment).
  static service& global();

  /// The operator's settings (box.network_*: messages/models.hpp network_settings):
  /// the default policy, the resolvers and the limits. A changed default is applied to
  /// the running sandboxes that follow it before this returns (an nft run each:
  /// blocking).
  void configure(const network_settings& settings);
  /// Called on the service's thread for each refused connection.
  void set_observer(std::function<void(const denial&)> fn);

  /// Sets (or with nullopt clears, back to the operator's default) the workspace
  /// `scope`'s own policy and applies the result to each of its running sandboxes;
  /// returns once their rules are in force. Blocking (an nft run per sandbox).
  box_error set_policy(const std::string& scope, std::optional<network_policy> p);

  /// A network-on sandbox of `scope` whose namespace is `netns`: makes the two sockets
  /// in it and installs the rule set for the policy in force, before anything of the
  /// sandbox runs. `scratch_dir` is a folder of boxd's own for the rule file. Blocking.
  result<std::unique_ptr<attachment>> attach(const std::string& scope, int netns,
                                             const refused_destinations& refused,
                                             const std::string& scratch_dir);

  struct impl;

 private:
  service();
  std::shared_ptr<impl> impl_;
};

/// A sandbox's place in the service; detaches (closing its sockets and connections)
/// when destroyed.
class attachment {
 public:
  ~attachment();
  attachment(const attachment&) = delete;
  attachment& operator=(const attachment&) = delete;

  struct state;
  explicit attachment(std::shared_ptr<state> s) : state_(std::move(s)) {}

 private:
  std::shared_ptr<state> state_;
};

/// The nftables rule set of a network-on sandbox: `policy` nullopt gives today's
/// rules (refuse `refused`), otherwise the default-deny set described above.
std::string rules_for(const refused_destinations& refused, const std::optional<network_policy>& policy);

}  // namespace boxrt::egress
