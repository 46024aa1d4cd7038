// The elastic blocking-work pool: one mutex and one condition variable; a queued job is
// matched against the threads waiting for work, and a thread is started only when none
// is free. Threads that leave on idle timeout are joined by the next submit or the
// destructor, so no thread is ever detached or leaked.
#include "backends/worker_pool.hpp"

#include <algorithm>
#include <exception>
#include <utility>

#include <spdlog/spdlog.h>

namespace boxrt {

namespace {

/// Runs one job; a throwing job must not take its thread (and the process) down.
void run_job(std::function<void()>& job) noexcept {
  try {
    job();
  } catch (const std::exception& e) {
    spdlog::error("worker_pool: job failed: {}", e.what());
  } catch (...) {
    spdlog::error("worker_pool: job failed with a non-standard exception");
  }
}

} // namespace

worker_pool::worker_pool(size_t max_threads, std::chrono::milliseconds idle_exit)
  : max_threads_{std::max<size_t>(max_threads, 1)}, idle_exit_{idle_exit} {
}

worker_pool::~worker_pool() {
  std::vector<std::thread> all;
  {
    std::lock_guard lock{mtx_};
    stopping_ = true;
    // From here on no thread moves itself to finished_ (it sees stopping_ under this
    // lock), so taking both lists now accounts for every thread.
    all.swap(threads_);
    for (auto& t : finished_)
      all.push_back(std::move(t));
    finished_.clear();
  }
  cv_.notify_all();
  // Live threads drain the queue before they see stopping_ and return.
  join_all(all);
  // Left-overs exist only when no thread was alive to take them (thread creation failed
  // or a job was submitted after every thread had returned): run them here.
  std::unique_lock lock{mtx_};
  while (!jobs_.empty()) {
    auto job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    run_job(job);
    job = nullptr;
    lock.lock();
  }
}

void worker_pool::submit(std::function<void()> job) {
  std::vector<std::thread> reaped;
  std::exception_ptr start_failure;
  bool wake = false;
  {
    std::lock_guard lock{mtx_};
    jobs_.push_back(std::move(job));
    if (!finished_.empty())
      reaped.swap(finished_);
    if (stopping_) {
      // Only a job of this pool can submit now (a follow-up during shutdown). Its own
      // thread, or the destructor after the joins, drains the queue.
    } else if (jobs_.size() <= idle_) {
      // Every queued job, this one included, has a waiting thread to take it.
      wake = true;
    } else if (alive_ < max_threads_) {
      try {
        threads_.emplace_back([this] { run(); });
        ++alive_;
      } catch (...) {
        // With a thread alive the job still runs, only later; with none it never would.
        if (alive_ == 0) {
          jobs_.pop_back();
          start_failure = std::current_exception();
        } else {
          spdlog::warn("worker_pool: cannot start a thread, job queued behind {} threads",
                       alive_);
        }
      }
    }
  }
  if (wake)
    cv_.notify_one();
  join_all(reaped);
  if (start_failure)
    std::rethrow_exception(start_failure);
}

size_t worker_pool::threads() const {
  std::lock_guard lock{mtx_};
  return alive_;
}

size_t worker_pool::idle() const {
  std::lock_guard lock{mtx_};
  return idle_;
}

size_t worker_pool::queued() const {
  std::lock_guard lock{mtx_};
  return jobs_.size();
}

void worker_pool::run() {
  std::unique_lock lock{mtx_};
  for (;;) {
    if (!jobs_.empty()) {
      {
        auto job = std::move(jobs_.front());
        jobs_.pop_front();
        lock.unlock();
        run_job(job);
        // `job` (and what it captured) is destroyed here, outside the lock.
      }
      lock.lock();
      continue;
    }
    if (stopping_)
      break;
    ++idle_;
    auto woke = cv_.wait_for(lock, idle_exit_,
                             [this] { return !jobs_.empty() || stopping_; });
    --idle_;
    if (!woke) {
      // Idle too long and not stopping: hand our std::thread over to be joined by the
      // next submit or by the destructor, then return without touching the pool again.
      auto self = std::this_thread::get_id();
      auto it = std::find_if(threads_.begin(), threads_.end(),
                             [self](const std::thread& t) { return t.get_id() == self; });
      if (it != threads_.end()) {
        std::iter_swap(it, threads_.end() - 1);
        finished_.push_back(std::move(threads_.back()));
        threads_.pop_back();
      }
      break;
    }
  }
  --alive_;
}

void worker_pool::join_all(std::vector<std::thread>& threads) {
  for (auto& t : threads)
    if (t.joinable())
      t.join();
  threads.clear();
}

} // namespace boxrt
