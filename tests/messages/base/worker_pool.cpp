// worker_pool: concurrency, thread reuse, the thread cap, idle exit and shutdown.
// Synchronisation is by latches and futures only; nothing sleeps.
#include "messages/base/worker_pool.hpp"

#include <atomic>
#include <chrono>
#include <future>
#include <latch>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include <boost/test/unit_test.hpp>

using namespace std::chrono_literals;

namespace {

/// Generous bound for a future that must become ready; only hit when the code is wrong.
constexpr auto patience = 10s;

/// Waits (yielding, never sleeping) until `pred` holds or `patience` passes.
template <class Pred>
bool eventually(Pred pred) {
  auto deadline = std::chrono::steady_clock::now() + patience;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline)
      return false;
    std::this_thread::yield();
  }
  return true;
}

} // namespace

BOOST_AUTO_TEST_SUITE(worker_pool_suite)

BOOST_AUTO_TEST_CASE(blocked_job_does_not_delay_a_second_job) {
  boxrt::worker_pool pool{8};
  std::latch release{1};
  std::promise<void> first_done;
  std::promise<void> second_done;
  pool.submit([&] {
    release.wait();
    first_done.set_value();
  });
  pool.submit([&] { second_done.set_value(); });
  BOOST_TEST((second_done.get_future().wait_for(patience) == std::future_status::ready));
  release.count_down();
  BOOST_TEST((first_done.get_future().wait_for(patience) == std::future_status::ready));
}

BOOST_AUTO_TEST_CASE(sequential_jobs_reuse_the_idle_thread) {
  boxrt::worker_pool pool{64};
  for (int i = 0; i < 500; ++i) {
    std::promise<void> done;
    pool.submit([&] { done.set_value(); });
    BOOST_REQUIRE((done.get_future().wait_for(patience) == std::future_status::ready));
    // The job signals before its thread is back to waiting; let it get there, so that
    // the next submit finds an idle thread.
    BOOST_REQUIRE(eventually([&] { return pool.idle() == 1; }));
  }
  BOOST_TEST(pool.threads() == 1u);
}

BOOST_AUTO_TEST_CASE(jobs_handed_to_idle_threads_start_no_new_thread) {
  boxrt::worker_pool pool{64};
  constexpr int width = 4;
  // Grow to `width` threads with jobs that all run at once.
  std::latch all_running{width};
  std::latch release{1};
  for (int i = 0; i < width; ++i)
    pool.submit([&] {
      all_running.count_down();
      release.wait();
    });
  all_running.wait();
  release.count_down();
  BOOST_REQUIRE(eventually([&] { return pool.idle() == width; }));
  // As many simultaneous jobs as idle threads: every one is handed over.
  std::latch second_round{width};
  for (int i = 0; i < width; ++i)
    pool.submit([&] { second_round.count_down(); });
  second_round.wait();
  BOOST_TEST(pool.threads() == static_cast<size_t>(width));
}

BOOST_AUTO_TEST_CASE(thread_cap_queues_the_job_beyond_it_until_one_finishes) {
  boxrt::worker_pool pool{2};
  std::latch started{2};
  std::latch release_first{1};
  std::latch release_second{1};
  std::promise<void> third_done;
  pool.submit([&] {
    started.count_down();
    release_first.wait();
  });
  pool.submit([&] {
    started.count_down();
    release_second.wait();
  });
  started.wait();
  pool.submit([&] { third_done.set_value(); });
  auto third = third_done.get_future();
  BOOST_TEST(pool.threads() == 2u);
  BOOST_TEST(pool.queued() == 1u);
  BOOST_TEST((third.wait_for(0s) == std::future_status::timeout));
  release_first.count_down();
  BOOST_TEST((third.wait_for(patience) == std::future_status::ready));
  BOOST_TEST(pool.threads() <= 2u);
  release_second.count_down();
}

BOOST_AUTO_TEST_CASE(destructor_runs_every_queued_job) {
  std::atomic<int> ran{0};
  std::latch started{1};
  std::latch release{1};
  {
    boxrt::worker_pool pool{1};
    pool.submit([&] {
      started.count_down();
      release.wait();
    });
    started.wait();
    for (int i = 0; i < 50; ++i)
      pool.submit([&] { ran.fetch_add(1); });
    BOOST_TEST(pool.queued() == 50u);
    release.count_down();
  }
  BOOST_TEST(ran.load() == 50);
}

