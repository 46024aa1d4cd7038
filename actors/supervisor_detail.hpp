// Internal to the supervisor (supervisor.cpp, supervisor_admission.cpp,
// supervisor_sessions.cpp): its state and the steps its handlers are made of.
#pragma once

#include "actors/supervisor.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include <unistd.h>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/admission.hpp"
#include "messages/base/metrics.hpp"
#include "actors/caf_support.hpp"
#include "actors/pool_job.hpp"
#include "actors/session.hpp"
#include "actors/skills.hpp"
#include "backends/mount_policy.hpp"
#include "backends/registry.hpp"
#include "backends/skills/skill_actions.hpp"
#include "messages/base/log.hpp"
#include "messages/base/pytext.hpp"
#include "messages/base/json.hpp"
#include "messages/tenancy.hpp"
#include "messages/time.hpp"

namespace boxrt::supervisor_detail {

/// A request waiting for its session actor while a global session slot is reserved.
struct waiter {
  std::function<void(const session_actor&)> go;
  std::function<void(const box_error&)> fail;
};

struct session_entry {
  session_actor actor;  // invalid while the slot is being reserved
  uint64_t reservation = 0;
  std::string logical_id;
  int64_t generation = 0;
  /// The spec of the first use (session_id = physical id): the compat check compares
  /// against it, and the session actor starts every sandbox from the same object.
  std::shared_ptr<const box_spec> compat;
  std::vector<mount_spec> mounts;
  uint64_t forwarded = 0;
  std::vector<waiter> waiting;
};

struct supervisor_state {
  static inline const char* name = "boxrt.supervisor";

  supervisor_state() { metrics::boxd().workspaces.add(1); }
  ~supervisor_state() { metrics::boxd().workspaces.add(-1); }
  supervisor_state(const supervisor_state&) = delete;
  supervisor_state& operator=(const supervisor_state&) = delete;

