// Every typed actor interface of boxrt, in one place. Where an exec goes:
// net (connection) -> directory -> supervisor (one per workspace) -> session ->
// worker pool -> backend.
#pragma once

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "messages/type_ids.hpp"

namespace boxrt {

/// One physical session: its mailbox is the serialized command stream.
using session_actor = caf::typed_actor<
  // Runs one command after every earlier one; replies with the caller's logical id.
  caf::replies_to<exec_atom, box_spec>::with<exec_result>,
  // box_get_storage_analysis's probe: runs only while the session is idle and live, with
  // the last command's mounts, and is no use of the session (its TTL runs on); a busy
  // session answers with an error instead of queueing it.
  caf::replies_to<probe_atom, box_spec>::with<exec_result>,
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
  // stdio to it (actors/stdio_pump.hpp).
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

/// Tenant actions of one workspace (also the directory's routing surface).
using tenant_actor = caf::typed_actor<
  // box_exec.
  caf::replies_to<exec_atom, exec_request>::with<exec_result>,
  // box_create_session.
  caf::replies_to<create_atom, exec_request>::with<session_info>,
  // box_get_session.
  caf::replies_to<caf::get_atom, session_request>::with<session_info>,
  // box_delete_session: replies with the session_id as sent.
  caf::replies_to<caf::delete_atom, session_request>::with<std::string>,
  // box_start_managed_process / box_get_managed_process: the process's info.
  caf::replies_to<pstart_atom, process_request>::with<process_info>,
  caf::replies_to<pget_atom, process_request>::with<process_info>,
  // box_stop_managed_process: replies with the process_id.
  caf::replies_to<pstop_atom, process_request>::with<std::string>,
  // The stdio relay's handshake checks 4 to 9 (§1.4).
  caf::replies_to<relay_atom, relay_request>::with<relay_verdict>,
  // The upgraded relay (the sender, an actor that lives as long as the socket) attaches
  // to the process; true once it holds the stdio (§1.4, one attacher at a time).
  caf::replies_to<attach_atom, relay_request>::with<bool>,
  // Skill actions (§2.4); replies with the action's data JSON.
  caf::replies_to<skill_atom, skill_request>::with<std::string>,
  // box_get_sessions: this workspace at this exact generation.
  caf::replies_to<list_atom, action_context>::with<std::vector<session_info>>,
  // box_status for this placement (never admission-gated).
  caf::replies_to<status_atom, action_context>::with<status_info>,
  // box_get_storage_analysis.
  caf::replies_to<storage_atom, action_context>::with<storage_report>,
  // box_put_workspace_entitlement: replies after revoked sessions stopped.
  caf::replies_to<entitle_atom, entitlement_snapshot>::with<entitlement_receipt>,
  // box_upsert_sandbox_admission_grant.
  caf::replies_to<grant_atom, admission_grant>::with<grant_receipt>,
  // box_revoke_sandbox_admission_grant: replies after the sessions stopped.
  caf::replies_to<revoke_atom, admission_revocation>::with<revocation_receipt>>;

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
  caf::replies_to<shutdown_atom>::with<int64_t>>;

/// The directory: instance-level state (trusted instance, config, readiness, global
/// session slots) and the one owner of the workspace -> supervisor map.
using directory_actor = tenant_actor::extend<
  // Readiness and backend info.
  caf::replies_to<health_atom>::with<health_info>,
  // box_init: a new config (already merged, validated and path-resolved by the caller).
  caf::replies_to<init_atom, box_config>::with<bool>,
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
  caf::reacts_to<done_atom, uint64_t>,
  // Stops every session of every workspace; replies with the count.
  caf::replies_to<shutdown_atom>::with<int64_t>>;

} // namespace boxrt
