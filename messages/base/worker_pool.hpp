// An elastic pool of threads for blocking work (sandbox start, exec, stop, probes):
// a submitted job never waits behind a slow one while the thread cap is not reached.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace boxrt {

class worker_pool {
 public:
  /// `max_threads` bounds the threads alive at once; idle threads exit after `idle_exit`.
  /// `spin` is how long an idle thread polls for the next job before it sleeps.
  explicit worker_pool(size_t max_threads = 1024,
                       std::chrono::milliseconds idle_exit = std::chrono::seconds{30},
                       std::chrono::microseconds spin = std::chrono::microseconds{50});
  /// A pool that never starts a thread: its jobs wait until run_queued() runs them on
  /// the caller's thread (a deterministic test runs an actor's blocking work where it
  /// chooses).
  struct manual_t {};
  static constexpr manual_t manual{};
  explicit worker_pool(manual_t);

  /// Stops accepting new work, runs every queued job and joins all threads. Must not
  /// run on one of the pool's own threads.
  ~worker_pool();

  worker_pool(const worker_pool&) = delete;
  worker_pool& operator=(const worker_pool&) = delete;

  /// Runs `job` on an idle thread, or on a new one when none is idle and the cap
  /// allows; otherwise queues it. Never blocks the caller.
  void submit(std::function<void()> job);

  /// Threads alive now (for tests and stats).
  size_t threads() const;

  /// Threads waiting for work now (for tests and stats).
  size_t idle() const;

  /// Jobs queued and not yet started.
  size_t queued() const;

  /// A manual pool's queued jobs, the ones they submit too, run here in order; how many.
  size_t run_queued();

 private:
  void run();
  /// Starts one more thread unless the cap is reached; call with mtx_ held.
  bool start_thread_locked();
  /// Polls for a job for up to spin_ with mtx_ released; true when one is queued.
  bool spin_for_work(std::unique_lock<std::mutex>& lock);
  /// Joins and clears `threads`; called without mtx_ held.
  static void join_all(std::vector<std::thread>& threads);

  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  /// Threads that left on idle timeout and still need a join.
  std::vector<std::thread> finished_;
  size_t alive_ = 0;
  /// Threads waiting for work; a queued job beyond this count needs a new thread.
  size_t idle_ = 0;
  /// Threads executing a job right now.
  size_t running_ = 0;
  /// Threads polling for a job before they sleep.
  size_t spinning_ = 0;
  /// jobs_.size(), readable without the mutex by spinning threads.
  std::atomic<size_t> queued_{0};
  size_t max_threads_;
  std::chrono::milliseconds idle_exit_;
  std::chrono::microseconds spin_;
  bool stopping_ = false;
};

} // namespace boxrt
