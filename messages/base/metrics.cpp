#include "messages/base/metrics.hpp"

#include "messages/base/version.hpp"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

#include <fmt/format.h>

namespace boxrt::metrics {

void duration_histogram::observe_ns(uint64_t ns) noexcept {
  const double s = static_cast<double>(ns) / 1e9;
  size_t i = 0;
  while (i < bounds.size() && s > bounds[i])
    ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(ns, std::memory_order_relaxed);
}

std::array<uint64_t, duration_histogram::bounds.size() + 1>
duration_histogram::cumulative() const noexcept {
  std::array<uint64_t, bounds.size() + 1> out{};
  uint64_t total = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    total += buckets_[i].load(std::memory_order_relaxed);
    out[i] = total;
  }
  return out;
}

template <class Metric>
Metric& family<Metric>::with(std::initializer_list<std::string_view> values) {
  std::vector<std::string> key;
  key.reserve(label_names_.size());
  for (auto v : values)
    key.emplace_back(v);
  key.resize(label_names_.size());
  std::lock_guard guard{mtx_};
  if (auto i = series_.find(key); i != series_.end())
    return *i->second;
  if (series_.size() + 1 >= max_series_)
    key.assign(label_names_.size(), "other");
  auto& slot = series_[std::move(key)];
  if (!slot)
    slot = std::make_unique<Metric>();
  return *slot;
}

template class family<counter>;
template class family<gauge>;
template class family<duration_histogram>;

boxd_metrics& boxd() {
  static boxd_metrics m;
  return m;
}

namespace {

/// A label value with \, " and newline escaped (exposition format).
void append_escaped(std::string& out, std::string_view v) {
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
}

std::string labels(const std::vector<std::string>& names, const std::vector<std::string>& values,
                   std::string_view extra_name = {}, std::string_view extra_value = {}) {
  std::string out;
  if (names.empty() && extra_name.empty())
    return out;
  out += '{';
  bool first = true;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!first)
      out += ',';
    first = false;
    out += names[i];
    out += "=\"";
    append_escaped(out, values[i]);
    out += '"';
  }
  if (!extra_name.empty()) {
    if (!first)
      out += ',';
    out += extra_name;
    out += "=\"";
    out += extra_value;
    out += '"';
  }
  out += '}';
  return out;
}

void header(std::string& out, std::string_view name, std::string_view help, kind k) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name,
                     k == kind::counter ? "counter" : k == kind::gauge ? "gauge" : "histogram");
}

void sample(std::string& out, std::string_view name, double v) {
  out += fmt::format("{} {}\n", name, v);
}

void sample(std::string& out, std::string_view name, int64_t v) {
  out += fmt::format("{} {}\n", name, v);
}

void render_family(std::string& out, std::string_view name, std::string_view help,
                   const family<counter>& f) {
  header(out, name, help, kind::counter);
  f.each([&](const std::vector<std::string>& values, const counter& c) {
    out += fmt::format("{}{} {}\n", name, labels(f.label_names(), values), c.value());
  });
}

void render_family(std::string& out, std::string_view name, std::string_view help,
                   const family<gauge>& f) {
  header(out, name, help, kind::gauge);
  f.each([&](const std::vector<std::string>& values, const gauge& g) {
    out += fmt::format("{}{} {}\n", name, labels(f.label_names(), values), g.value());
  });
}

void render_family(std::string& out, std::string_view name, std::string_view help,
                   const family<duration_histogram>& f) {
  header(out, name, help, kind::histogram);
  f.each([&](const std::vector<std::string>& values, const duration_histogram& h) {
    auto counts = h.cumulative();
    for (size_t i = 0; i < duration_histogram::bounds.size(); ++i)
      out += fmt::format("{}_bucket{} {}\n", name,
                         labels(f.label_names(), values, "le",
                                fmt::format("{}", duration_histogram::bounds[i])),
                         counts[i]);
    out += fmt::format("{}_bucket{} {}\n", name, labels(f.label_names(), values, "le", "+Inf"),
                       counts.back());
    out += fmt::format("{}_sum{} {}\n", name, labels(f.label_names(), values),
                       static_cast<double>(h.sum_ns()) / 1e9);
    out += fmt::format("{}_count{} {}\n", name, labels(f.label_names(), values), counts.back());
  });
}

void render_one(std::string& out, std::string_view name, std::string_view help, kind k,
                int64_t v) {
  header(out, name, help, k);
  sample(out, name, v);
}

