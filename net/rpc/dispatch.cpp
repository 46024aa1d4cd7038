// The action table of /rpc/ws (protocol.md §2): context rules, decoding, one directory
// round trip per action and the reference's reply shapes. Blocking work (upload files,
// box_init's default workspace, the shared-workspace probe) runs on the worker pool and
// comes back to the connection actor as a message (run_blocking, env.jobs).
#include "net/rpc/action_support.hpp"

namespace boxrt::net {

using namespace rpc_detail;

namespace {

// -- tenant actions -------------------------------------------------------------------

void exec_like(connection_env& env, const element& data, const action_context& ctx,
               done_fn done, bool create) {
  exec_request req;
  req.ctx = ctx;
  req.facts = extract_payload_facts(data);
  auto spec = decode_box_spec(data, !create);
  if (spec) {
    req.spec = std::move(spec.value());
  } else if (spec.error().code == ec::key) {
    // The reference reads data["session_id"] before anything else.
    return done(failure(spec.error()));
  } else {
    // Carried, not replied: in admission mode a forged field outranks a decode error.
    req.decode_error = spec.error();
  }
  if (create)
    ask<session_info>(env, done, encoded<session_info>(), create_atom_v, std::move(req));
  else
    ask<exec_result>(env, done, encoded<exec_result>(), exec_atom_v, std::move(req));
}

void do_exec(connection_env& env, const element& data, const action_context* ctx, done_fn done) {
  exec_like(env, data, *ctx, std::move(done), false);
}

void do_create(connection_env& env, const element& data, const action_context* ctx,
               done_fn done) {
  exec_like(env, data, *ctx, std::move(done), true);
}

/// data.session_id for get/delete: missing replies KeyError at once; a non-string is
/// carried as a decode error (the fence check still comes first).
std::optional<session_request> session_req(const element& data, const action_context& ctx,
                                           const done_fn& done) {
  auto v = lookup(data, "session_id");
  if (!v) {
    done(failure(key_error("session_id")));
    return std::nullopt;
  }
  session_request req;
  req.ctx = ctx;
  std::string_view s;
  if (v->get_string().get(s) == json_ok)
    req.session_id = std::string{s};
  else
    req.decode_error = {ec::validation, "session_id must be a string"};
  return req;
}

void do_get_session(connection_env& env, const element& data, const action_context* ctx,
                    done_fn done) {
  auto req = session_req(data, *ctx, done);
  if (!req)
    return;
  ask<session_info>(env, done, encoded<session_info>(), caf::get_atom_v, std::move(*req));
}

void do_delete_session(connection_env& env, const element& data, const action_context* ctx,
                       done_fn done) {
  auto req = session_req(data, *ctx, done);
  if (!req)
    return;
  ask<std::string>(
    env, done,
    [](const std::string& id) {
      json::writer w;
      w.begin_object();
      w.key("deleted").value(id);
      w.end_object();
      return w.take();
    },
    caf::delete_atom_v, std::move(*req));
}

void do_get_sessions(connection_env& env, const element&, const action_context* ctx,
                     done_fn done) {
  ask<std::vector<session_info>>(
    env, done,
    [](const std::vector<session_info>& xs) {
      json::writer w;
      w.begin_object();
      w.key("sessions").begin_array();
      for (const auto& x : xs)
        w.raw(to_json(x));
      w.end_array();
      w.end_object();
      return w.take();
    },
    list_atom_v, *ctx);
}

void do_status(connection_env& env, const element&, const action_context* ctx, done_fn done) {
  ask<status_info>(env, done, status_json, status_atom_v, *ctx);
}

void do_storage(connection_env& env, const element&, const action_context* ctx, done_fn done) {
  ask<storage_report>(env, done, storage_json, storage_atom_v, *ctx);
}

/// Skill actions (§2.4): routed through the workspace's supervisor (fence, and the
/// entitlement gate in admission mode) to its skill-store actor. The data travels as
/// JSON text and is decoded on the worker pool. A zip action's uploaded file is looked
/// up here, in this connection's transfer folder, and handed over by path; the store
/// deletes it once read.
template <const char* Action>
void do_skill(connection_env& env, const element& data, const action_context* ctx, done_fn done) {
  skill_request req;
  req.ctx = *ctx;
  req.action = Action;
  req.data_json = simdjson::minify(data);
  std::string_view action{Action};
  if (action == "box_preview_skill_zip" || action == "box_install_skill_zip") {
    auto key_v = lookup(data, "file_key");
    std::string_view key;
    if (!key_v)
      req.decode_error = {ec::validation, "'file_key'"};
    else if (key_v->get_string().get(key) != json_ok || !valid_file_key(key))
      req.decode_error = {ec::validation, "Invalid file transfer key"};
    else if (env.transfer_dir.empty() || !env.transfers || !env.transfers->keys.contains(key))
      req.decode_error = {ec::validation, "Uploaded file " + std::string{key} + " was not found"};
    else {
      req.file_path = env.transfer_dir + "/" + std::string{key};
      env.transfers->keys.erase(env.transfers->keys.find(key)); // consumed
    }
  }
  ask<std::string>(env, done, [](const std::string& json) { return json; }, skill_atom_v,
                   std::move(req));
}

constexpr char list_skills[] = "box_list_skills";
constexpr char get_skill[] = "box_get_skill";
constexpr char create_skill[] = "box_create_skill";
constexpr char update_skill[] = "box_update_skill";
constexpr char delete_skill[] = "box_delete_skill";
constexpr char scan_skill_directory[] = "box_scan_skill_directory";
constexpr char list_skill_files[] = "box_list_skill_files";
constexpr char read_skill_file[] = "box_read_skill_file";
constexpr char write_skill_file[] = "box_write_skill_file";
constexpr char preview_skill_zip[] = "box_preview_skill_zip";
constexpr char install_skill_zip[] = "box_install_skill_zip";

void not_implemented(std::string_view action, done_fn& done) {
  done(failure({ec::box_error, std::string{action} + " is not implemented by this boxd yet"}));
}

/// Managed processes (§2.3, §4.7): refused in admission mode as the reference's Cloud
/// host does (admission.md §4.5, checked before anything else); in standard mode routed
/// to the session's actor, which runs the process inside the session's sandbox.
template <const char* Action>
void do_managed_process(connection_env& env, const element& data, const action_context* ctx,
                        done_fn done) {
  std::string action{Action};
  // Read before the round trip: `data` does not outlive this call.
  process_request req;
  req.ctx = *ctx;
  auto sid = lookup(data, "session_id");
  if (!sid)
    return done(failure(key_error("session_id")));
  std::string_view text;
  if (sid->get_string().get(text) == json_ok)
    req.session_id = std::string{text};
  else
    req.decode_error = {ec::validation, "session_id must be a string"};
  if (action == "box_start_managed_process") {
    auto spec_el = lookup(data, "spec");
    if (!spec_el)
      return done(failure(key_error("spec")));
    auto spec = decode_process_spec(*spec_el);
    if (spec)
      req.spec = std::move(spec.value());
    else if (!req.decode_error)
      req.decode_error = spec.error();
    req.process_id = req.spec.process_id;
  } else if (auto pid = lookup(data, "process_id"); pid && !pid->is_null()) {
    if (pid->get_string().get(text) == json_ok)
      req.process_id = std::string{text};
    else if (!req.decode_error)
      req.decode_error = {ec::validation, "process_id must be a string"};
  }
  // The supervisor refuses them in admission mode (before any other of its checks).
  if (action == "box_start_managed_process")
    return ask<process_info>(env, done, encoded<process_info>(), pstart_atom_v, std::move(req));
  if (action == "box_get_managed_process")
    return ask<process_info>(env, done, encoded<process_info>(), pget_atom_v, std::move(req));
  ask<std::string>(
    env, done,
    [](const std::string& pid) {
      json::writer w;
      w.begin_object();
      w.key("stopped").value(pid);
      w.end_object();
      return w.take();
    },
    pstop_atom_v, std::move(req));
}

constexpr char start_process[] = "box_start_managed_process";
constexpr char get_process[] = "box_get_managed_process";
constexpr char stop_process[] = "box_stop_managed_process";

// -- the table ------------------------------------------------------------------------

enum class scope : uint8_t { host, tenant };

struct action_def {
  std::string_view name;
  scope kind;
  handler fn; // null: routed, not implemented yet
};

constexpr action_def action_table[] = {
  // Host-control (protocol.md §2.2) and boxrt's entitlement push (contract §3).
  {"__ping", scope::host, do_ping},
  {"__file_chunk", scope::host, do_file_chunk},
  {"box_health", scope::host, do_health},
  {"box_get_backend_info", scope::host, do_backend_info},
  {"box_init", scope::host, do_init},
  {"box_upsert_sandbox_admission_grant", scope::host, do_grant},
  {"box_revoke_sandbox_admission_grant", scope::host, do_revoke},
  {"box_verify_shared_workspace", scope::host, do_verify},
  {"box_shutdown", scope::host, do_shutdown},
  {"box_put_workspace_entitlement", scope::host, do_entitlement},
  // Tenant sandbox actions (§2.3).
  {"box_status", scope::tenant, do_status},
  {"box_get_storage_analysis", scope::tenant, do_storage},
  {"box_exec", scope::tenant, do_exec},
  {"box_create_session", scope::tenant, do_create},
  {"box_get_session", scope::tenant, do_get_session},
  {"box_get_sessions", scope::tenant, do_get_sessions},
  {"box_delete_session", scope::tenant, do_delete_session},
  {"box_start_managed_process", scope::tenant, do_managed_process<start_process>},
  {"box_get_managed_process", scope::tenant, do_managed_process<get_process>},
  {"box_stop_managed_process", scope::tenant, do_managed_process<stop_process>},
  // Tenant skill actions (§2.4).
  {"box_list_skills", scope::tenant, do_skill<list_skills>},
  {"box_get_skill", scope::tenant, do_skill<get_skill>},
  {"box_create_skill", scope::tenant, do_skill<create_skill>},
  {"box_update_skill", scope::tenant, do_skill<update_skill>},
  {"box_delete_skill", scope::tenant, do_skill<delete_skill>},
  {"box_scan_skill_directory", scope::tenant, do_skill<scan_skill_directory>},
  {"box_list_skill_files", scope::tenant, do_skill<list_skill_files>},
  {"box_read_skill_file", scope::tenant, do_skill<read_skill_file>},
  {"box_write_skill_file", scope::tenant, do_skill<write_skill_file>},
  {"box_preview_skill_zip", scope::tenant, do_skill<preview_skill_zip>},
  {"box_install_skill_zip", scope::tenant, do_skill<install_skill_zip>},
};

const action_def* find_action(std::string_view name) {
  for (const auto& def : action_table)
    if (def.name == name)
      return &def;
  return nullptr;
}

} // namespace

bool known_action(std::string_view action) {
  return find_action(action) != nullptr;
}

void dispatch(connection_env& env, std::string_view action, const element& data,
              const action_context* context, std::function<void(reply)> done) {
  const auto* def = find_action(action);
  if (def == nullptr)
    return done(failure({ec::value, "Action " + std::string{action} + " not found"}));
  // protocol.md §2.1: a host-control context is optional but must be of the trusted
  // instance, then it is dropped; a tenant action needs one.
  if (context != nullptr) {
    if (!is_trusted(env, context->instance_uuid))
      return done(failure(not_trusted()));
  } else if (def->kind == scope::tenant) {
    return done(failure(
      {ec::permission, "Box tenant action requires a trusted Workspace context"}));
  }
  if (def->fn == nullptr)
    return not_implemented(action, done);
  env.action = def->name;
  def->fn(env, data, def->kind == scope::tenant ? context : nullptr, std::move(done));
}

void run_blocking(connection_env& env, std::function<reply()> job, std::function<void(reply)> done) {
  run_blocking_on(runner(env), std::move(job), std::move(done));
}

} // namespace boxrt::net
