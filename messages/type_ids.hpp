// The one CAF header of messages/: type IDs of every actor message type, the atoms,
// and the `inspect` overloads that make each message serializable, so any actor can
// later run on another node through CAF's middleman.
#pragma once

#include <caf/meta/type_name.hpp>
#include <caf/type_id.hpp>

#include <boxrt/messages/files.hpp>
#include <boxrt/messages/models.hpp>
#include <boxrt/messages/requests.hpp>

/// CAF's `inspect` for a message type: every member in declaration order. The
/// structured binding must name all of them, so a member added to a type and not here
/// does not compile (it would otherwise silently stay behind on another node).
#define BOXRT_INSPECT(T, ...)                                  \
  template <class Inspector>                                    \
  typename Inspector::result_type inspect(Inspector& f, T& x) { \
    auto& [__VA_ARGS__] = x;                                    \
    return f(caf::meta::type_name(#T), __VA_ARGS__);            \
  }

namespace boxrt {

BOXRT_INSPECT(box_error, code, message)

BOXRT_INSPECT(mount_spec, host_path, mount_path, mode, content_digest, manifest_path, runtime_owned)

BOXRT_INSPECT(box_spec, cmd, workdir, timeout_sec, network, session_id, env, image, host_path,
              host_path_mode, mount_path, extra_mounts, skill_name, persistent, cpus, memory_mb,
              pids_limit, read_only_rootfs, workspace_quota_mb, network_scope)

BOXRT_INSPECT(session_info, session_id, backend_name, backend_session_id, image, network, host_path,
              host_path_mode, mount_path, persistent, cpus, memory_mb, pids_limit, read_only_rootfs,
              workspace_quota_mb, created_at, last_used_at, managed_processes)

BOXRT_INSPECT(exec_result, session_id, backend_name, status, exit_code, stdout_text, stderr_text,
              duration_ms)

BOXRT_INSPECT(process_spec, process_id, command, args, env, cwd, memory_mb)

BOXRT_INSPECT(process_info, session_id, process_id, status, command, args, cwd, env_keys, attached,
              started_at, exited_at, exit_code, stderr_preview)

BOXRT_INSPECT(stream_params, token, credit, keepalive_ms, max_chunk_bytes, max_output_bytes,
              stop_grace_ms)

BOXRT_INSPECT(stream_chunk, stream, data, offset)

BOXRT_INSPECT(stream_end, result, ended, stdout_bytes, stderr_bytes, frames)

BOXRT_INSPECT(file_op, verb, path, to, offset, length, content, mode, append, truncate, make_parents,
              recursive, overwrite, depth, encoding)

BOXRT_INSPECT(file_entry, path, type, size, mode, mtime, target)

BOXRT_INSPECT(file_result, verb, path, to, encoding, offset, data, length, eof, size, written, entries, truncated)

BOXRT_INSPECT(file_outcome, result, error)

BOXRT_INSPECT(action_context, instance_uuid, workspace_uuid, placement_generation,
              entitlement_revision)

BOXRT_INSPECT(admission_policy, required, logical_session_id, required_backend, max_sessions,
              max_managed_processes, max_grant_ttl_sec, max_timeout_sec, cpus, memory_mb,
              pids_limit, read_only_rootfs, workspace_quota_mb, readiness_cache_sec,
              entitlements_file)

BOXRT_INSPECT(admission_grant, instance_uuid, workspace_uuid, execution_generation,
              entitlement_revision, expires_at, max_sessions, max_managed_processes)

BOXRT_INSPECT(admission_revocation, instance_uuid, workspace_uuid, entitlement_revision)

BOXRT_INSPECT(entitlement_snapshot, instance_uuid, workspace_uuid, entitlement_revision, status,
              not_before, expires_at, features, limits, plan_name, subscription_started_at,
              plan_revision, monthly_bonus_credits, fingerprint)

BOXRT_INSPECT(entitlement_receipt, workspace_uuid, entitlement_revision, revoked_sessions)

BOXRT_INSPECT(network_policy_request, instance_uuid, workspace_uuid, set, policy, profile)

BOXRT_INSPECT(network_policy_reply, workspace_uuid, policy, effective, source)

BOXRT_INSPECT(grant_receipt, workspace_uuid, execution_generation, entitlement_revision,
              max_sessions, max_managed_processes, expires_at)

BOXRT_INSPECT(revocation_receipt, workspace_uuid, entitlement_revision)

BOXRT_INSPECT(runtime_limits, max_sessions, max_managed_processes, max_completed_processes,
              max_admission_records, max_rpc_file_bytes, completed_process_retention_sec,
              session_ttl_sec, max_output_bytes, max_timeout_sec, max_sessions_per_workspace,
              io_read_bps, io_write_bps, io_read_iops, io_write_iops, max_idle_workspaces,
              warm_pool, action_margin_sec)

BOXRT_INSPECT(local_config, host_root, default_workspace, allowed_mount_roots, skills_root,
              skills_quota_mb, nsjail_path)

BOXRT_INSPECT(scripted_config, available, ready_keys)

BOXRT_INSPECT(network_settings, default_policy, profiles, resolvers, max_connections, max_connections_total,
              max_lookups,
              header_timeout_ms, connect_timeout_ms, lookup_timeout_ms)

BOXRT_INSPECT(box_config, backend, limits, local, admission, admission_error, scripted, network)

BOXRT_INSPECT(readiness_report, backend_name, available, isolating, details, limits_mechanism,
              text_details, error)

BOXRT_INSPECT(session_stats, session_id, backend_name, cpu_usec, memory_bytes, workspace_bytes)

BOXRT_INSPECT(ps_entry, instance_uuid, workspace_uuid, generation, stats, memory_mb, created_at, last_used_at)

BOXRT_INSPECT(ps_report, sessions, workspaces, truncated)

BOXRT_INSPECT(status_info, backend_name, backend_available, active_sessions, managed_processes,
              session_ttl_sec, limits, capacity_limit, capacity_used, capacity_remaining, sessions)

BOXRT_INSPECT(storage_entry, key, path, kind, parent_key, scope, exists, size_bytes, file_count,
              error_count)

BOXRT_INSPECT(storage_report, directories, active_sessions, managed_processes)

BOXRT_INSPECT(payload_facts, host_controlled_keys, has_session_id, session_id, network_not_off,
              mount_path, host_path, timeout_not_int)

BOXRT_INSPECT(exec_request, ctx, spec, facts, decode_error)

BOXRT_INSPECT(exec_stream_request, exec, params)

BOXRT_INSPECT(file_limits, max_call_bytes, max_list_entries, max_list_depth)

BOXRT_INSPECT(file_request, ctx, session_id, op, limits, facts, decode_error)

BOXRT_INSPECT(session_request, ctx, session_id, decode_error)

BOXRT_INSPECT(skill_request, ctx, action, data_json, file_path, decode_error, file_bytes)

BOXRT_INSPECT(skill_job, action, data_json, file_path, admission)

BOXRT_INSPECT(skill_outcome, error, data_json)

BOXRT_INSPECT(process_request, ctx, session_id, process_id, spec, decode_error)

BOXRT_INSPECT(relay_request, instance_uuid, workspace_uuid, generation, session_id, process_id,
              attach_wait_ms, pump)

BOXRT_INSPECT(relay_verdict, status, error)

BOXRT_INSPECT(process_outcome, error)

BOXRT_INSPECT(start_outcome, error, backend_session_id)

BOXRT_INSPECT(exec_outcome, error, result, stream)

BOXRT_INSPECT(instance_settings, config, backend_name, backend_available, backend_reason,
              backend_report, ready, admission_mode, checks, readiness_error, probed,
              unsafe_soft_storage, transfer_dir)

BOXRT_INSPECT(health_info, settings, sessions, workspaces)

} // namespace boxrt

CAF_BEGIN_TYPE_ID_BLOCK(boxrt, caf::first_custom_type_id)

  CAF_ADD_TYPE_ID(boxrt, (boxrt::box_error))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::box_spec))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::session_info))
  CAF_ADD_TYPE_ID(boxrt, (std::vector<boxrt::session_info>))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::exec_result))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::process_spec))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::process_info))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::action_context))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::admission_grant))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::admission_revocation))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::entitlement_snapshot))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::entitlement_receipt))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::network_policy_request))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::network_policy_reply))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::grant_receipt))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::revocation_receipt))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::box_config))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::readiness_report))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::status_info))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::exec_request))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::session_request))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::start_outcome))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::exec_outcome))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::instance_settings))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::health_info))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::skill_request))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::skill_job))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::skill_outcome))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::process_request))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::relay_request))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::relay_verdict))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::process_outcome))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::storage_report))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::session_stats))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::ps_entry))
  CAF_ADD_TYPE_ID(boxrt, (std::vector<boxrt::ps_entry>))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::ps_report))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::stream_params))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::stream_chunk))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::stream_end))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::exec_stream_request))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::file_op))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::file_entry))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::file_result))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::file_limits))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::file_request))
  CAF_ADD_TYPE_ID(boxrt, (boxrt::file_outcome))

  // Atoms are verbs; CAF 0.17 atoms are at most 10 characters.
  CAF_ADD_ATOM(boxrt, boxrt, exec_atom, "exec")
  CAF_ADD_ATOM(boxrt, boxrt, create_atom, "create")
  CAF_ADD_ATOM(boxrt, boxrt, list_atom, "list")
  CAF_ADD_ATOM(boxrt, boxrt, status_atom, "status")
  CAF_ADD_ATOM(boxrt, boxrt, stop_atom, "stop")
  CAF_ADD_ATOM(boxrt, boxrt, started_atom, "started")
  CAF_ADD_ATOM(boxrt, boxrt, done_atom, "done")
  CAF_ADD_ATOM(boxrt, boxrt, stopped_atom, "stopped")
  CAF_ADD_ATOM(boxrt, boxrt, reap_atom, "reap")
  CAF_ADD_ATOM(boxrt, boxrt, idle_atom, "idle")
  CAF_ADD_ATOM(boxrt, boxrt, closing_atom, "closing")
  CAF_ADD_ATOM(boxrt, boxrt, grant_atom, "grant")
  CAF_ADD_ATOM(boxrt, boxrt, revoke_atom, "revoke")
  CAF_ADD_ATOM(boxrt, boxrt, entitle_atom, "entitle")
  CAF_ADD_ATOM(boxrt, boxrt, settings_atom, "settings")
  CAF_ADD_ATOM(boxrt, boxrt, evict_atom, "evict")
  CAF_ADD_ATOM(boxrt, boxrt, slot_atom, "slot")
  CAF_ADD_ATOM(boxrt, boxrt, release_atom, "release")
  CAF_ADD_ATOM(boxrt, boxrt, expire_atom, "expire")
  CAF_ADD_ATOM(boxrt, boxrt, probe_atom, "probe")
  CAF_ADD_ATOM(boxrt, boxrt, probed_atom, "probed")
  CAF_ADD_ATOM(boxrt, boxrt, health_atom, "health")
  CAF_ADD_ATOM(boxrt, boxrt, shutdown_atom, "shutdown")
  CAF_ADD_ATOM(boxrt, boxrt, init_atom, "init")
  CAF_ADD_ATOM(boxrt, boxrt, skill_atom, "skill")
  CAF_ADD_ATOM(boxrt, boxrt, pstart_atom, "pstart")
  CAF_ADD_ATOM(boxrt, boxrt, pget_atom, "pget")
  CAF_ADD_ATOM(boxrt, boxrt, pstop_atom, "pstop")
  CAF_ADD_ATOM(boxrt, boxrt, pdone_atom, "pdone")
  CAF_ADD_ATOM(boxrt, boxrt, relay_atom, "relay")
  CAF_ADD_ATOM(boxrt, boxrt, attach_atom, "attach")
  CAF_ADD_ATOM(boxrt, boxrt, resolve_atom, "resolve")
  CAF_ADD_ATOM(boxrt, boxrt, storage_atom, "storage")
  CAF_ADD_ATOM(boxrt, boxrt, stats_atom, "stats")
  // net/: one inbound WebSocket TEXT message for a connection actor.
  CAF_ADD_ATOM(boxrt, boxrt, frame_atom, "frame")
  // net/cluster/: links between nodes and the router's own work.
  CAF_ADD_ATOM(boxrt, boxrt, hello_atom, "hello")
  CAF_ADD_ATOM(boxrt, boxrt, link_atom, "link")
  CAF_ADD_ATOM(boxrt, boxrt, members_atom, "members")
  CAF_ADD_ATOM(boxrt, boxrt, resolved_atom, "resolved")
  CAF_ADD_ATOM(boxrt, boxrt, tick_atom, "tick")
  CAF_ADD_ATOM(boxrt, boxrt, reset_atom, "reset")
  // A stdio relay whose WebSocket is on another cluster node and the pump on the
  // process's node (actors/cluster/stdio_pump.hpp).
  CAF_ADD_ATOM(boxrt, boxrt, pump_atom, "pump")
  CAF_ADD_ATOM(boxrt, boxrt, stdout_atom, "stdout")
  CAF_ADD_ATOM(boxrt, boxrt, stdin_atom, "stdin")
  CAF_ADD_ATOM(boxrt, boxrt, credit_atom, "credit")
  CAF_ADD_ATOM(boxrt, boxrt, written_atom, "written")
  CAF_ADD_ATOM(boxrt, boxrt, stdend_atom, "stdend")
  // A streamed exec (box_exec_stream, docs/streaming.md): the request, its frames (and
  // the session's first word to the consumer), and the consumer's cancel.
  CAF_ADD_ATOM(boxrt, boxrt, xstream_atom, "xstream")
  CAF_ADD_ATOM(boxrt, boxrt, stream_atom, "stream")
  CAF_ADD_ATOM(boxrt, boxrt, cancel_atom, "cancel")
  // A file action on a session's workspace (docs/files.md) and its worker job's end.
  CAF_ADD_ATOM(boxrt, boxrt, file_atom, "file")
  CAF_ADD_ATOM(boxrt, boxrt, fdone_atom, "fdone")
  CAF_ADD_ATOM(boxrt, boxrt, ps_atom, "ps")
  CAF_ADD_ATOM(boxrt, boxrt, audited_atom, "audited")
  // box_set_network_policy / box_get_network_policy (docs/network.md).
  CAF_ADD_ATOM(boxrt, boxrt, netpol_atom, "netpol")

CAF_END_TYPE_ID_BLOCK(boxrt)
