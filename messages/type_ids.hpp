// The one CAF header of messages/: type IDs of every actor message type, the atoms,
// and the `inspect` overloads that make each message serializable, so any actor can
// later run on another node through CAF's middleman.
#pragma once

#include <caf/meta/type_name.hpp>
#include <caf/type_id.hpp>

#include "messages/models.hpp"
#include "messages/requests.hpp"

namespace boxrt {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, box_error& x) {
  return f(caf::meta::type_name("box_error"), x.code, x.message);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, mount_spec& x) {
  return f(caf::meta::type_name("mount_spec"), x.host_path, x.mount_path, x.mode, x.content_digest,
           x.manifest_path, x.runtime_owned);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, box_spec& x) {
  return f(caf::meta::type_name("box_spec"), x.cmd, x.workdir, x.timeout_sec, x.network,
           x.session_id, x.env, x.image, x.host_path, x.host_path_mode, x.mount_path,
           x.extra_mounts, x.skill_name, x.persistent, x.cpus, x.memory_mb, x.pids_limit,
           x.read_only_rootfs, x.workspace_quota_mb);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_info& x) {
  return f(caf::meta::type_name("session_info"), x.session_id, x.backend_name,
           x.backend_session_id, x.image, x.network, x.host_path, x.host_path_mode,
           x.mount_path, x.persistent, x.cpus, x.memory_mb, x.pids_limit, x.read_only_rootfs,
           x.workspace_quota_mb, x.created_at, x.last_used_at, x.managed_processes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, exec_result& x) {
  return f(caf::meta::type_name("exec_result"), x.session_id, x.backend_name, x.status,
           x.exit_code, x.stdout_text, x.stderr_text, x.duration_ms);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, process_spec& x) {
  return f(caf::meta::type_name("process_spec"), x.process_id, x.command, x.args, x.env, x.cwd,
           x.memory_mb);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, process_info& x) {
  return f(caf::meta::type_name("process_info"), x.session_id, x.process_id, x.status,
           x.command, x.args, x.cwd, x.env_keys, x.attached, x.started_at, x.exited_at,
           x.exit_code, x.stderr_preview);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, action_context& x) {
  return f(caf::meta::type_name("action_context"), x.instance_uuid, x.workspace_uuid,
           x.placement_generation, x.entitlement_revision);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, admission_policy& x) {
  return f(caf::meta::type_name("admission_policy"), x.required, x.logical_session_id,
           x.required_backend, x.max_sessions, x.max_managed_processes, x.max_grant_ttl_sec,
           x.max_timeout_sec, x.cpus, x.memory_mb, x.pids_limit, x.read_only_rootfs,
           x.workspace_quota_mb, x.readiness_cache_sec, x.entitlements_file);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, admission_grant& x) {
  return f(caf::meta::type_name("admission_grant"), x.instance_uuid, x.workspace_uuid,
           x.execution_generation, x.entitlement_revision, x.expires_at, x.max_sessions,
           x.max_managed_processes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, admission_revocation& x) {
  return f(caf::meta::type_name("admission_revocation"), x.instance_uuid, x.workspace_uuid,
           x.entitlement_revision);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, entitlement_snapshot& x) {
  return f(caf::meta::type_name("entitlement_snapshot"), x.instance_uuid, x.workspace_uuid,
           x.entitlement_revision, x.status, x.not_before, x.expires_at, x.features, x.limits,
           x.plan_name, x.subscription_started_at, x.plan_revision, x.monthly_bonus_credits,
           x.fingerprint);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, entitlement_receipt& x) {
  return f(caf::meta::type_name("entitlement_receipt"), x.workspace_uuid,
           x.entitlement_revision, x.revoked_sessions);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, grant_receipt& x) {
  return f(caf::meta::type_name("grant_receipt"), x.workspace_uuid, x.execution_generation,
           x.entitlement_revision, x.max_sessions, x.max_managed_processes, x.expires_at);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, revocation_receipt& x) {
  return f(caf::meta::type_name("revocation_receipt"), x.workspace_uuid,
           x.entitlement_revision);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, runtime_limits& x) {
  return f(caf::meta::type_name("runtime_limits"), x.max_sessions, x.max_managed_processes,
           x.max_completed_processes, x.max_admission_records, x.max_rpc_file_bytes,
           x.completed_process_retention_sec, x.session_ttl_sec, x.max_output_bytes,
           x.max_timeout_sec, x.max_sessions_per_workspace, x.io_read_bps, x.io_write_bps,
           x.io_read_iops, x.io_write_iops, x.max_idle_workspaces, x.warm_pool,
           x.action_margin_sec);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, local_config& x) {
  return f(caf::meta::type_name("local_config"), x.host_root, x.default_workspace,
           x.allowed_mount_roots, x.skills_root, x.skills_quota_mb, x.nsjail_path);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, scripted_config& x) {
  return f(caf::meta::type_name("scripted_config"), x.available, x.ready_keys);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, box_config& x) {
  return f(caf::meta::type_name("box_config"), x.backend, x.limits, x.local, x.admission,
           x.admission_error, x.scripted);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, readiness_report& x) {
  return f(caf::meta::type_name("readiness_report"), x.backend_name, x.available, x.isolating,
           x.details, x.limits_mechanism, x.text_details, x.error);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_stats& x) {
  return f(caf::meta::type_name("session_stats"), x.session_id, x.backend_name, x.cpu_usec,
           x.memory_bytes, x.workspace_bytes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, status_info& x) {
  return f(caf::meta::type_name("status_info"), x.backend_name, x.backend_available,
           x.active_sessions, x.managed_processes, x.session_ttl_sec, x.limits, x.capacity_limit,
           x.capacity_used, x.capacity_remaining, x.sessions);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, storage_entry& x) {
  return f(caf::meta::type_name("storage_entry"), x.key, x.path, x.kind, x.parent_key, x.scope,
           x.exists, x.size_bytes, x.file_count, x.error_count);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, storage_report& x) {
  return f(caf::meta::type_name("storage_report"), x.directories, x.active_sessions,
           x.managed_processes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, payload_facts& x) {
  return f(caf::meta::type_name("payload_facts"), x.host_controlled_keys, x.has_session_id,
           x.session_id, x.network_not_off, x.mount_path,
           x.host_path, x.timeout_not_int);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, exec_request& x) {
  return f(caf::meta::type_name("exec_request"), x.ctx, x.spec, x.facts, x.decode_error);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_request& x) {
  return f(caf::meta::type_name("session_request"), x.ctx, x.session_id, x.decode_error);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, skill_request& x) {
  return f(caf::meta::type_name("skill_request"), x.ctx, x.action, x.data_json, x.file_path,
           x.decode_error, x.file_bytes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, skill_job& x) {
  return f(caf::meta::type_name("skill_job"), x.action, x.data_json, x.file_path, x.admission);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, skill_outcome& x) {
  return f(caf::meta::type_name("skill_outcome"), x.error, x.data_json);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, process_request& x) {
  return f(caf::meta::type_name("process_request"), x.ctx, x.session_id, x.process_id, x.spec,
           x.decode_error);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, relay_request& x) {
  return f(caf::meta::type_name("relay_request"), x.instance_uuid, x.workspace_uuid, x.generation,
           x.session_id, x.process_id, x.attach_wait_ms, x.pump);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, relay_verdict& x) {
  return f(caf::meta::type_name("relay_verdict"), x.status, x.error);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, process_outcome& x) {
  return f(caf::meta::type_name("process_outcome"), x.error);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, start_outcome& x) {
  return f(caf::meta::type_name("start_outcome"), x.error, x.backend_session_id);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, exec_outcome& x) {
  return f(caf::meta::type_name("exec_outcome"), x.error, x.result);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, instance_settings& x) {
  return f(caf::meta::type_name("instance_settings"), x.config,
           x.backend_name, x.backend_available, x.backend_reason, x.backend_report, x.ready,
           x.admission_mode, x.checks, x.readiness_error, x.probed, x.unsafe_soft_storage,
           x.transfer_dir);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, health_info& x) {
  return f(caf::meta::type_name("health_info"), x.settings, x.sessions, x.workspaces);
}

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

CAF_END_TYPE_ID_BLOCK(boxrt)
