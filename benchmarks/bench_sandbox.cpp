// bench_sandbox: what a real sandbox costs here, on each driver (bwrap, then nsjail from
// beside the benchmark, as `make build` provides it), in the same run so the figures
// compare. Prints numbers, asserts nothing.
//   - session start (bwrap + boxrt-init ready) and stop;
//   - warm exec round trips (`true`) on one session: the path every box_exec takes;
//   - the same with a fresh sandbox per command (start, exec, stop), which is what a
//     runtime without warm sessions pays per command;
//   - warm execs over 4 sessions in parallel;
//   - first session of a workspace with a hard quota (mkfs + loop mount) and later ones.
// Needs root and the driver; says so for a driver it cannot run and goes on.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "backends/sandbox/sandbox.hpp"

using namespace boxrt;
using clock_type = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

void report(const char* what, std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto pct = [&](double p) { return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))]; };
  double sum = 0;
  for (auto x : v)
    sum += x;
  std::printf("%-44s p50 %7.2f ms  p99 %7.2f ms  mean %7.2f ms  (%zu runs)\n", what, pct(0.5), pct(0.99),
              sum / v.size(), v.size());
}

} // namespace

int bench(sandbox_driver driver, const std::string& nsjail) {
  char tmpl[] = "/tmp/boxrt-bench-sandbox-XXXXXX";
  std::string root = ::mkdtemp(tmpl);
  sandbox_options opts;
  opts.driver = driver;
  opts.nsjail_path = nsjail;
  opts.state_dir = root + "/state";
  std::printf("== driver %s\n", driver_name(driver));
  {
    sandbox_backend b{opts};
    if (!b.unavailable_reason().empty()) {
      std::printf("bench_sandbox: %s unavailable: %s\n", driver_name(driver), b.unavailable_reason().c_str());
      return 0;
    }
    box_spec spec;
    spec.session_id = "bench";
    spec.cmd = "true";
    std::vector<double> starts, stops, warm, cold, quota_first, quota_later;
    for (int i = 0; i < 30; ++i) {
      auto t0 = clock_type::now();
      auto s = b.start_session(spec);
      starts.push_back(ms_since(t0));
      if (!s) {
        std::printf("start failed: %s\n", s.error().message.c_str());
        return 1;
      }
      t0 = clock_type::now();
      b.stop_session(**s);
      stops.push_back(ms_since(t0));
    }
    auto s = b.start_session(spec);
    for (int i = 0; i < 20; ++i)
      (void)b.exec(**s, spec, exec_limits{});
    auto t_warm = clock_type::now();
    for (int i = 0; i < 2000; ++i) {
      auto t0 = clock_type::now();
      (void)b.exec(**s, spec, exec_limits{});
      warm.push_back(ms_since(t0));
    }
    auto warm_secs = ms_since(t_warm) / 1000.0;
    b.stop_session(**s);
    for (int i = 0; i < 100; ++i) {
      auto t0 = clock_type::now();
      auto c = b.start_session(spec);
      (void)b.exec(**c, spec, exec_limits{});
      b.stop_session(**c);
      cold.push_back(ms_since(t0));
    }
    report("session start (sandbox ready)", starts);
    report("session stop", stops);
    report("warm exec `true` (one session)", warm);
    std::printf("%-44s %7.0f execs/s\n", "warm exec throughput (one session)", warm.size() / warm_secs);
    report("fresh sandbox per command (start+exec+stop)", cold);

    constexpr int parallel = 4;
    std::vector<std::shared_ptr<backend_session>> sessions;
    for (int i = 0; i < parallel; ++i) {
      auto p = spec;
      p.session_id = "par-" + std::to_string(i);
      sessions.push_back(b.start_session(p).value());
    }
    auto t_par = clock_type::now();
    std::vector<std::thread> threads;
    for (int i = 0; i < parallel; ++i)
      threads.emplace_back([&, i] {
        for (int k = 0; k < 500; ++k)
          (void)b.exec(*sessions[i], spec, exec_limits{});
      });
    for (auto& t : threads)
      t.join();
    std::printf("%-44s %7.0f execs/s\n", "warm exec throughput (4 sessions, 4 threads)",
                parallel * 500 / (ms_since(t_par) / 1000.0));
    for (auto& p : sessions)
      b.stop_session(*p);

    for (int i = 0; i < 10; ++i) {
      auto q = spec;
      q.host_path = root + "/workspaces/tenants/ws-" + std::string(20, 'a') + std::to_string(1000 + i);
      q.workspace_quota_mb = 32;
      auto t0 = clock_type::now();
      auto first = b.start_session(q);
      quota_first.push_back(ms_since(t0));
      b.stop_session(**first);
      t0 = clock_type::now();
      auto later = b.start_session(q);
      quota_later.push_back(ms_since(t0));
      b.stop_session(**later);
    }
    report("quota workspace, first start (mkfs+mount)", quota_first);
    report("quota workspace, later start (mount)", quota_later);
    auto t0 = clock_type::now();
    auto r = b.probe_readiness("", true);
    std::printf("%-44s %7.2f ms (first, includes the storage probe; ready keys: %s)\n", "readiness probe",
                ms_since(t0), r.error.empty() ? "ok" : r.error.c_str());
    t0 = clock_type::now();
    (void)b.probe_readiness("", true);
    std::printf("%-44s %7.2f ms\n", "readiness probe (later)", ms_since(t0));
  }
  std::error_code err;
  fs::remove_all(root, err);
  return 0;
}

int main() {
  if (::geteuid() != 0) {
    std::printf("bench_sandbox: needs root; skipped\n");
    return 0;
  }
  // nsjail beside this program's folder (build/benchmarks -> build/nsjail).
  std::error_code err;
  auto nsjail = fs::read_symlink("/proc/self/exe", err).parent_path().parent_path().string() + "/nsjail";
  int rc = 0;
  if (::access("/usr/bin/bwrap", X_OK) == 0)
    rc |= bench(sandbox_driver::bwrap, {});
  else
    std::printf("bench_sandbox: no /usr/bin/bwrap; bwrap skipped\n");
  rc |= bench(sandbox_driver::nsjail, nsjail);
  return rc;
}