BOOST_AUTO_TEST_CASE(job_submitted_by_a_job_during_shutdown_still_runs) {
  std::atomic<bool> follow_up_ran{false};
  std::latch started{1};
  std::latch release{1};
  {
    boxrt::worker_pool pool{1};
    pool.submit([&] {
      started.count_down();
      release.wait();
      pool.submit([&] { follow_up_ran = true; });
    });
    started.wait();
    release.count_down();
  }
  BOOST_TEST(follow_up_ran.load());
}

BOOST_AUTO_TEST_CASE(idle_threads_exit_and_new_work_starts_a_fresh_thread) {
  boxrt::worker_pool pool{4, 1ms};
  std::promise<void> done;
  pool.submit([&] { done.set_value(); });
  BOOST_REQUIRE((done.get_future().wait_for(patience) == std::future_status::ready));
  BOOST_TEST(eventually([&] { return pool.threads() == 0; }));
  // The next submit reaps the exited thread and starts a new one.
  std::promise<void> again;
  pool.submit([&] { again.set_value(); });
  BOOST_TEST((again.get_future().wait_for(patience) == std::future_status::ready));
}

BOOST_AUTO_TEST_CASE(destructor_joins_threads_that_are_leaving_on_idle_timeout) {
  // Idle exit races the destructor here; neither may deadlock nor leak a thread.
  for (int round = 0; round < 200; ++round) {
    boxrt::worker_pool pool{2, 0ms};
    std::latch done{1};
    pool.submit([&] { done.count_down(); });
    done.wait();
  }
  BOOST_TEST(true);
}

BOOST_AUTO_TEST_CASE(throwing_job_leaves_the_pool_usable) {
  boxrt::worker_pool pool{1};
  pool.submit([] { throw std::runtime_error{"boom"}; });
  std::promise<void> done;
  pool.submit([&] { done.set_value(); });
  BOOST_TEST((done.get_future().wait_for(patience) == std::future_status::ready));
  BOOST_TEST(pool.threads() == 1u);
}

BOOST_AUTO_TEST_CASE(concurrent_submitters_run_every_job_once) {
  constexpr int submitters = 4;
  constexpr int per_submitter = 20000;
  std::atomic<int> ran{0};
  {
    boxrt::worker_pool pool{8, 5ms};
    std::vector<std::thread> threads;
    for (int s = 0; s < submitters; ++s)
      threads.emplace_back([&] {
        for (int i = 0; i < per_submitter; ++i)
          pool.submit([&] { ran.fetch_add(1, std::memory_order_relaxed); });
      });
    for (auto& t : threads)
      t.join();
    BOOST_TEST(pool.threads() <= 8u);
  }
  BOOST_TEST(ran.load() == submitters * per_submitter);
}

BOOST_AUTO_TEST_CASE(zero_max_threads_still_runs_jobs) {
  boxrt::worker_pool pool{0};
  std::promise<void> done;
  pool.submit([&] { done.set_value(); });
  BOOST_TEST((done.get_future().wait_for(patience) == std::future_status::ready));
  BOOST_TEST(pool.threads() == 1u);
}

BOOST_AUTO_TEST_CASE(a_manual_pool_runs_its_jobs_only_when_asked_in_order) {
  boxrt::worker_pool pool{boxrt::worker_pool::manual};
  std::vector<int> ran;
  pool.submit([&] {
    ran.push_back(1);
    pool.submit([&] { ran.push_back(3); }); // a follow-up runs in the same call
  });
  pool.submit([&] { ran.push_back(2); });
  BOOST_TEST(ran.empty());
  BOOST_TEST(pool.threads() == 0u);
  BOOST_TEST(pool.queued() == 2u);
  BOOST_TEST(pool.run_queued() == 3u);
  BOOST_TEST((ran == std::vector<int>{1, 2, 3}));
  BOOST_TEST(pool.run_queued() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
