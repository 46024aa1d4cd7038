#include "backends/cluster/membership.hpp"

#include <time.h>

#include <simdjson.h>

#include "messages/base/json.hpp"

namespace boxrt::cluster {

namespace {

/// CLOCK_BOOTTIME: unlike the monotonic clock it keeps counting while the machine is
/// suspended, so a node that wakes after its lease is gone at etcd does not believe it
/// is still inside it.
int64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::string hex(int64_t v) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  auto u = static_cast<uint64_t>(v);
  do {
    out.insert(out.begin(), digits[u & 0xf]);
    u >>= 4;
  } while (u != 0);
  return out;
}

} // namespace

std::string member_value(const std::string& address) {
  json::writer w;
  w.begin_object().key("address").value(address).end_object();
  return w.take();
}

std::string member_address(const std::string& value) {
  simdjson::dom::parser parser;
  std::string_view address;
  if (parser.parse(value).get_object()["address"].get_string().get(address) != simdjson::SUCCESS)
    return {};
  return std::string{address};
}

membership::membership(options o) : opts_(std::move(o)) {}

std::unique_ptr<kv::store> membership::client() const {
  // A single call must never outlast the time the lease can vouch for.
  return opts_.store(opts_.lease / 3);
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
    (void)client()->revoke(lease);
  }
}

void membership::start() {
  if (!thread_.joinable())
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

void membership::fail_closed(std::string why) {
  valid_until_ = 0;
  if (opts_.on_deadline)
    opts_.on_deadline(0);
  set_reason(std::move(why));
}

bool membership::wait_serving(bool want, std::chrono::milliseconds timeout) const {
  using steady = std::chrono::steady_clock;
  auto end = steady::now() + timeout;
  std::unique_lock lock{mtx_};
  for (;;) {
    if (serving() == want)
      return true;
    auto now = steady::now();
    if (now >= end)
      return false;
    // Serving ends at the deadline without any event: wake there at the latest.
    auto wake = end;
    if (!want)
      wake = std::min(end, now + std::chrono::nanoseconds{std::max<int64_t>(0, valid_until_.load() - now_ns())});
    cv_.wait_until(lock, wake);
  }
}

std::string membership::register_self(kv::store& c) {
  auto refusal = [&](const kv::key_value& kv) {
    return "node_id " + opts_.node_id + " is registered by another process (" + member_address(kv.value)
           + ", lease " + (kv.lease == 0 ? std::string{"none: it never expires"} : hex(kv.lease))
           + "); retrying until that lease ends (at most " + std::to_string(opts_.lease.count()) + " ms)";
  };
  // Looked up first, so a node waiting for its previous run's lease to end does not grant
  // and revoke a lease at every try.
  auto existing = c.get(key());
  if (!existing)
    return existing.error().message;
  if (*existing)
    return refusal(**existing);
  auto lease = c.grant(opts_.lease);
  if (!lease)
    return lease.error().message;
  auto created = c.create(key(), member_value(opts_.address), *lease);
  if (!created) {
    (void)c.revoke(*lease);
    return created.error().message;
  }
  if (!created->created) {
    (void)c.revoke(*lease);
    return created->existing ? refusal(*created->existing) : "the member key changed during registration";
  }
  lease_ = *lease;
  return {};
}

std::string membership::check_key(kv::store& c) {
  auto kv = c.get(key());
  if (!kv)
    return kv.error().message;
  if (*kv && (*kv)->lease == lease_)
    return {};
  // Deleted, or taken by another lease (whoever can write the prefix can do this): this
  // node stops serving and gives up its lease, and with it every workspace it owned.
  auto lease = lease_.exchange(0);
  (void)c.revoke(lease);
  return *kv ? "the member key of " + opts_.node_id + " now belongs to another lease"
             : "the member key of " + opts_.node_id + " was deleted";
}

void membership::run() {
  using steady = std::chrono::steady_clock;
  auto store = client();
  auto& c = *store;
  const auto period = opts_.lease / 3;
  const auto retry = std::min<std::chrono::milliseconds>(period, std::chrono::milliseconds{150});
  const auto proven = std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.lease * 2 / 3).count();
  uint64_t renewals = 0;
  for (;;) {
    const auto started = steady::now();
    const auto sent = now_ns();
    std::string why;
    bool lost = false;
    if (lease_ == 0) {
      why = register_self(c);
    } else {
      auto ttl = c.keep_alive(lease_);
      if (!ttl) {
        why = ttl.error().message;
      } else if (ttl->count() == 0) {
        // Gone at etcd (expired during a pause, revoked): stop at once, register again.
        lease_ = 0;
        lost = true;
        why = "its etcd lease ended";
      } else if (++renewals % 3 == 0) {
        why = check_key(c);
        lost = !why.empty();
      }
    }
    if (why.empty()) {
      valid_until_ = std::max(valid_until_.load(), sent + proven);
      if (opts_.on_deadline)
        opts_.on_deadline(valid_until_.load());
      set_reason({});
    } else if (lost) {
      fail_closed(why);
    } else {
      set_reason(why);
    }
    // The next renewal a period after this one was sent (not after it returned); after a
    // failure, soon again, while the lease may still be saved.
    auto next = started + (why.empty() ? std::chrono::duration_cast<steady::duration>(period)
                                       : std::chrono::duration_cast<steady::duration>(retry));
    std::unique_lock lock{mtx_};
    if (cv_.wait_until(lock, next, [&] { return stop_; }))
      return;
  }
}

} // namespace boxrt::cluster
