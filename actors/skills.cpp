#include "actors/skills.hpp"

#include <unistd.h>

#include <deque>

#include <caf/all.hpp>

#include "actors/caf_support.hpp"
#include "actors/pool_job.hpp"
#include "backends/skills/skill_actions.hpp"
#include "backends/state/transfer_store.hpp"

namespace boxrt {

namespace {

struct skill_state {
  static inline const char* name = "boxrt.skills";

  /// Jobs still queued when the actor goes never run: their uploads go with them.
  ~skill_state() {
    for (auto& p : queue)
      if (!p.job.file_path.empty())
        remove_transfer_file(p.job.file_path);
  }

  struct pending {
    skill_job job;
    caf::typed_response_promise<std::string> rp;
    /// Not empty: resolve the package root of this skill instead of running `job`.
    std::string resolve;
  };

  /// What pool jobs share (one job runs at a time): the store (made once its storage is
  /// ready: the backend says where it lives) and the storage lease.
  struct shared {
    std::shared_ptr<skills::store> store;
    backend_ptr backend;
    std::string root;
    std::shared_ptr<void> storage;
  };
  std::shared_ptr<shared> work;
  std::shared_ptr<worker_pool> pool;
  std::deque<pending> queue;
  bool busy = false;
  uint64_t next_token = 1;
  uint64_t running = 0;
  caf::typed_response_promise<std::string> running_rp;
};

using self_ptr = skill_actor::stateful_pointer<skill_state>;

void run_next(self_ptr self) {
  auto& st = self->state;
  if (st.busy || st.queue.empty())
    return;
  auto next = std::move(st.queue.front());
  st.queue.pop_front();
  st.busy = true;
  st.running = st.next_token++;
  st.running_rp = std::move(next.rp);
  auto run = [work = st.work, job = std::move(next.job), resolve = std::move(next.resolve)] {
    skill_outcome out;
    try {
      if (!work->store) {
        auto storage = work->backend ? work->backend->acquire_skill_storage(work->root)
                                     : backend::skill_storage{work->root, nullptr};
        if (!storage) {
          if (!job.file_path.empty())
            remove_transfer_file(job.file_path);
          out.error = storage.error();
          return out;
        }
        work->store = std::make_shared<skills::store>(storage->root);
        work->storage = std::move(storage->hold);
      }
      auto r = resolve.empty() ? run_skill_action(*work->store, job)
                               : work->store->resolve_package_root(resolve);
      if (r)
        out.data_json = std::move(r.value());
      else
        out.error = r.error();
    } catch (const std::exception& e) {
      out.error = box_error{ec::validation, e.what()};
    }
    return out;
  };
  pool_job(*st.pool, caf::actor_cast<skill_actor>(self), std::move(run), done_atom_v, st.running);
}

} // namespace

skill_actor spawn_skill_store(caf::local_actor* parent, std::string root,
                              std::shared_ptr<worker_pool> pool, backend_ptr backend) {
  return parent->spawn(
    [](self_ptr self, std::string root, std::shared_ptr<worker_pool> pool,
       backend_ptr backend) -> skill_actor::behavior_type {
      auto& st = self->state;
      st.work = std::make_shared<skill_state::shared>();
      st.work->backend = std::move(backend);
      st.work->root = std::move(root);
      st.pool = std::move(pool);
      return {
        [self](skill_atom, skill_job& job) -> caf::typed_response_promise<std::string> {
          auto rp = self->make_response_promise<std::string>();
          self->state.queue.push_back({std::move(job), rp, {}});
          run_next(self);
          return rp;
        },
        [self](resolve_atom, std::string& name) -> caf::typed_response_promise<std::string> {
          auto rp = self->make_response_promise<std::string>();
          skill_job job;
          job.admission = true;
          self->state.queue.push_back({std::move(job), rp, std::move(name)});
          run_next(self);
          return rp;
        },
        [self](done_atom, uint64_t token, skill_outcome& out) {
          auto& st = self->state;
          if (token != st.running)
            return;
          st.busy = false;
          if (out.error)
            st.running_rp.deliver(to_caf_error(out.error));
          else
            st.running_rp.deliver(std::move(out.data_json));
          run_next(self);
        },
      };
    },
    std::move(root), std::move(pool), std::move(backend));
}

} // namespace boxrt