  supervisor_args args;
  std::unique_ptr<workspace_admission> admission;
  std::unordered_map<std::string, session_entry> sessions;
  /// box_status answers still gathering session usage and slots, and skill requests
  /// at the skill store (no eviction meanwhile: leaving would drop their replies).
  int64_t status_waits = 0;
  int64_t skill_waits = 0;
  /// Session actors alive (including ones being stopped) by address, and whether their
  /// global session slot was given back already.
  struct live_session {
    std::string id;
    bool released = false;
  };
  std::unordered_map<caf::actor_addr, live_session> live;
  uint64_t next_reservation = 1;
  uint64_t expiry_token = 0;
  int64_t armed_expiry = 0;
  bool reported_idle = false;
  /// The workspace's skill-store actor (spawned on first use) and the root it serves.
  skill_actor skills;
  std::string skills_root;
  std::optional<local_config> skills_local;
  std::string skills_resolved;
  /// Blocking work on the worker pool (on_pool, commits): what to run on this actor
  /// when it is done.
  pool_waits jobs;
  /// box_get_storage_analysis requests waiting for the one analysis of their placement.
  std::map<int64_t, std::vector<caf::typed_response_promise<storage_report>>> storage_waiters;
  /// The admission state as last committed to the store.
  std::string persisted;
  /// A commit of the admission state on the worker pool (commit_then): the state being
  /// written and who waits for it to be durable. While one is in flight the supervisor
  /// takes up no other message (hold_mailbox).
  bool committing = false;
  std::vector<std::function<void(box_error)>> commit_waiters;
  /// The last failed commit (the state it tried to write, the error): the request that
  /// is taken up again after it learns the error once (persist).
  std::optional<std::pair<std::string, box_error>> failed_commit;
  /// Set by persist when a gate found a commit to wait for: the handler skips its
  /// message (refused), which is taken up again once the commit is done.
  bool replay = false;
  /// Set when the workspace's durable state could not be read: it serves nothing.
  box_error state_error;
  /// Every live session actor, shared with the exit functor.
  std::shared_ptr<std::unordered_map<caf::actor_addr, caf::actor>> children
    = std::make_shared<std::unordered_map<caf::actor_addr, caf::actor>>();
};

using self_ptr = supervisor_actor::stateful_pointer<supervisor_state>;

const box_config& config(self_ptr self);

bool admission_mode(self_ptr self);

std::string tenant_path(self_ptr self);

box_error stale_error();

/// The reference's compat check: first differing field, in the reference's order.
box_error check_compat(const session_entry& e, const box_spec& spec);

/// Gives the session's global slot back once its sandbox is gone (stop reply or down).
void release_slot(self_ptr self, const caf::actor_addr& addr);

/// The physical id of `logical` at `gen` in this workspace. The namespace is this
/// supervisor's own, computed once, so the hot path hashes nothing for plain ids.
result<std::string> physical_id(self_ptr self, int64_t gen, std::string_view logical);

void report_idle(self_ptr self);

/// Holds nothing and serves nothing: the directory may let it go. The one test of
/// the idle report and of the eviction handshake.
bool idle_now(const supervisor_state& st);

/// Stops every session matching `pred`; calls `done(count)` once all have stopped.
/// Entries are forgotten at once so that new requests start fresh sessions.
void stop_sessions(self_ptr self, std::function<bool(const std::string&, const session_entry&)> pred,
                   const box_error& reason, std::function<void(int64_t)> done);

void stop_all(self_ptr self, const box_error& reason, std::function<void(int64_t)> done);

/// Retires sessions of generations older than the fence (their requests get the
/// stale error instead of waiting forever).
void retire_stale(self_ptr self);

void apply_effect(self_ptr self, session_effect effect, std::function<void(int64_t)> done);

/// The reply of an admission change: applies `effect` (stopping sessions as it says),
/// then answers `rp` with `receipt` (an entitlement receipt learns how many sessions were
/// revoked) or, when the change had to stand although its commit failed, with `saved`.
template <class Receipt>
void reply_after_effect(self_ptr self, caf::typed_response_promise<Receipt> rp, session_effect effect,
                        Receipt receipt, box_error saved = {}) {
  apply_effect(self, effect, [self, rp, receipt, saved](int64_t stopped) mutable {
    if constexpr (requires { receipt.revoked_sessions; })
      receipt.revoked_sessions = stopped;
    if (saved)
      rp.deliver(to_caf_error(saved));
    else
      rp.deliver(receipt);
    report_idle(self);
  });
}

void arm_expiry(self_ptr self);

/// Until (done_atom, token) arrives the supervisor takes up nothing else: every other
/// message stays in its mailbox, in order, and is taken up after the job's
/// continuation ran. Responses to its own requests still arrive (they are not
/// behaviour messages).
void hold_mailbox(self_ptr self, uint64_t token);

/// Commits the admission state when it changed (contract §4.11) on the worker pool,
/// then runs `next` on this actor with the outcome (at once when there is nothing to
/// commit). The store's commit may wait for a disk or for etcd: no scheduler thread
/// waits with it, and meanwhile this workspace takes up no other request (other
/// workspaces go on). A state changed again while the commit ran is committed before
/// `next` runs.
void commit_then(self_ptr self, std::function<void(box_error)> next);

/// For gates inside a handler: {} when the state is durable already. Otherwise it starts
/// the commit and returns an error with `replay` set: the handler then returns
/// refused(), which skips the message; it is taken up again after the commit, when this
/// returns {} or, once, the commit's error. Never called from a continuation.
box_error persist(self_ptr self);

/// A handler's answer to a refused request: the error, or `skip` when its gate waits for
/// a commit (see persist).
struct refusal {
  caf::error err;
  bool skip = false;
  template <class T>
  operator caf::result<T>() const {
    if (skip)
      return caf::skip;
    return err;
  }
};
inline refusal refused(self_ptr self, const box_error& e) {
  bool skip = std::exchange(self->state.replay, false);
  return {skip ? caf::error{} : to_caf_error(e), skip};
}
inline bool replaying(self_ptr self) {
  return self->state.replay;
}

/// The checks that change nothing, in order: fence staleness, forged fields
/// (admission mode), decode errors.
box_error pre_gate(self_ptr self, const action_context& ctx, const payload_facts* facts,
                   const box_error& decode_error);

/// For sandbox actions in admission mode: entitlement, readiness and grant. Logs one
/// `admission` event per decision (workspace namespace, generation, decision, reason).
box_error admission_gate(self_ptr self, const action_context& ctx);

/// admission_gate without its log line (a second look at the same request).
box_error admission_check(self_ptr self, const action_context& ctx);

/// admission_gate for continuations (no handler to skip): its commit is waited for with
/// commit_then, then `next` runs with the verdict.
void admission_gate_then(self_ptr self, const action_context& ctx, std::function<void(box_error)> next);

/// The whole gate for actions that do not start sessions: the fence advances without
/// waiting for the retired sessions to stop.
box_error tenant_gate(self_ptr self, const action_context& ctx, const payload_facts* facts,
                      const box_error& decode_error, bool sandbox);

// -- sessions, skills and relays --------------------------------------------------------

/// Advances the fence to ctx's generation and runs `next` once the retired sessions
/// have stopped, so a new generation's sandbox never overlaps the old one's. The
/// generation is checked again then: another advance may have come meanwhile.
void advance_then(self_ptr self, const action_context& ctx, std::function<void(box_error)> next);

/// A request waiting on the entry `id` while its slot is reserved: once the session
/// actor exists it is counted as forwarded and handed to `use`.
waiter waiter_for(self_ptr self, const std::string& id,
                  std::function<void(const session_actor&, session_entry&)> use,
                  std::function<void(const box_error&)> fail);

/// Finds or creates the session for `spec` (already normalised, session_id logical),
/// then calls `use` with the session actor, or fails `fail`.
void with_session(self_ptr self, const action_context& ctx, box_spec spec,
                  std::function<void(const session_actor&, session_entry&)> use,
                  std::function<void(const box_error&)> fail);

/// The workspace's skill-store actor, spawned on first use (and again when box_init
/// moved the skills root).
skill_actor skill_store(self_ptr self);

/// Standard-mode or admission-mode preparation of an exec/create spec: the timeout
/// ceiling in both, the policy in admission mode, where `skill_root` is the package of
/// spec.skill_name ("" = none or unavailable), mounted read-only at
/// /workspace/.skills/<name>, and `mounts` the outcome of admit_mounts.
result<box_spec> prepare_spec(self_ptr self, const exec_request& req, const std::string& skill_root,
                              const mounts_outcome& mounts);

/// Removes the entry `key` of `map` and returns its value; nullopt when there is none.
template <class Map, class Key>
std::optional<typename Map::mapped_type> take(Map& map, const Key& key) {
  auto i = map.find(key);
  if (i == map.end())
    return std::nullopt;
  auto value = std::move(i->second);
  map.erase(i);
  return value;
}

/// Runs `job` on the worker pool, then `next(std::optional{job()})` on this actor
/// (pool_waits::run; nullopt when the job threw).
template <class Job, class Next>
void on_pool(self_ptr self, Job job, Next next) {
  auto& st = self->state;
  st.jobs.run(*st.args.pool, caf::actor_cast<supervisor_actor>(self), std::move(job), std::move(next));
}

/// After an asynchronous step of exec or create (a skill lookup, the mount check): the
/// request is judged again against the fence and the grant as they are now, so a
/// newer generation or a lost grant that arrived meanwhile is not outrun. A request
/// that took no such step (all of standard mode) is not judged twice. `next` runs
/// with the verdict.
void recheck_after_wait(self_ptr self, const exec_request& req, std::function<void(box_error)> next);

/// Admission mode only: checks the request's extra mounts against the read-only mount
/// rules on the worker pool (they touch the filesystem), then calls `next` with the
/// outcome on this actor. Without mounts, or in standard mode, calls `next` at once.
void admit_mounts(self_ptr self, const exec_request& req, std::function<void(mounts_outcome)> next);

/// Resolves spec.skill_name in the workspace's own skill store (admission mode only),
/// then calls `next` with the package root ("" when there is none to mount).
void resolve_skill(self_ptr self, const exec_request& req, std::function<void(std::string)> next);

/// The slow path of exec and create: advance the fence (waiting for retired sessions),
/// admit, prepare the spec, then find or start the session and hand it to `use`.
template <class Promise, class Use>
void open_session(self_ptr self, exec_request req, Promise rp, Use use) {
  // A refusal ends the request: the workspace may be idle from here on.
  auto refuse = [self](Promise& p, const box_error& err) {
    p.deliver(to_caf_error(err));
    report_idle(self);
  };
  advance_then(self, req.ctx, [self, rp, req = std::move(req), use, refuse](box_error err) mutable {
    if (err) {
      refuse(rp, err);
      return;
    }
    resolve_skill(self, req, [self, rp, req, use, refuse](std::string skill_root) mutable {
      admit_mounts(self, req, [self, rp, req, use, skill_root, refuse](mounts_outcome mounts) mutable {
        recheck_after_wait(self, req, [self, rp, req, use, skill_root, refuse, mounts](box_error err) mutable {
          if (err) {
            refuse(rp, err);
            return;
          }
          auto spec = prepare_spec(self, req, skill_root, mounts);
          if (!spec) {
            refuse(rp, spec.error());
            return;
          }
          auto prepared = spec.value();
          with_session(
            self, req.ctx, spec.value(),
            [use, prepared](const session_actor& a, session_entry& e) mutable { use(a, e, prepared); },
            [rp](const box_error& e) mutable { rp.deliver(to_caf_error(e)); });
          report_idle(self);
        });
      });
    });
  });
}

struct named_session {
  std::string logical;
  std::string physical;
};

/// The common start of get and delete: the gate, the admission-mode id rule, then the
/// session of this id at the request's generation (BoxSessionNotFoundError if none).
result<named_session> find_session(self_ptr self, const session_request& req);

/// The session of a managed-process action: the gate, then the session of this
/// logical id at the request's generation, running.
result<session_actor> find_process_session(self_ptr self, const process_request& req);

/// box_status of the workspace, with its session capacity (the directory is asked how
/// many sessions the instance has). Not gated by admission, unlike the reference.
caf::result<status_info> workspace_status(self_ptr self, const action_context& ctx);
/// box_list_all_sessions: every live session of this workspace (any generation), with
/// its usage (-1 where a session did not answer) and its info.
caf::result<std::vector<ps_entry>> list_sessions(self_ptr self);

/// box_get_storage_analysis: the host folders on the worker pool, then a probe exec in
/// each of the workspace's sessions (langbot-plugin's own probe and aggregation).
caf::result<storage_report> storage_analysis(self_ptr self, const action_context& ctx);

/// box_set_network_policy / box_get_network_policy (actors/supervisor_network.cpp).
caf::result<network_policy_reply> network_policy_action(self_ptr self, network_policy_request& req);

/// Hands a restored workspace's own network policy to the egress service.
void publish_network_policy(self_ptr self);

/// The relay's handshake checks 4 to 9 (protocol.md §1.4).
relay_verdict relay_check(self_ptr self, const relay_request& req);

struct ready_session {
  session_actor actor;
  box_spec spec;
};

/// The hot path of an exec in standard mode: the fence does not move and the session
/// exists, runs, and is compatible. Anything else takes the full path.
std::optional<ready_session> fast_path(self_ptr self, exec_request& req);

} // namespace boxrt::supervisor_detail
