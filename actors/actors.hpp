// Every typed actor interface of boxrt, in one place. Where an exec goes:
// net (connection) -> directory -> supervisor (one per workspace) -> session ->
// worker pool -> backend.
#pragma once

#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <caf/actor.hpp>
#include <caf/replies_to.hpp>
#include <caf/result.hpp>
#include <caf/typed_actor.hpp>

#include <boxrt/messages/type_ids.hpp>

namespace boxrt {

/// Who asked for a streamed exec (box_exec_stream; the connection actor): the session
/// says when the command starts, then sends its frames (docs/streaming.md).
using stream_consumer_actor = caf::typed_actor<
  caf::reacts_to<stream_atom, uint64_t>,
  caf::reacts_to<stream_atom, uint64_t, stream_chunk>>;

/// One physical session: its mailbox is the serialized command stream.
using session_actor = caf::typed_actor<
  // Runs one command after every earlier one; replies with the caller's logical id.
  caf::replies_to<exec_atom, box_spec>::with<exec_result>,
  // box_exec_stream: the same command stream; the consumer (the sender) gets
  // (stream_atom, token) when the command starts, then (stream_atom, token, stream_chunk)
  // per frame within its credit, then this reply (docs/streaming.md).
  caf::replies_to<xstream_atom, box_spec, stream_params>::with<stream_end>,
  // Worker pool: a frame of the running streamed command (its token).
  caf::reacts_to<stream_atom, uint64_t, stream_chunk>,
  // From the consumer only: that many more frames (stream_params.token), or stop.
  caf::reacts_to<credit_atom, uint64_t, int64_t>,
  caf::reacts_to<cancel_atom, uint64_t>,
  // box_get_storage_analysis's probe: runs only while the session is idle and live, with
  // the last command's mounts, and is no use of the session (its TTL runs on); a busy
  // session answers with an error instead of queueing it.
  caf::replies_to<probe_atom, box_spec>::with<exec_result>,
  // A file action on the session's workspace (docs/files.md): on the worker pool at
  // once, beside a running command, never queued behind it.
  caf::replies_to<file_atom, file_op, file_limits>::with<file_result>,
  // Worker pool: the file action with this token finished.
  caf::reacts_to<fdone_atom, uint64_t, file_outcome>,
  // Replies once the sandbox has started (box_create_session).
  caf::replies_to<create_atom>::with<session_info>,
  // Current info, answered at once.
  caf::replies_to<caf::get_atom>::with<session_info>,
  // What the session uses now (cgroup CPU and memory, quota image bytes), read on the
  // worker pool; -1 where unknown (no sandbox yet, or no such accounting).
  caf::replies_to<stats_atom>::with<session_stats>,
  // Worker pool: the usage reading with this token finished.
  caf::reacts_to<stats_atom, uint64_t, session_stats>,
  // Stops now: interrupts a running command, fails queued ones with the error, stops
  // the backend session, then replies and quits.
  caf::replies_to<stop_atom, box_error>::with<bool>,
  // Worker pool: the backend start finished.
  caf::reacts_to<started_atom, start_outcome>,
  // Worker pool: the command with this token finished.
  caf::reacts_to<done_atom, uint64_t, exec_outcome>,
  // Worker pool: the backend session was stopped.
  caf::reacts_to<stopped_atom>,
  // Managed processes of this session (standard mode).
  caf::replies_to<pstart_atom, process_spec>::with<process_info>,
  caf::replies_to<pget_atom, std::string>::with<process_info>,
  caf::replies_to<pstop_atom, std::string>::with<std::string>,
  // Worker pool: the managed-process job with this token finished.
  caf::reacts_to<pdone_atom, uint64_t, process_outcome>,
  // A relay actor (the sender) holds the stdio of this process until it ends; one at a
  // time, a later one waits at most `uint64_t` ms (then process_conflict).
  // With `bool` set, the relay is elsewhere and a pump beside the process carries the
  // stdio to it (actors/cluster/stdio_pump.hpp).
  caf::replies_to<attach_atom, std::string, uint64_t, bool>::with<bool>,
  // Self-sent: the attach wait with this token ran out.
  caf::reacts_to<expire_atom, uint64_t>,
  // Self-sent TTL timer.
  caf::reacts_to<reap_atom>>;

/// The skill store of one workspace: runs skill jobs on the worker pool one at a time,
/// so two workspaces never wait on each other (the reference holds one process-wide
/// lock). Replies with the action's data JSON.
using skill_actor = caf::typed_actor<
  caf::replies_to<skill_atom, skill_job>::with<std::string>,
  // The package root of the skill with this name (admission mode's skill mount); an
  // unknown skill is an error. Queued with the jobs, so it sees every write before it.
  caf::replies_to<resolve_atom, std::string>::with<std::string>,
  // Worker pool: the job with this token finished.
  caf::reacts_to<done_atom, uint64_t, skill_outcome>>;

/// One tenant action between actors: its atom, its request and its reply.
template <class Atom, class Request, class Reply>
struct tenant_route {
  using atom = Atom;
  using request = Request;
  using reply = Reply;
};

template <class... Routes>
struct route_list {};

/// Every tenant action, once. tenant_actor's interface, the directory's forwarders
/// (actors/directory.cpp), the cluster router's routes (actors/cluster/router.cpp) and
/// the wire's round trips (net/rpc/dispatch.cpp reads each action's request and reply
/// from here) are derived from this list: a new tenant action is its model, an entry
/// here, the supervisor's handler and, for the wire, its name and decoding.
using tenant_routes = route_list<
  // box_exec.
  tenant_route<exec_atom, exec_request, exec_result>,
  // box_exec_stream: its frames go to the caller meanwhile (docs/streaming.md).
  tenant_route<xstream_atom, exec_stream_request, stream_end>,
  // box_read_file, box_write_file, box_list_files, box_stat_file, box_remove_file,
  // box_make_dir, box_move_file (docs/files.md).
  tenant_route<file_atom, file_request, file_result>,
  // box_create_session.
  tenant_route<create_atom, exec_request, session_info>,
  // box_get_session.
  tenant_route<caf::get_atom, session_request, session_info>,
  // box_delete_session: replies with the session_id as sent.
  tenant_route<caf::delete_atom, session_request, std::string>,
  // box_start_managed_process / box_get_managed_process: the process's info.
  tenant_route<pstart_atom, process_request, process_info>,
  tenant_route<pget_atom, process_request, process_info>,
  // box_stop_managed_process: replies with the process_id.
  tenant_route<pstop_atom, process_request, std::string>,
  // The stdio relay's handshake checks 4 to 9 (§1.4).
  tenant_route<relay_atom, relay_request, relay_verdict>,
  // The upgraded relay (the sender, an actor that lives as long as the socket) attaches
  // to the process; true once it holds the stdio (§1.4, one attacher at a time).
  tenant_route<attach_atom, relay_request, bool>,
  // Skill actions (§2.4); replies with the action's data JSON.
  tenant_route<skill_atom, skill_request, std::string>,
  // box_get_sessions: this workspace at this exact generation.
  tenant_route<list_atom, action_context, std::vector<session_info>>,
  // box_status for this placement (never admission-gated).
  tenant_route<status_atom, action_context, status_info>,
  // box_get_storage_analysis.
  tenant_route<storage_atom, action_context, storage_report>,
  // box_put_workspace_entitlement: replies after revoked sessions stopped.
  tenant_route<entitle_atom, entitlement_snapshot, entitlement_receipt>,
  // box_upsert_sandbox_admission_grant.
  tenant_route<grant_atom, admission_grant, grant_receipt>,
  // box_revoke_sandbox_admission_grant: replies after the sessions stopped.
  tenant_route<revoke_atom, admission_revocation, revocation_receipt>,
  // box_set_network_policy / box_get_network_policy: replies once a new policy is
  // durable and in force in the workspace's running sandboxes (docs/network.md).
  tenant_route<netpol_atom, network_policy_request, network_policy_reply>>;

namespace detail {

template <class List>
struct tenant_interface;

template <class... Routes>
struct tenant_interface<route_list<Routes...>> {
  using type = caf::typed_actor<typename caf::replies_to<typename Routes::atom, typename Routes::request>::template with<
    typename Routes::reply>...>;
};

} // namespace detail

/// Tenant actions of one workspace: every entry of tenant_routes.
using tenant_actor = detail::tenant_interface<tenant_routes>::type;

namespace detail {

template <class Atom, class List>
struct route_by_atom;

template <class Atom, class Route, class... Rest>
struct route_by_atom<Atom, route_list<Route, Rest...>>
  : std::conditional_t<std::is_same_v<typename Route::atom, Atom>, std::type_identity<Route>,
                       route_by_atom<Atom, route_list<Rest...>>> {};

} // namespace detail

/// The entry of tenant_routes whose atom is `Atom` (the wire's action table reads its
/// request and reply types from it, net/rpc/dispatch.cpp).
template <class Atom>
using tenant_route_of = typename detail::route_by_atom<Atom, tenant_routes>::type;

/// One handler per entry of tenant_routes, as a tuple: each calls
/// `serve(std::type_identity<Reply>{}, atom, request&)`, which returns caf::result<Reply>.
template <class Serve>
auto tenant_handlers(Serve serve) {
  return []<class... Routes>(Serve serve, route_list<Routes...>) {
    return std::make_tuple(
      [serve](typename Routes::atom atom, typename Routes::request& req) -> caf::result<typename Routes::reply> {
        return serve(std::type_identity<typename Routes::reply>{}, atom, req);
      }...);
  }(std::move(serve), tenant_routes{});
}

/// A typed behaviour of tenant_handlers(serve) and the actor's other handlers.
template <class Behavior, class Serve, class... Handlers>
Behavior with_tenant_handlers(Serve serve, Handlers... others) {
  return std::apply([&](auto&&... tenant) { return Behavior{std::move(tenant)..., std::move(others)...}; },
                    tenant_handlers(std::move(serve)));
}

/// The runtime's public handle (app/runtime.hpp spawn_runtime, docs/embedding.md): what
/// the network side, an embedding application and another cluster node may ask. On one
/// node it is the directory, on a cluster node the router.
using runtime_actor = tenant_actor::extend<
  // Readiness and backend info.
  caf::replies_to<health_atom>::with<health_info>,
  // box_init: a new config (already merged, validated and path-resolved by the caller).
  caf::replies_to<init_atom, box_config>::with<bool>,
  // Stops every session of every workspace; replies with the count.
  caf::replies_to<shutdown_atom>::with<int64_t>,
  // box_list_all_sessions (boxctl ps): every session of this node, at most `int64_t`.
  caf::replies_to<ps_atom, int64_t>::with<ps_report>>;

/// One workspace supervisor: the admission plane and owner of its sessions.
using supervisor_actor = tenant_actor::extend<
  // New instance settings (config, readiness) from the directory.
  caf::reacts_to<settings_atom, instance_settings>,
  // Directory asks to evict; true means "nothing of safety meaning held, quitting".
  caf::replies_to<evict_atom>::with<bool>,
  // A session decided to close itself (timeout): forget it now.
  caf::reacts_to<closing_atom, std::string>,
  // A non-persistent session was idle past its TTL after `uint64_t` commands.
  caf::reacts_to<idle_atom, std::string, uint64_t>,
  // Self-sent grant-expiry timer carrying its generation token.
  caf::reacts_to<expire_atom, uint64_t>,
  // Worker pool: blocking work `uint64_t` of this supervisor finished (on_pool).
  caf::reacts_to<done_atom, uint64_t>,
  // Stops every session; replies with how many were stopped.
  caf::replies_to<shutdown_atom>::with<int64_t>,
  // Its sessions and what each uses (box_list_all_sessions).
  caf::replies_to<ps_atom>::with<std::vector<ps_entry>>>;

/// The directory: instance-level state (trusted instance, config, readiness, global
/// session slots) and the one owner of the workspace -> supervisor map. Its handlers
/// beyond runtime_actor are internal (its supervisors' and its own).
using directory_actor = runtime_actor::extend<
  // A supervisor asks for a session slot of the global cap.
  caf::replies_to<slot_atom>::with<bool>,
  // A supervisor asks how many slots of the global cap are in use.
  caf::replies_to<slot_atom, caf::get_atom>::with<int64_t>,
  // A session slot is free again.
  caf::reacts_to<release_atom>,
  // A supervisor's evictability changed.
  caf::reacts_to<idle_atom, std::string, bool>,
  // Self-sent: run a background readiness probe.
  caf::reacts_to<probe_atom>,
  // Worker pool: a readiness probe finished (backend report, workspace-mount error).
  caf::reacts_to<probed_atom, readiness_report, std::string>,
  // Worker pool: a job whose continuation waits here finished (pool_waits).
  caf::reacts_to<done_atom, uint64_t>>;

/// A cluster node's front door (actors/cluster/router.cpp, docs/cluster.md "Routing"): the
/// runtime's interface, each tenant action routed to its workspace's owner (this node's
/// directory or another node's router), plus its own internal handlers.
using router_actor = runtime_actor::extend<
  // Self-sent every tick: fail-closed checks, takeover waits, re-resolution.
  caf::reacts_to<tick_atom>,
  // Worker pool: who owns a workspace (ns, owner, epoch, lease, preferred, error).
  caf::reacts_to<resolved_atom, std::string, std::string, int64_t, int64_t, std::string, std::string>,
  // Linker: a verified link to a member (node_id, address, its router).
  caf::reacts_to<link_atom, std::string, std::string, caf::actor>,
  // Linker: the members registered under a live lease now.
  caf::reacts_to<members_atom, std::set<std::string>>,
  // A peer dropped its link to the node named here: drop ours too, so the dialing side
  // (the smaller node_id) dials again.
  caf::reacts_to<link_atom, std::string>,
  // Linker: a box_init another node stored in etcd (applied here, not stored again).
  caf::reacts_to<init_atom, box_config, int64_t>,
  // Worker pool: the box_init with this token was stored in etcd ("" or why not).
  caf::reacts_to<init_atom, uint64_t, std::string>,
  // Worker pool: a job whose continuation waits here finished (pool_waits).
  caf::reacts_to<done_atom, uint64_t>>;

/// The process's end of a stdio relay whose WebSocket is on another cluster node
/// (actors/cluster/stdio_pump.hpp has the protocol).
using stdio_pump_actor = caf::typed_actor<
  // From the relay: that many more stdout bytes may be sent.
  caf::reacts_to<credit_atom, uint64_t>,
  // From the relay: a line for stdin, written in order.
  caf::reacts_to<stdin_atom, std::string>,
  // Its own reader and stdin writer (anonymous, with the pump's key): a chunk of
  // stdout, the end (a stdio_end value), a stdin line of that many bytes written.
  caf::reacts_to<stdout_atom, uint64_t, std::string>,
  caf::reacts_to<stdend_atom, uint64_t, int32_t>,
  caf::reacts_to<written_atom, uint64_t, uint64_t, bool>>;

/// A stdio relay's holder actor (net/ws/relay_socket.cpp): it lives as long as the
/// relay's socket, attaches to the process, and on a cluster speaks with the pump.
using stdio_relay_actor = caf::typed_actor<
  // Nothing: the holder waits for the exit its socket sends.
  caf::reacts_to<stop_atom>,
  // Self-sent: the pump did not come in time.
  caf::reacts_to<expire_atom>,
  // From the pump: first, so the relay knows it; then stdout chunks, stdin lines
  // written (false: stdin is closed) and the end (a stdio_end value).
  caf::reacts_to<pump_atom>,
  caf::reacts_to<stdout_atom, std::string>,
  caf::reacts_to<written_atom, uint64_t, bool>,
  caf::reacts_to<stdend_atom, int32_t>,
  // From its socket (anonymous, with the relay's key): passed on to the pump.
  caf::reacts_to<credit_atom, uint64_t, uint64_t>,
  caf::reacts_to<stdin_atom, uint64_t, std::string>>;

/// What a cluster node publishes on cluster.listen. The dialer first asks for a
/// challenge (its node id in, a fresh nonce out); its hello then names the dialing node,
/// its address and its router, with its certificate and its signature over the challenge
/// (backends/cluster/identity.hpp). Only when the certificate is the named node's, of the
/// cluster's CA, the signature its key's, and that node is registered at that address,
/// does the gate link its own router to it and answer with its node id and router. One
/// connection carries both directions: of two members, the one with the smaller node_id
/// dials.
using gate_actor = caf::typed_actor<
  caf::replies_to<hello_atom, std::string>::with<std::string>,
  caf::replies_to<hello_atom, std::string, std::string, caf::actor, std::string, std::string,
                  std::string>::with<std::string, caf::actor>>;

} // namespace boxrt