/// process_* metrics from /proc/self (the names client libraries use).
void render_process(std::string& out) {
  std::ifstream in{"/proc/self/stat"};
  std::string stat{std::istreambuf_iterator<char>{in}, {}};
  // Fields after the command name, which ends at the last ')'.
  auto close = stat.rfind(')');
  if (close != std::string::npos) {
    std::istringstream rest{stat.substr(close + 2)};
    std::vector<std::string> f{std::istream_iterator<std::string>{rest}, {}};
    // f[0] is field 3 (state): utime 14, stime 15, starttime 22, vsize 23, rss 24.
    auto field = [&](size_t n) -> double {
      return n - 3 < f.size() ? std::strtod(f[n - 3].c_str(), nullptr) : 0.0;
    };
    const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
    header(out, "process_cpu_seconds_total", "User and system CPU time spent, in seconds.",
           kind::counter);
    sample(out, "process_cpu_seconds_total", (field(14) + field(15)) / tick);
    header(out, "process_resident_memory_bytes", "Resident memory size in bytes.", kind::gauge);
    sample(out, "process_resident_memory_bytes",
           static_cast<int64_t>(field(24)) * static_cast<int64_t>(sysconf(_SC_PAGESIZE)));
    header(out, "process_virtual_memory_bytes", "Virtual memory size in bytes.", kind::gauge);
    sample(out, "process_virtual_memory_bytes", static_cast<int64_t>(field(23)));
    // Start time: boot time (btime of /proc/stat) plus starttime in ticks.
    std::ifstream sys_stat{"/proc/stat"};
    std::string line;
    while (std::getline(sys_stat, line)) {
      if (line.rfind("btime ", 0) == 0) {
        header(out, "process_start_time_seconds",
               "Start time of the process since the Unix epoch, in seconds.", kind::gauge);
        sample(out, "process_start_time_seconds",
               std::strtod(line.c_str() + 6, nullptr) + field(22) / tick);
        break;
      }
    }
  }
  int64_t fds = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (auto* e = readdir(d))
      if (e->d_name[0] != '.')
        ++fds;
    closedir(d);
    render_one(out, "process_open_fds", "Number of open file descriptors.", kind::gauge,
               fds - 1); // the directory's own descriptor
  }
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0)
    render_one(out, "process_max_fds", "Maximum number of open file descriptors.", kind::gauge,
               static_cast<int64_t>(lim.rlim_cur));
}

} // namespace

std::string render(const scrape_values& extra) {
  auto& m = boxd();
  std::string out;
  out.reserve(16 * 1024);
  header(out, "boxd_build_info", "boxd's version, git describe and build type (always 1).", kind::gauge);
  out += fmt::format("boxd_build_info{{version=\"{}\",git=\"{}\",build_type=\"{}\"}} 1\n", version(),
                     git_describe(), build_type());
  render_family(out, "boxd_requests_total", "Action-RPC requests answered, by action and result.",
                m.requests);
  render_family(out, "boxd_request_duration_seconds",
                "Time from a request's arrival to its reply being queued, by action.",
                m.request_duration);
  render_family(out, "boxd_sessions", "Live sessions by state and backend.", m.sessions);
  render_family(out, "boxd_session_starts_total", "Sandbox starts by backend and result.",
                m.session_starts);
  render_family(out, "boxd_admission_decisions_total",
                "Admission-mode decisions on tenant actions, by decision and reason.",
                m.admission_decisions);
  render_family(out, "boxd_egress_connections_total",
                "Connections of network-on sandboxes under an egress policy, by decision and reason.",
                m.egress_connections);
  render_family(out, "boxd_egress_lookups_total",
                "DNS lookups of network-on sandboxes under an egress policy, by decision and reason.",
                m.egress_lookups);
  render_one(out, "boxd_egress_audit_suppressed_total",
             "Refused egress connections past their sandbox's audit budget, not written to the audit log.",
             kind::counter, static_cast<int64_t>(m.egress_audit_suppressed.value()));
  render_one(out, "boxd_revocations_total",
             "Admission grants revoked and sandbox entitlements withdrawn.", kind::counter,
             static_cast<int64_t>(m.revocations.value()));
  render_one(out, "boxd_decode_errors_total",
             "Frames that were not a usable Action-RPC request.", kind::counter,
             static_cast<int64_t>(m.decode_errors.value()));
  render_one(out, "boxd_exec_timeouts_total", "Commands that ran past their timeout.",
             kind::counter, static_cast<int64_t>(m.exec_timeouts.value()));
  render_one(out, "boxd_warm_pool_ready", "Warm sandboxes ready for a new workspace.", kind::gauge,
             m.warm_pool_ready.value());
  render_family(out, "boxd_warm_pool_takes_total",
                "First uses that fit the warm pool, by result (adopted, empty).", m.warm_pool_takes);
  render_one(out, "boxd_outbound_queue_bytes", "Bytes queued for clients on all connections.",
             kind::gauge, m.outbound_queue_bytes.value());
  render_one(out, "boxd_workspaces", "Workspaces with a supervisor actor.", kind::gauge,
             m.workspaces.value());
  render_one(out, "boxd_connections", "Open WebSocket connections.", kind::gauge,
             extra.connections);
  render_one(out, "boxd_pending_handshakes", "Connections that have not finished their handshake.",
             kind::gauge, extra.pending_handshakes);
  render_one(out, "boxd_pool_threads", "Threads of the blocking-work pool.", kind::gauge,
             extra.pool_threads);
  render_one(out, "boxd_pool_idle_threads", "Pool threads waiting for work.", kind::gauge,
             extra.pool_idle_threads);
  render_one(out, "boxd_pool_queue_depth", "Blocking jobs waiting for a pool thread.",
             kind::gauge, extra.pool_queue_depth);
  render_process(out);
  return out;
}

std::string reason_slug(std::string_view text) {
  if (auto colon = text.find(':'); colon != std::string_view::npos)
    text = text.substr(0, colon);
  std::string out;
  bool gap = false;
  for (char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      if (gap && !out.empty())
        out += '_';
      gap = false;
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else {
      gap = true;
    }
    if (out.size() >= 64)
      break;
  }
  return out.empty() ? std::string{"unspecified"} : out;
}

} // namespace boxrt::metrics
