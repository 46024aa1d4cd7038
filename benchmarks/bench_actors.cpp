// Throughput and latency of the actor core with the zero-cost scripted backend:
// directory -> supervisor -> session -> worker pool -> backend and back. Prints
// numbers; never asserted. Usage: bench_actors [--quick]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/actors.hpp"
#include "actors/caf_support.hpp"
#include "actors/directory.hpp"
#include "backends/testing/scripted.hpp"

using namespace boxrt;
using clock_type = std::chrono::steady_clock;

namespace {

struct bench_env {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::shared_ptr<scripted_backend> backend = std::make_shared<scripted_backend>();
  std::shared_ptr<worker_pool> pool = std::make_shared<worker_pool>();
  directory_actor dir;

  explicit bench_env(int64_t workspaces) {
    configure_actor_system(cfg, 2);
    sys = std::make_unique<caf::actor_system>(cfg);
    directory_args a;
    a.config.backend = "scripted";
    // The benchmark goes past the wire config's ranges on purpose (10,000 sessions).
    a.config.limits.max_sessions = workspaces + 16;
    a.config.limits.max_admission_records = workspaces + 16;
    a.config.limits.session_ttl_sec = 0;
    a.trusted_instance = "bench";
    a.backend = backend;
    a.pool = pool;
    dir = spawn_directory(*sys, std::move(a));
  }

  ~bench_env() {
    caf::scoped_actor self{*sys};
    self->request(dir, caf::infinite, shutdown_atom_v).receive([](int64_t) {}, [](caf::error&) {});
    caf::anon_send_exit(dir, caf::exit_reason::user_shutdown);
  }
};

exec_request make_req(int64_t ws, const std::string& session, const std::string& cmd) {
  exec_request r;
  r.ctx.instance_uuid = "bench";
  r.ctx.workspace_uuid = "workspace-" + std::to_string(ws);
  r.ctx.placement_generation = 1;
  r.spec.session_id = session;
  r.spec.cmd = cmd;
  return r;
}

/// Keeps `window` execs in flight, round-robin over `workspaces`, until `total` replied.
/// Returns {seconds, errors}.
std::pair<double, int64_t> pump(bench_env& env, int64_t workspaces, int64_t total, int64_t window) {
  struct state {
    int64_t sent = 0, done = 0, errors = 0;
  };
  caf::scoped_actor waiter{*env.sys};
  auto start = clock_type::now();
  auto dir = env.dir;
  auto driver = env.sys->spawn([dir, total, window, workspaces, reply_to = caf::actor{waiter}](
                                 caf::event_based_actor* self) {
    auto st = std::make_shared<state>();
    auto reqs = std::make_shared<std::vector<exec_request>>();
    for (int64_t w = 0; w < workspaces; ++w)
      reqs->push_back(make_req(w, "global", "true"));
    auto next = std::make_shared<std::function<void()>>();
    *next = [=]() {
      if (st->sent >= total)
        return;
      auto& req = (*reqs)[st->sent % workspaces];
      ++st->sent;
      self->request(dir, caf::infinite, exec_atom_v, req)
        .then(
          [=](exec_result&) {
            if (++st->done == total)
              self->send(reply_to, caf::ok_atom_v, st->errors);
            else
              (*next)();
          },
          [=](caf::error&) {
            ++st->errors;
            if (++st->done == total)
              self->send(reply_to, caf::ok_atom_v, st->errors);
            else
              (*next)();
          });
    };
    for (int64_t i = 0; i < window; ++i)
      (*next)();
  });
  int64_t errors = 0;
  waiter->receive([&](caf::ok_atom, int64_t e) { errors = e; });
  auto secs = std::chrono::duration<double>(clock_type::now() - start).count();
  caf::anon_send_exit(driver, caf::exit_reason::user_shutdown);
  return {secs, errors};
}

void warm_up(bench_env& env, int64_t workspaces) {
  // One session per workspace, started before the clock runs.
  pump(env, workspaces, workspaces, std::min<int64_t>(workspaces, 512));
}

void throughput(int64_t workspaces, int64_t total) {
  bench_env env{workspaces};
  warm_up(env, workspaces);
  auto [secs, errors] = pump(env, workspaces, total, std::max<int64_t>(256, std::min<int64_t>(workspaces, 1024)));
  std::printf("exec round trips, %6lld workspaces: %9.0f /s  (%lld execs in %.3f s, %lld errors, "
              "%zu backend starts, %zu pool threads)\n",
              static_cast<long long>(workspaces), total / secs, static_cast<long long>(total), secs,
              static_cast<long long>(errors), env.backend->start_count(), env.pool->threads());
}

void latency(int64_t samples) {
  bench_env env{1};
  warm_up(env, 1);
  caf::scoped_actor self{*env.sys};
  auto req = make_req(0, "global", "true");
  std::vector<double> us;
  us.reserve(samples);
  for (int64_t i = 0; i < samples; ++i) {
    auto t0 = clock_type::now();
    self->request(env.dir, caf::infinite, exec_atom_v, req).receive([](exec_result&) {}, [](caf::error&) {});
    us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  std::printf("one exec round trip (1 in flight): p50 %.1f us, p99 %.1f us, max %.1f us (%lld samples)\n",
              us[us.size() / 2], us[us.size() * 99 / 100], us.back(), static_cast<long long>(samples));
}

void first_use(int64_t n) {
  bench_env env{1};
  caf::scoped_actor self{*env.sys};
  auto req = make_req(0, "fresh", "true");
  auto t0 = clock_type::now();
  for (int64_t i = 0; i < n; ++i)
    self->send(env.dir, exec_atom_v, req);
  int64_t ok = 0, failed = 0;
  for (int64_t i = 0; i < n; ++i)
    self->receive([&](exec_result&) { ++ok; }, [&](caf::error&) { ++failed; });
  auto ms = std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
  std::printf("%lld concurrent first uses of one session: %zu backend start(s), %lld ok, %lld failed, "
              "drained in %.1f ms\n",
              static_cast<long long>(n), env.backend->start_count(), static_cast<long long>(ok),
              static_cast<long long>(failed), ms);
}

} // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  int64_t total = quick ? 20000 : 300000;
  std::printf("== actor core, scripted zero-cost backend, 2 scheduler threads\n");
  throughput(1, total);
  throughput(100, total);
  throughput(10000, total);
  latency(quick ? 2000 : 20000);
  first_use(10000);
  return 0;
}
