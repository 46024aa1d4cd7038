// Workspace ownership in the cluster (docs/cluster.md "Ownership and fencing"): at most one
// owner per workspace namespace, the key `<prefix>/owners/<ns>` = {"node_id", "address"},
// created only if absent and bound to the owner's lease, so it goes when the owner's lease
// does. The key's create revision is the ownership epoch: a takeover creates the key
// again, with a higher one, and writes fenced by an older epoch fail (kv::store::
// put_fenced). The preferred owner is chosen by rendezvous hashing over the members.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/state/kv_store.hpp"

namespace boxrt::cluster {

/// The member of `members` that prefers `ns` most (highest sha256 of ns and node id):
/// every node computes the same answer from the same members, and losing a member moves
/// only the workspaces it preferred. "" when `members` is empty.
std::string preferred_owner(std::string_view ns, const std::vector<std::string>& members);

struct owner {
  std::string node_id;
  std::string address;
  /// The owner key's create revision, >= 1.
  int64_t epoch = 0;
  /// The lease the key is bound to.
  int64_t lease = 0;
};

class ownership {
 public:
  ownership(const kv::connector& store, std::string prefix);

  /// The key a workspace's owner holds.
  std::string owner_key(std::string_view ns) const { return prefix_ + "/owners/" + std::string{ns}; }

  /// Who owns `ns` now (nullopt: nobody).
  result<std::optional<owner>> owner_of(std::string_view ns);

  /// Claims `ns` for `node_id` under its `lease` when nobody owns it. Returns the owner
  /// after the call: this node with a new epoch, or whoever held it already. A key of this
  /// node under another lease (an earlier one that has not ended yet) is no ownership:
  /// that key goes with its lease, so the claim fails until it has.
  result<owner> claim(std::string_view ns, const std::string& node_id, const std::string& address, int64_t lease);

  /// Registered members (node_id -> address): those whose lease is alive.
  result<std::map<std::string, std::string>> members();

 private:
  std::unique_ptr<kv::store> client_;
  std::string prefix_;
};

} // namespace boxrt::cluster
