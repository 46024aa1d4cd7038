// An actor system on CAF's deterministic test coordinator (the `testing` scheduler
// policy): nothing runs until the test runs it, on the test's own thread, and blocking
// work goes to a manual worker pool the test drains in the same loop. Requests from
// the test go through ask(): an actor of its own keeps the answer, so a missing one is a
// failed check, never a wait.
#pragma once

#include <chrono>
#include <memory>
#include <optional>

#include <boost/test/unit_test.hpp>
#include <caf/all.hpp>

#include "actors/caf_support.hpp"
#include "messages/base/worker_pool.hpp"

namespace boxrt::test {

struct coordinated {
  static caf::actor_system_config& init(caf::actor_system_config& cfg) {
    add_boxrt_types(cfg);
    cfg.set("scheduler.policy", caf::atom("testing"));
    cfg.set("logger.verbosity", caf::atom("quiet"));
    return cfg;
  }

  caf::actor_system_config cfg;
  caf::actor_system sys{init(cfg)};
  caf::scheduler::test_coordinator& sched{
    dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler())};
  std::shared_ptr<worker_pool> pool = std::make_shared<worker_pool>(worker_pool::manual);

  /// Runs every actor and every pool job until nothing is left to do; how many steps.
  size_t settle() {
    size_t steps = 0;
    for (size_t n = 1; n > 0; steps += n)
      n = sched.run() + pool->run_queued();
    return steps;
  }

  /// Fires the next delayed message (a timer), then settles.
  bool fire_timer() {
    bool fired = sched.trigger_timeout();
    settle();
    return fired;
  }

  /// Asks `to` from an actor of its own (no thread waits): the reply, or the error, is
  /// in the returned slot once the system settled; an empty slot means no answer yet.
  template <class Reply, class Handle, class... Ts>
  std::shared_ptr<std::optional<caf::expected<Reply>>> ask(const Handle& to, Ts... xs) {
    auto out = std::make_shared<std::optional<caf::expected<Reply>>>();
    sys.spawn([out, to, xs...](caf::event_based_actor* a) {
      a->request(to, std::chrono::seconds{30}, xs...)
        .then([out](Reply& r) { *out = std::move(r); },
              [out](caf::error& e) { *out = caf::expected<Reply>{std::move(e)}; });
    });
    return out;
  }

  ~coordinated() {
    settle();
  }
};

} // namespace boxrt::test
