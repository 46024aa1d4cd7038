// The admission store of a cluster node (docs/cluster.md "What is stored where"): each
// workspace's record (snapshot, revisions, grant, tombstone, fence generation) in etcd at
// `<prefix>/admission/<hex of the record key>`, a quorum write before the reply that
// acknowledges it. Every write is fenced by the writer's ownership of the workspace: it
// lands only while the workspace's owner key still has the epoch the writer holds, so a
// node that lost the workspace (paused, partitioned, replaced) writes nothing.
#pragma once

#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "backends/state/admission_store.hpp"
#include "backends/state/kv_store.hpp"

namespace boxrt::cluster {

/// What fences a write of one record: the workspace's owner key and the epoch this node
/// holds it by.
struct fence {
  std::string owner_key;
  int64_t epoch = 0;
};

class etcd_admission_store final : public admission_store {
 public:
  /// `fence_of(record key)`: this node's fence for the record's workspace, nullopt when it
  /// does not own it (then put refuses).
  etcd_admission_store(const kv::connector& store, std::string prefix,
                       std::function<std::optional<fence>(const std::string&)> fence_of);

  result<std::optional<std::string>> get(const std::string& key) override;
  box_error put(const std::string& key, const std::string& state) override;

  /// Where a record lives in etcd.
  std::string record_key(const std::string& key) const;

 private:
  std::mutex mtx_; // the client is not thread-safe; supervisors call from many threads
  std::unique_ptr<kv::store> client_;
  std::string prefix_;
  std::function<std::optional<fence>(const std::string&)> fence_of_;
};

} // namespace boxrt::cluster
