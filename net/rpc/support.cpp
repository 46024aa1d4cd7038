// Replies, the raw data object, the bridge from the worker pool back to the
// connection actor.
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
  return {ec::permission, "Box action context does not match the trusted instance"};
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

caf::behavior bridge(caf::event_based_actor* self, std::shared_ptr<worker_pool> pool,
                     std::function<void()> job) {
  auto promise = std::make_shared<caf::typed_response_promise<bool>>();
  return {
    [self, pool, job, promise](probe_atom) -> caf::result<bool> {
      *promise = self->make_response_promise<bool>();
      auto handle = caf::actor_cast<caf::actor>(self);
      pool->submit([job, handle] {
        job();
        caf::anon_send(handle, done_atom_v);
      });
      return *promise;
    },
    [self, promise](done_atom) {
      promise->deliver(true);
      self->quit();
    },
  };
}

void run_blocking_on(caf::event_based_actor* self, std::shared_ptr<worker_pool> pool,
                     std::function<reply()> job, done_fn done) {
  auto out = std::make_shared<reply>();
  std::function<void()> wrapped = [job = std::move(job), out] {
    try {
      *out = job();
    } catch (const std::exception& e) {
      *out = failure({ec::runtime, e.what()});
    }
  };
  auto helper = self->system().spawn(bridge, std::move(pool), std::move(wrapped));
  self->request(helper, caf::infinite, probe_atom_v)
    .then([out, done](bool) { done(std::move(*out)); },
          [done](caf::error& err) { done(failure(from_caf_error(err))); });
}

size_t payload_bytes(const exec_result& r) {
  return r.stdout_text.size() + r.stderr_text.size();
}

} // namespace rpc_detail

} // namespace boxrt::net
