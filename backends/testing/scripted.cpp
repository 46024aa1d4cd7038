// The scripted test backend: the command language of scripted.hpp, the records tests
// read back, and output capping with the reference's exact clip notice.
#include "backends/testing/scripted.hpp"
#include "backends/linux/managed.hpp"
#include "backends/linux/output.hpp"
#include "backends/readiness_keys.hpp"
#include "messages/base/pytext.hpp"

#include <array>
#include <atomic>
#include <charconv>
#include <string_view>
#include <utility>

namespace boxrt {

namespace {

/// Appends `x`, dropping the oldest half once twice the limit is reached.
template <class T>
void record(std::vector<T>& v, T x) {
  v.push_back(std::move(x));
  if (v.size() >= 2 * scripted_backend::record_limit)
    v.erase(v.begin(), v.end() - static_cast<std::ptrdiff_t>(scripted_backend::record_limit));
}

} // namespace

namespace {

/// Splits "verb rest" at the first whitespace; `rest` keeps its inner spacing.
std::pair<std::string_view, std::string_view> split_verb(std::string_view cmd) noexcept {
  size_t i = 0;
  while (i < cmd.size()) {
    size_t next = i;
    if (py::isspace(py::decode_utf8(cmd, next)))
      break;
    i = next;
  }
  return {cmd.substr(0, i), py::lstrip(cmd.substr(i))};
}

/// A session of the scripted backend. `interrupt` wakes its execs blocked in `gate`;
/// it uses the backend's mutex and condition variable, so a session must not be
/// interrupted after its backend is gone.
class scripted_session final : public backend_session {
 public:
  scripted_session(std::mutex& mtx, std::condition_variable& cv, std::string id)
    : mtx_{mtx}, cv_{cv}, id_{std::move(id)} {
  }

  std::string id() const override {
    return id_;
  }

  bool alive() const override {
    return alive_.load(std::memory_order_acquire);
  }

  void interrupt() override {
    {
      std::lock_guard lock{mtx_};
      ++interrupts_;
      interrupted_ = true;
    }
    cv_.notify_all();
    processes.kill_all();
  }

  void kill() noexcept {
    alive_.store(false, std::memory_order_release);
  }

  /// Its managed processes (real children), killed with the session.
  host_process_list processes;

  /// Bumped by every interrupt (and stop); a gated exec ends when it changes.
  /// Guarded by the backend's mutex.
  uint64_t interrupts_ = 0;
  /// Set by the first interrupt and never cleared: an exec that starts after it (the
  /// stop raced ahead of the exec reaching the backend) ends at once too.
  bool interrupted_ = false;

 private:
  std::mutex& mtx_;
  std::condition_variable& cv_;
  std::string id_;
  std::atomic<bool> alive_{true};
};

} // namespace

scripted_backend::scripted_backend(scripted_config config) : config_{std::move(config)} {
}

readiness_report scripted_backend::probe_readiness(const std::string&, bool) {
  readiness_report report;
  report.backend_name = "scripted";
  report.isolating = false;
  std::lock_guard lock{mtx_};
  report.available = config_.available;
  for (auto key : backend_readiness_keys) {
    auto ready = false;
    for (const auto& k : config_.ready_keys)
      if (k == key)
        ready = true;
    report.details.emplace(std::string{key}, ready);
  }
  return report;
}

result<std::shared_ptr<backend_session>>
scripted_backend::start_session(const box_spec& spec) {
  std::unique_lock lock{mtx_};
  auto held = [&] {
    for (const auto& needle : held_)
      if (spec.session_id.find(needle) != std::string::npos)
        return true;
    return false;
  };
  if (held()) {
    ++blocked_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return !held(); });
    --blocked_;
  }
  // Taken when the start proceeds, so a held start does not consume an error armed
  // for a later, unheld one.
  if (next_start_error_) {
    auto err = std::move(*next_start_error_);
    next_start_error_.reset();
    return err;
  }
  ++starts_;
  record(started_, spec);
  auto id = "scripted-" + std::to_string(next_id_++);
  return std::shared_ptr<backend_session>{
    std::make_shared<scripted_session>(mtx_, cv_, std::move(id))};
}

