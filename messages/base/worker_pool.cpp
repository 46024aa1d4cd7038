// The elastic blocking-work pool: one mutex and one condition variable; a queued job is
// matched against the threads waiting for work, and a thread is started only when none
// is free. Threads that leave on idle timeout are joined by the next submit or the
// destructor, so no thread is ever detached or leaked.
#include "messages/base/worker_pool.hpp"

#include <algorithm>
#include <exception>
#include <stdexcept>
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

worker_pool::worker_pool(size_t max_threads, std::chrono::milliseconds idle_exit,
                         std::chrono::microseconds spin)
  : max_threads_{std::max<size_t>(max_threads, 1)}, idle_exit_{idle_exit}, spin_{spin} {
}

worker_pool::worker_pool(manual_t) : max_threads_{0}, idle_exit_{}, spin_{} {
}

size_t worker_pool::run_queued() {
  size_t n = 0;
  std::unique_lock lock{mtx_};
  while (max_threads_ == 0 && !jobs_.empty()) {
    auto job = std::move(jobs_.front());
    jobs_.pop_front();
    queued_.store(jobs_.size(), std::memory_order_release);
    lock.unlock();
    run_job(job);
    job = nullptr;
    ++n;
    lock.lock();
  }
  return n;
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
    queued_.store(jobs_.size(), std::memory_order_release);
    if (!finished_.empty())
      reaped.swap(finished_);
    if (stopping_) {
      // Only a job of this pool can submit now (a follow-up during shutdown). Its own
      // thread, or the destructor after the joins, drains the queue.
    } else if (running_ < alive_) {
      // A thread is spinning, waiting or between two jobs: it takes this one without a
      // new thread. A spinning thread sees it without a futex wake.
      wake = spinning_ == 0 && idle_ > 0;
    } else if (max_threads_ == 0) {
      // A manual pool: run_queued() takes it.
    } else if (!start_thread_locked()) {
      // With a thread alive the job still runs, only later; with none it never would.
      if (alive_ == 0) {
        jobs_.pop_back();
        start_failure = std::make_exception_ptr(std::runtime_error{"cannot start a thread"});
      } else {
        spdlog::warn("worker_pool: cannot start a thread, job queued behind {} threads", alive_);
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

bool worker_pool::start_thread_locked() {
  if (alive_ >= max_threads_)
    return false;
  try {
    threads_.emplace_back([this] { run(); });
  } catch (...) {
    return false;
  }
  ++alive_;
  return true;
}

bool worker_pool::spin_for_work(std::unique_lock<std::mutex>& lock) {
  // A short spin before sleeping on the condition variable: under load the next job
  // usually arrives within microseconds, and taking it without a futex wake-up on
  // both sides is what keeps the per-exec cost of the pool low.
  ++spinning_;
  lock.unlock();
  auto deadline = std::chrono::steady_clock::now() + spin_;
  bool found = false;
  for (unsigned i = 1;; ++i) {
    if (queued_.load(std::memory_order_acquire) > 0) {
      found = true;
      break;
    }
    if ((i & 63) == 0) {
      if (std::chrono::steady_clock::now() >= deadline)
        break;
      std::this_thread::yield();
    }
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  lock.lock();
  --spinning_;
  return found || !jobs_.empty();
}

void worker_pool::run() {
  std::unique_lock lock{mtx_};
  for (;;) {
    if (!jobs_.empty()) {
      {
        auto job = std::move(jobs_.front());
        jobs_.pop_front();
        queued_.store(jobs_.size(), std::memory_order_release);
        ++running_;
        // Jobs are left and every thread is now busy: this job may be slow, so the
        // rest must not wait behind it.
        if (!jobs_.empty() && running_ == alive_ && !stopping_)
          start_thread_locked();
        lock.unlock();
        run_job(job);
        // `job` (and what it captured) is destroyed here, outside the lock.
      }
      lock.lock();
      --running_;
      continue;
    }
    if (stopping_)
      break;
    if (spin_.count() > 0 && spin_for_work(lock))
      continue;
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
