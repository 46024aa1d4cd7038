// The network of a sandbox with `network: "on"` (contract §4.7): its own network
// namespace (never the host's), outbound connectivity through a user-mode stack
// (slirp4netns from Debian, host loopback disabled, sandboxed, under its own seccomp
// filter) and an nftables rule set boxd installs in that namespace before the first
// command, refusing the host's own addresses, 169.254.0.0/16 and the stack's gateway to
// the host. The stack exits with the sandbox, or with boxd (its exit descriptor).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "backends/linux/helper.hpp"
#include "messages/error.hpp"

namespace boxrt {

namespace egress {
class attachment;
}

/// What the sandbox sees as its resolver: slirp4netns' DNS forwarder, which asks the
/// resolvers of the host's own /etc/resolv.conf.
inline constexpr const char* sandbox_resolv_conf = "nameserver 10.0.2.3\n";

/// Destinations a network-on sandbox must never reach: every address of boxd's host
/// (its network namespace), its default gateways (the real host when boxd runs in a
/// container), 169.254.0.0/16 and the other cloud metadata addresses, fe80::/10, the
/// stack's gateway to the host (10.0.2.2) and `listen_host` when it is not loopback.
/// Taken when a sandbox starts: addresses the host gains later are not in its rules.
struct refused_destinations {
  std::vector<std::string> v4;
  std::vector<std::string> v6;
};
refused_destinations destinations_to_refuse(const std::string& listen_host);

/// The nftables rule set that refuses `refused` (output hook, reject).
std::string nft_rules(const refused_destinations& refused);

class netstack {
 public:
  /// Attaches a stack to the network namespace `netns` (a descriptor of it): installs
  /// the rules first (no packet leaves before they hold), then starts slirp4netns and
  /// waits until it has configured the namespace's interface. Both tools reach the
  /// namespace through that descriptor, never by a pid. `scratch_dir` is a folder of
  /// boxd's own for the rule file. Blocking (tens of milliseconds).
  /// The rules are the egress service's (backends/linux/egress.hpp): the sandbox
  /// belongs to the workspace `scope` (ws-<24 hex>), whose policy they enforce.
  static result<std::unique_ptr<netstack>> attach(int netns, const refused_destinations& refused,
                                                  const std::string& scratch_dir, const std::string& scope);

  /// The stack's host process.
  pid_t pid() const { return helper_->pid(); }

  /// Stops the stack (SIGKILL, reaped). Also done by the destructor.
  void stop() { helper_->stop(); }

  ~netstack();

 private:
  netstack() = default;
  std::unique_ptr<egress::attachment> egress_;  // closes after the stack
  std::unique_ptr<helper_process> helper_;
  unique_fd exit_fd_; // slirp4netns exits when this closes
};

} // namespace boxrt
