// Where the bytes of an idle session go: heap bytes in use (mallinfo2) before and after
// N workspaces each get one idle session through the real actor core (scripted backend),
// then the same for supervisors alone, bare CAF actors, and the sizes of the states.
// Prints numbers; never asserted. Usage: bench_memory [N]
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/actors.hpp"
#include "actors/caf_support.hpp"
#include "actors/directory.hpp"
#include "actors/session_detail.hpp"
#include "actors/supervisor_detail.hpp"
#include "backends/testing/scripted.hpp"

using namespace boxrt;

namespace {

size_t heap_in_use() {
  ::malloc_trim(0);
  return ::mallinfo2().uordblks;
}

struct env {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::shared_ptr<scripted_backend> backend = std::make_shared<scripted_backend>();
  std::shared_ptr<worker_pool> pool = std::make_shared<worker_pool>();
  directory_actor dir;

  explicit env(int64_t n, int64_t idle_cache = -1) {
    configure_actor_system(cfg, 2);
    sys = std::make_unique<caf::actor_system>(cfg);
    directory_args a;
    a.config.backend = "scripted";
    a.config.limits.max_sessions = n + 16;
    a.config.limits.max_sessions_per_workspace = 16;
    a.config.limits.max_admission_records = 4 * n + 16;
    a.config.limits.max_idle_workspaces = idle_cache < 0 ? 4 * n + 16 : idle_cache;
    a.config.limits.session_ttl_sec = 0;
    a.trusted_instance = "bench";
    a.backend = backend;
    a.pool = pool;
    dir = spawn_directory(*sys, std::move(a));
  }

  ~env() {
    caf::scoped_actor self{*sys};
    self->request(dir, caf::infinite, shutdown_atom_v).receive([](int64_t) {}, [](caf::error&) {});
    caf::anon_send_exit(dir, caf::exit_reason::user_shutdown);
  }

  action_context ctx(const std::string& ws) const {
    action_context c;
    c.instance_uuid = "bench";
    c.workspace_uuid = ws;
    c.placement_generation = 1;
    return c;
  }

