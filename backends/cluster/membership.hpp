// A node's membership of the cluster (docs/cluster.md "Membership", "Failing closed"): its
// key `<prefix>/members/<node_id>` = address, bound to an etcd lease of its own that a
// thread renews every lease/3. The node serves only while it can prove its lease is
// alive: serving() is true until 2/3 of the lease after the last renewal that etcd
// answered was *sent*, by this process's monotonic clock. etcd counts from when it
// received that renewal, later, so the node stops before etcd can expire the lease and
// let another node take over. The clock is CLOCK_BOOTTIME, which keeps counting through a
// suspend. A paused process that resumes finds serving() false at once: no timer has to
// fire first. A lease etcd reports gone, or a member key deleted or taken by another
// lease (checked every third renewal), stops serving at once; the node then registers
// again under a new lease. The key's value is {"address": HOST:PORT}.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "backends/state/kv_store.hpp"

namespace boxrt::cluster {

/// A member key's value for `address`, and the address in such a value ("" if none).
std::string member_value(const std::string& address);
std::string member_address(const std::string& value);

class membership {
 public:
  struct options {
    kv::connector store;
    std::string prefix;   // "/boxrt/c1"
    std::string node_id;  // "n1"
    std::string address;  // the advertised HOST:PORT
    std::chrono::milliseconds lease{3000};
    /// Runs on the renewing thread after each change of the proven deadline
    /// (CLOCK_BOOTTIME ns), with 0 when the lease is found lost early (the watchdog's page).
    std::function<void(int64_t)> on_deadline;
  };

  explicit membership(options o);
  /// Stops renewing and revokes the lease (best effort): the key goes at once.
  ~membership();
  membership(const membership&) = delete;
  membership& operator=(const membership&) = delete;

  /// Starts the renewing thread (once); the first registration happens there.
  void start();

  /// True while the lease is proven alive (see above). Cheap, any thread.
  bool serving() const;
  /// Why the node is not serving ("" while it is).
  std::string reason() const;
  /// The current lease (0 = none).
  int64_t lease_id() const { return lease_.load(); }
  /// The member key's path.
  std::string key() const { return opts_.prefix + "/members/" + opts_.node_id; }

  /// Waits until serving() is `want`, at most `timeout` (checked at each renewal and at
  /// the deadline); false on the timeout.
  bool wait_serving(bool want, std::chrono::milliseconds timeout) const;

 private:
  void run();
  /// A client of the store whose calls fit in a third of the lease.
  std::unique_ptr<kv::store> client() const;
  /// Grants a lease and creates the member key under it. "" on success, else why.
  std::string register_self(kv::store& c);
  /// "" while the member key is still this node's, else why not (the lease is given up).
  std::string check_key(kv::store& c);
  void set_reason(std::string why);
  void fail_closed(std::string why);

  options opts_;
  std::atomic<int64_t> lease_{0};
  /// CLOCK_BOOTTIME nanoseconds until which the lease is proven (0 = never).
  std::atomic<int64_t> valid_until_{0};
  mutable std::mutex mtx_;
  mutable std::condition_variable cv_;
  std::string reason_ = "not registered yet";
  bool stop_ = false;
  std::thread thread_;
};

} // namespace boxrt::cluster
