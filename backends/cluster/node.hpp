// What one cluster node knows, shared between its threads (docs/cluster.md): its
// membership (the lease it serves by), the workspaces it owns and by which epoch, the
// members it links to, and the links it refused. The router actor, the admission store,
// the uid allocator, the trusted-instance pin and the HTTP endpoints all read and write
// here; nothing of it needs CAF.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cluster/membership.hpp"
#include "backends/cluster/ownership.hpp"
#include "backends/state/etcd_admission_store.hpp"
#include "backends/state/kv_store.hpp"

namespace boxrt::cluster {

struct node_options {
  std::string node_id;
  /// HOST:PORT other nodes reach this one at.
  std::string address;
  kv::connector store;
  std::string prefix;
  std::chrono::milliseconds lease{3000};
  std::chrono::milliseconds takeover_wait{5000};
};

/// One member as this node sees it (GET /cluster).
struct member_view {
  std::string node_id;
  std::string address;
  /// Registered under a live lease and linked by a verified hello.
  bool alive = false;
  bool self = false;
  /// Why the last link attempt failed ("" when none did).
  std::string link_error;
};

/// A link this node refused (its hello named no registered member at that address).
struct refusal {
  std::string node_id;
  std::string address;
  std::string reason;
};

class node {
 public:
  explicit node(node_options o);

  const node_options& options() const { return opts_; }
  const std::string& id() const { return opts_.node_id; }

  /// Registers and starts renewing. `on_deadline(ns)` runs after every change of the
  /// proven deadline (CLOCK_BOOTTIME ns; 0 when the lease is found lost early).
  void start(std::function<void(int64_t)> on_deadline);
  /// Stops renewing and gives the lease up: every workspace this node owned is free.
  void stop();

  bool serving() const;
  /// Waits until serving() (at most `timeout`); false on the timeout.
  bool wait_serving(std::chrono::milliseconds timeout) const;
  std::string reason() const;
  int64_t lease() const;
  /// The text every refused request carries while the node is not serving.
  std::string not_serving_text() const;

  /// The epoch this node owns `ns` by under its current lease; nullopt otherwise.
  std::optional<int64_t> owned(const std::string& ns) const;
  void set_owned(const std::string& ns, int64_t epoch, int64_t lease);
  /// Forgets every owned workspace (the lease it was owned by ended).
  void forget_owned();
  /// For the admission store: the fence of a record key (instance NUL workspace).
  std::optional<fence> fence_of(const std::string& record_key) const;
  std::string owner_key(std::string_view ns) const { return opts_.prefix + "/owners/" + std::string{ns}; }

  /// The linker's view: registered members and which of them this node links to.
  void set_registered(std::map<std::string, std::string> members, bool etcd_up);
  void set_link(const std::string& node_id, bool alive, std::string error);
  std::vector<std::string> alive_peers() const;
  std::map<std::string, std::string> registered() const;
  void add_refusal(refusal r);

  /// GET /cluster, from local state only.
  std::string status_json() const;
  /// GET /cluster/owner (asks etcd; blocking, bounded by the etcd timeout).
  result<std::string> owner_json(const std::string& instance, const std::string& workspace) const;

  /// Reserves `uid` cluster-wide for `key` (a workspace's path, or "session:<sid>"):
  /// true when it is free or already `key`'s. No reservation lives under a lease: a
  /// session's stays until this node frees the uid (its tree gone), stored as
  /// "session:<node>:<sid>" since session ids repeat across nodes and runs; a
  /// workspace's stays for good. Sessions are reserved only while this node has a lease.
  /// 1 reserved, 0 held for another key, -1 cannot tell (etcd unreachable, no lease).
  int reserve_uid(uint32_t uid, const std::string& key, bool session);
  void release_uid(uint32_t uid, const std::string& key);
  /// At start, once the sandbox backend has freed what it could: erases this node's
  /// session reservations whose uid `held` (uid -> key, the local uid record) does not
  /// hold for that session (freed while etcd could not hear of it), and reserves again
  /// what `held` holds and etcd lacks (reservations of an older version lived under a
  /// lease). Best effort: what etcd refuses now is logged.
  void reconcile_uids(const std::map<uint32_t, std::string>& held);

  /// The cluster's trusted instance: pins `id` when none is (first pin wins); returns the
  /// pinned one, or an error when etcd cannot tell.
  result<std::string> pin_instance(std::string_view id);
  /// The pinned instance, "" when none, nullopt when etcd cannot tell (remembered once
  /// known).
  std::optional<std::string> pinned_instance();

  /// The box_init revision this node applied last (etcd mod revision of `<prefix>/box-init`).
  std::atomic<int64_t> init_revision{0};
  std::string init_key() const { return opts_.prefix + "/box-init"; }

 private:
  node_options opts_;
  std::unique_ptr<membership> membership_;
  mutable std::mutex mtx_;
  struct held {
    int64_t epoch = 0;
    int64_t lease = 0;
  };
  std::map<std::string, held> owned_;
  std::map<std::string, std::string> registered_;
  std::map<std::string, std::pair<bool, std::string>> links_;
  std::vector<refusal> refusals_;
  bool etcd_up_ = false;
  std::string pinned_;
};

} // namespace boxrt::cluster
