// Replies, the raw data object, pool jobs answered on the connection actor, the
// deadline of requests to the directory.
#include "net/rpc/action_support.hpp"

namespace boxrt::net {

namespace rpc_detail {

reply failure(box_error err) {
  return reply{std::move(err), "{}"};
}

reply success(std::string json) {
  return reply{{}, std::move(json)};
}

box_error not_trusted() {
  return untrusted_refusal(action_context{});
}

std::optional<element> lookup(const element& data, std::string_view key) {
  object obj;
  if (data.get_object().get(obj) != json_ok)
    return std::nullopt;
  std::optional<element> found;
  for (auto field : obj)
    if (field.key == key)
      found = field.value;
  return found;
}

box_error key_error(std::string_view key) {
  return {ec::key, "'" + std::string{key} + "'"};
}

bool read_integer(const element& e, __int128& out) {
  switch (e.type()) {
    case element_type::INT64: out = e.get_int64().value_unsafe(); return true;
    case element_type::UINT64: out = e.get_uint64().value_unsafe(); return true;
    default: return false;
  }
}

std::string trusted_instance(const connection_env& env) {
  if (env.shared && env.shared->trusted_instance)
    return env.shared->trusted_instance();
  return {};
}

bool is_trusted(const connection_env& env, const std::string& instance) {
  auto trusted = trusted_instance(env);
  return trusted.empty() || trusted == instance;
}

void run_blocking_on(const pool_runner& run, std::function<reply()> job, done_fn done) {
  run.jobs->run(
    *run.pool, caf::actor_cast<caf::actor>(run.self),
    [job = std::move(job)] {
      try {
        return job();
      } catch (const std::exception& e) {
        return failure({ec::runtime, e.what()});
      }
    },
    [done = std::move(done)](std::optional<reply> r) {
      done(r ? std::move(*r) : failure({ec::runtime, "worker pool job failed"}));
    });
}

runtime_limits limits_of(const connection_env& env) {
  if (env.shared && env.shared->settings)
    if (auto s = env.shared->settings->get())
      return s->config.limits;
  return {};
}

reply failure_of(const caf::error& err, std::string_view action) {
  auto e = from_caf_error(err);
  if (is_request_timeout(e) && !action.empty())
    e = timed_out_inside(action);
  return failure(std::move(e));
}

size_t payload_bytes(const exec_result& r) {
  return r.stdout_text.size() + r.stderr_text.size();
}

size_t payload_bytes(const file_result& r) {
  return r.data.size() + r.entries.size() * 64;
}

} // namespace rpc_detail

} // namespace boxrt::net
