// Process-wide counters, gauges and histograms for `GET /metrics`, in the Prometheus
// text exposition format (version 0.0.4). Updates are lock-free atomics; a labelled
// family looks its series up under a mutex once and hands out a reference that stays
// valid for the life of the process, so hot paths keep that reference. Cardinality is
// bounded: past a family's series cap, new label sets share one series whose every
// label is "other". Label values are never tenant data (actions, error classes,
// backends, fixed reason slugs).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace boxrt::metrics {

class counter {
 public:
  void inc(uint64_t n = 1) noexcept { v_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const noexcept { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

class gauge {
 public:
  void add(int64_t n) noexcept { v_.fetch_add(n, std::memory_order_relaxed); }
  void set(int64_t n) noexcept { v_.store(n, std::memory_order_relaxed); }
  int64_t value() const noexcept { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> v_{0};
};

/// Durations in seconds, with fixed buckets from 50 µs to 60 s; the sum is kept in
/// nanoseconds.
class duration_histogram {
 public:
  static constexpr std::array<double, 16> bounds = {
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
    0.025,   0.05,   0.1,     0.25,   0.5,   1.0,    5.0,   60.0};

  void observe_ns(uint64_t ns) noexcept;
  /// Cumulative count at each bound, then the total count (the +Inf bucket).
  std::array<uint64_t, bounds.size() + 1> cumulative() const noexcept;
  uint64_t sum_ns() const noexcept { return sum_ns_.load(std::memory_order_relaxed); }

 private:
  std::array<std::atomic<uint64_t>, bounds.size() + 1> buckets_{};
  std::atomic<uint64_t> sum_ns_{0};
};

enum class kind { counter, gauge, histogram };

/// The series of one metric name, by label values.
template <class Metric>
class family {
 public:
  family(std::vector<std::string> label_names, size_t max_series = 256)
    : label_names_(std::move(label_names)), max_series_(max_series) {}

  /// The series for `values` (one per label name), created on first use.
  Metric& with(std::initializer_list<std::string_view> values);

  /// Visits every series: f(const std::vector<std::string>& values, const Metric&).
  template <class F>
  void each(F&& f) const {
    std::lock_guard guard{mtx_};
    for (const auto& [values, m] : series_)
      f(values, *m);
  }

  const std::vector<std::string>& label_names() const { return label_names_; }

 private:
  std::vector<std::string> label_names_;
  size_t max_series_;
  mutable std::mutex mtx_;
  std::map<std::vector<std::string>, std::unique_ptr<Metric>> series_;
};

extern template class family<counter>;
extern template class family<gauge>;
extern template class family<duration_histogram>;

/// Everything boxd counts. One per process (`boxd()`).
struct boxd_metrics {
  /// Requests answered, by action ("unknown" for names not in the action table) and
  /// result ("ok" or the error class).
  family<counter> requests{{"action", "result"}};
  family<duration_histogram> request_duration{{"action"}};
  /// Live sessions by phase (starting, idle, running, stopping) and backend.
  family<gauge> sessions{{"state", "backend"}};
  family<counter> session_starts{{"backend", "result"}};
  /// Admission-mode decisions: decision admit|refuse, reason a fixed slug.
  family<counter> admission_decisions{{"decision", "reason"}};
  /// Grants revoked and workspaces whose sandbox entitlement was withdrawn.
  counter revocations;
  /// Frames that were not a usable request (not JSON, not an object, bad envelope).
  counter decode_errors;
  /// Bytes queued for clients on every WebSocket connection.
  gauge outbound_queue_bytes;
  /// Workspaces with a supervisor (live or kept idle for their admission record).
  gauge workspaces;
  /// Commands that ran past their timeout.
  counter exec_timeouts;
  /// Warm sandboxes waiting for a new workspace (box.limits.warm_pool).
  gauge warm_pool_ready;
  /// First uses that fit the warm pool: result adopted (took a warm sandbox) or empty
  /// (none was ready: the normal start).
  family<counter> warm_pool_takes{{"result"}};
  /// Egress policy (docs/network.md): connections the filter decided (decision allow,
  /// deny or error; reason domain, port, no_name, deny_cidr, address, resolve, limit,
  /// limit_total, policy_change, direct, connect) and lookups boxd's resolver answered
  /// (reason domain, format, limit, no_policy, upstream). No name or workspace label.
  family<counter> egress_connections{{"decision", "reason"}};
  family<counter> egress_lookups{{"decision", "reason"}};
  /// Refused connections past a sandbox's audit budget (a burst of 100, then 20 a
  /// second): counted here, without an audit line.
  counter egress_audit_suppressed;
};

boxd_metrics& boxd();

/// Values only the scraping server knows.
struct scrape_values {
  int64_t connections = 0;
  int64_t pending_handshakes = 0;
  int64_t pool_threads = 0;
  int64_t pool_idle_threads = 0;
  int64_t pool_queue_depth = 0;
};

/// The whole exposition: boxd's metrics, `extra`, and the process's own
/// (process_cpu_seconds_total, process_resident_memory_bytes, process_open_fds, ...).
std::string render(const scrape_values& extra);

/// The content type of `render`'s output.
inline constexpr std::string_view content_type = "text/plain; version=0.0.4; charset=utf-8";

/// A label value from an error text: the part before the first ':', lower case, words
/// joined by '_', at most 64 characters ("Sandbox admission grant has expired" ->
/// "sandbox_admission_grant_has_expired").
std::string reason_slug(std::string_view text);

} // namespace boxrt::metrics