  /// One request per workspace, `window` in flight; waits for every reply.
  template <class F>
  void each(int64_t first, int64_t last, F make) {
    caf::scoped_actor self{*sys};
    for (int64_t i = first; i < last; ++i)
      make(self, i);
  }
};

double per(size_t before, size_t after, int64_t n) {
  return (static_cast<double>(after) - static_cast<double>(before)) / static_cast<double>(n);
}

void sessions_and_supervisors(int64_t n) {
  env e{n};
  // The directory, the pool and the first-use paths warm up on a few workspaces.
  e.each(0, 16, [&](caf::scoped_actor& self, int64_t i) {
    exec_request r;
    r.ctx = e.ctx("warm-" + std::to_string(i));
    r.spec.session_id = "global";
    r.spec.cmd = "true";
    self->request(e.dir, caf::infinite, exec_atom_v, r).receive([](exec_result&) {}, [](caf::error&) {});
  });
  auto base = heap_in_use();
  e.each(0, n, [&](caf::scoped_actor& self, int64_t i) {
    self->request(e.dir, caf::infinite, status_atom_v, e.ctx("sup-" + std::to_string(i)))
      .receive([](status_info&) {}, [](caf::error&) {});
  });
  auto sup = heap_in_use();
  e.each(0, n, [&](caf::scoped_actor& self, int64_t i) {
    exec_request r;
    r.ctx = e.ctx("ws-" + std::to_string(i));
    r.spec.session_id = "global";
    r.spec.cmd = "true";
    self->request(e.dir, caf::infinite, exec_atom_v, r).receive([](exec_result&) {}, [](caf::error&) {});
  });
  auto both = heap_in_use();
  std::printf("idle workspace with one session (supervisor + session + maps): %8.0f B\n",
              per(sup, both, n));
  std::printf("  of which the supervisor of an idle workspace, no session:      %8.0f B\n",
              per(base, sup, n));
  std::printf("  so the session and its entries:                                %8.0f B\n",
              per(sup, both, n) - per(base, sup, n));
}

/// First uses refused at the session cap, each in a new workspace, with the default
/// idle-workspace cache: what each leaves behind.
void refused_first_uses(int64_t n) {
  env e{n, runtime_limits{}.max_idle_workspaces};
  auto exec_in = [&](caf::scoped_actor& self, const std::string& ws) {
    exec_request r;
    r.ctx = e.ctx(ws);
    r.spec.session_id = "global";
    r.spec.cmd = "true";
    self->request(e.dir, caf::infinite, exec_atom_v, r).receive([](exec_result&) {}, [](caf::error&) {});
  };
  // The cap (n + 16) filled.
  e.each(0, n + 16, [&](caf::scoped_actor& self, int64_t i) { exec_in(self, "full-" + std::to_string(i)); });
  e.each(0, 512, [&](caf::scoped_actor& self, int64_t i) { exec_in(self, "warm-refused-" + std::to_string(i)); });
  auto before = heap_in_use();
  e.each(0, n, [&](caf::scoped_actor& self, int64_t i) { exec_in(self, "refused-" + std::to_string(i)); });
  auto after = heap_in_use();
  std::printf("a first use refused at the session cap in a new workspace:      %8.0f B "
              "(idle-workspace cache %lld)\n",
              per(before, after, n), static_cast<long long>(runtime_limits{}.max_idle_workspaces));
}

struct empty_state {
  static inline const char* name = "bench.empty";
};

void bare_actors(int64_t n) {
  caf::actor_system_config cfg;
  configure_actor_system(cfg, 2);
  caf::actor_system sys{cfg};
  std::vector<caf::actor> keep;
  keep.reserve(static_cast<size_t>(n) * 2);
  auto before = heap_in_use();
  for (int64_t i = 0; i < n; ++i)
    keep.push_back(sys.spawn([](caf::event_based_actor*) -> caf::behavior {
      return {[](int32_t x) { return x; }};
    }));
  auto one = heap_in_use();
  for (int64_t i = 0; i < n; ++i)
    keep.push_back(sys.spawn([](caf::stateful_actor<empty_state>*) -> caf::behavior {
      return {[](int32_t x) { return x; }, [](int64_t x) { return x; }, [](double x) { return x; },
              [](float x) { return x; }, [](int16_t x) { return x; }, [](uint32_t x) { return x; },
              [](uint64_t x) { return x; }, [](uint16_t x) { return x; }, [](bool x) { return x; },
              [](const std::string& x) { return x; }};
    }));
  auto ten = heap_in_use();
  std::printf("CAF floor: an event-based actor with 1 handler:                 %8.0f B\n",
              per(before, one, n));
  std::printf("CAF floor: a stateful actor with 10 handlers:                   %8.0f B\n",
              per(one, ten, n));
  for (auto& a : keep)
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

} // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  int64_t n = argc > 1 ? std::atoll(argv[1]) : 5000;
  std::printf("bench_memory: heap bytes in use (mallinfo2) per item, %lld items\n",
              static_cast<long long>(n));
  std::printf("sizeof: session_state %zu, supervisor_state %zu, session_info %zu, box_spec %zu, "
              "session_entry %zu, queued_exec %zu\n",
              sizeof(session_detail::session_state), sizeof(supervisor_detail::supervisor_state),
              sizeof(session_info), sizeof(box_spec), sizeof(supervisor_detail::session_entry),
              sizeof(session_detail::session_state::queued_exec));
  std::printf("sizeof: caf::event_based_actor %zu, caf::stateful_actor<empty> %zu\n",
              sizeof(caf::event_based_actor), sizeof(caf::stateful_actor<empty_state>));
  bare_actors(n);
  sessions_and_supervisors(n);
  refused_first_uses(n);
  return 0;
}
