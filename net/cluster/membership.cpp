#include "net/cluster/membership.hpp"

namespace boxrt::net::cluster {

namespace {

using clock_type = std::chrono::steady_clock;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch()).count();
}

} // namespace

membership::membership(options o) : opts_(std::move(o)) {
  // A single call must never outlast the time the lease can vouch for.
  opts_.etcd.timeout = std::min(opts_.etcd.timeout, opts_.lease / 3);
}

membership::~membership() {
  {
    std::lock_guard lock{mtx_};
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable())
    thread_.join();
  valid_until_ = 0;
  if (auto lease = lease_.exchange(0); lease != 0) {
    etcd::client c{opts_.etcd};
    (void)c.revoke(lease);
  }
}

void membership::start() {
  thread_ = std::thread{[this] { run(); }};
}

bool membership::serving() const {
  return now_ns() < valid_until_.load();
}

std::string membership::reason() const {
  if (serving())
    return {};
  std::lock_guard lock{mtx_};
  return reason_.empty() ? std::string{"its etcd lease could not be renewed in time"} : reason_;
}

void membership::set_reason(std::string why) {
  {
    std::lock_guard lock{mtx_};
    reason_ = std::move(why);
  }
  cv_.notify_all();
}

bool membership::wait_serving(bool want, std::chrono::milliseconds timeout) const {
  auto end = clock_type::now() + timeout;
  std::unique_lock lock{mtx_};
  for (;;) {
    if (serving() == want)
      return true;
    auto now = clock_type::now();
    if (now >= end)
      return false;
    // Serving ends at the deadline without any event: wake there at the latest.
    auto wake = end;
    if (auto until = valid_until_.load(); serving() && want == false)
      wake = std::min(end, clock_type::time_point{std::chrono::nanoseconds{until}});
    cv_.wait_until(lock, wake);
  }
}

std::string membership::register_self(etcd::client& c) {
  auto lease = c.grant(opts_.lease);
  if (!lease)
    return lease.error().message;
  auto created = c.create(key(), opts_.address, *lease);
  if (!created) {
    (void)c.revoke(*lease);
    return created.error().message;
  }
  if (!created->created) {
    (void)c.revoke(*lease);
    return "node_id " + opts_.node_id + " is registered by another process (lease "
           + std::to_string(created->existing ? created->existing->lease : 0) + ")";
  }
  lease_ = *lease;
  return {};
}

void membership::run() {
  etcd::client c{opts_.etcd};
  const auto period = opts_.lease / 3;
  const auto proven = std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.lease * 2 / 3).count();
  for (;;) {
    auto sent = now_ns();
    std::string why;
    if (lease_ == 0) {
      why = register_self(c);
    } else {
      auto ttl = c.keep_alive(lease_);
      if (!ttl)
        why = ttl.error().message;
      else if (ttl->count() == 0) {
        // Expired at etcd (a pause, a partition): register again under a new lease.
        lease_ = 0;
        why = "its etcd lease expired";
      }
    }
    if (why.empty()) {
      valid_until_ = sent + proven;
      set_reason({});
    } else {
      set_reason(why);
    }
    std::unique_lock lock{mtx_};
    if (cv_.wait_for(lock, lease_ == 0 && !why.empty() ? period / 2 : period, [&] { return stop_; }))
      return;
  }
}

} // namespace boxrt::net::cluster