result<exec_result> scripted_backend::exec(backend_session& session, const box_spec& spec,
                                           const exec_limits& limits) {
  auto* self = dynamic_cast<scripted_session*>(&session);
  if (self == nullptr)
    return make_box_error(ec::box_error, "scripted backend got a session of another backend");
  auto cmd = py::strip(spec.cmd);
  auto [verb, arg] = split_verb(cmd);
  exec_result out;
  out.session_id = spec.session_id;
  out.backend_name = "scripted";
  if (verb == "gate") {
    std::string gate{arg};
    std::unique_lock lock{mtx_};
    ++execs_;
    if (!self->alive())
      return make_box_error(ec::box_error, "scripted session " + self->id() + " is not alive");
    auto seen = self->interrupts_;
    if (!open_gates_.contains(gate) && !self->interrupted_) {
      ++blocked_;
      cv_.notify_all();
      cv_.wait(lock, [&] { return open_gates_.contains(gate) || self->interrupts_ != seen; });
      --blocked_;
    }
    if (self->interrupted_ || self->interrupts_ != seen) {
      out.exit_code = 137;
      out.stderr_text = "interrupted";
    }
    return out;
  }
  {
    std::lock_guard lock{mtx_};
    ++execs_;
  }
  if (!self->alive())
    return make_box_error(ec::box_error, "scripted session " + self->id() + " is not alive");
  if (verb == "echo") {
    out.stdout_text = clip_output(arg, limits.max_output_bytes);
  } else if (verb == "fail") {
    int64_t code = 1;
    auto digits = py::strip(arg);
    auto [end, errc] = std::from_chars(digits.data(), digits.data() + digits.size(), code);
    if (errc != std::errc{} || end != digits.data() + digits.size())
      code = 1;
    out.exit_code = code;
    out.stderr_text = clip_output("failed", limits.max_output_bytes);
  } else if (verb == "timeout") {
    out.status = exec_status::timed_out;
    out.exit_code = -1;
    out.stderr_text = clip_output(
      "Command timed out after " + std::to_string(spec.timeout_sec) + " seconds.",
      limits.max_output_bytes);
  } else if (verb == "die") {
    self->kill();
    out.exit_code = 1;
  } else if (verb == "bytes") {
    size_t n = 0;
    auto digits = py::strip(arg);
    std::from_chars(digits.data(), digits.data() + digits.size(), n);
    n = std::min<size_t>(n, static_cast<size_t>(limits.max_output_bytes) + 1);
    out.stdout_text = clip_output(std::string(n, 'x'), limits.max_output_bytes);
  } else if (verb == "timeout_sec") {
    out.stdout_text = std::to_string(spec.timeout_sec); // the deadline the exec got
  } else {
    out.stdout_text = clip_output(cmd, limits.max_output_bytes);
  }
  return out;
}

void scripted_backend::stop_session(backend_session& session) {
  auto* self = dynamic_cast<scripted_session*>(&session);
  {
    std::lock_guard lock{mtx_};
    ++stops_;
    record(stopped_, session.id());
    if (self != nullptr) {
      self->kill();
      // A destroyed sandbox ends its running command, as with a real backend.
      ++self->interrupts_;
      self->interrupted_ = true;
    }
  }
  cv_.notify_all();
  if (self != nullptr)
    self->processes.kill_all();
}

result<std::shared_ptr<managed_process>>
scripted_backend::start_managed_process(backend_session& session, const process_spec& spec) {
  auto* self = dynamic_cast<scripted_session*>(&session);
  if (self == nullptr)
    return make_box_error(ec::box_error, "scripted backend got a session of another backend");
  if (!self->alive())
    return make_box_error(ec::box_error, "scripted session " + self->id() + " is not alive");
  {
    std::lock_guard lock{mtx_};
    record(managed_, spec);
  }
  host_process_options options;
  options.env = {"PATH=/usr/bin:/bin"};
  if (spec.command == "exit")
    options.argv = {"sh", "-c", "exit \"$1\"", "sh", spec.args.empty() ? "0" : spec.args[0]};
  else
    options.argv = {"cat"};
  auto started = host_managed_process::start(options);
  if (!started)
    return started.error();
  self->processes.add(started.value());
  return std::shared_ptr<managed_process>{started.value()};
}

void scripted_backend::hold_starts(const std::string& needle) {
  std::lock_guard lock{mtx_};
  held_.insert(needle);
}

void scripted_backend::release_starts(const std::string& needle) {
  {
    std::lock_guard lock{mtx_};
    held_.erase(needle);
  }
  cv_.notify_all();
}

void scripted_backend::release_gate(const std::string& name) {
  {
    std::lock_guard lock{mtx_};
    open_gates_.insert(name);
  }
  cv_.notify_all();
}

void scripted_backend::fail_next_start(box_error err) {
  std::lock_guard lock{mtx_};
  next_start_error_ = std::move(err);
}

void scripted_backend::set_config(scripted_config config) {
  std::lock_guard lock{mtx_};
  config_ = std::move(config);
}

std::vector<box_spec> scripted_backend::started_specs() const {
  std::lock_guard lock{mtx_};
  return started_;
}

std::vector<std::string> scripted_backend::stopped_ids() const {
  std::lock_guard lock{mtx_};
  return stopped_;
}

size_t scripted_backend::start_count() const {
  std::lock_guard lock{mtx_};
  return starts_;
}

size_t scripted_backend::stop_count() const {
  std::lock_guard lock{mtx_};
  return stops_;
}

size_t scripted_backend::exec_count() const {
  std::lock_guard lock{mtx_};
  return execs_;
}

std::vector<process_spec> scripted_backend::managed_specs() const {
  std::lock_guard lock{mtx_};
  return managed_;
}

size_t scripted_backend::blocked() const {
  std::lock_guard lock{mtx_};
  return blocked_;
}

bool scripted_backend::wait_stops(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock{mtx_};
  return cv_.wait_for(lock, timeout, [&] { return stops_ >= n; });
}

bool scripted_backend::wait_blocked(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock{mtx_};
  return cv_.wait_for(lock, timeout, [&] { return blocked_ >= n; });
}

} // namespace boxrt
