// The admission plane of one workspace: fence, entitlement snapshot, grants, tombstones,
// forged-field rules and spec normalisation, as plain C++ the supervisor actor drives.
#include "actors/admission.hpp"

#include "messages/network_policy.hpp"

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "backends/readiness_keys.hpp"
#include "messages/base/pytext.hpp"
#include "messages/codec.hpp"
#include "messages/codec_text.hpp"
#include "messages/base/json.hpp"
#include "messages/tenancy.hpp"

namespace boxrt {

namespace {

constexpr std::string_view managed_sandbox_feature = "managed_sandbox";
constexpr std::string_view managed_sandbox_sessions_limit = "managed_sandbox_sessions";
/// The controller's hard cap on a grant's lifetime, whatever the policy says.
constexpr int64_t hard_grant_ttl_sec = 300;
constexpr int64_t us_per_sec = 1'000'000;
constexpr std::string_view workspace_mount = "/workspace";

box_error admission_error(std::string text) {
  return make_box_error(ec::admission, std::move(text));
}

box_error entitlement_error(std::string text) {
  return make_box_error(ec::entitlement_unavailable, std::move(text));
}

/// Whole epoch seconds of `now_us`, rounded down as Python's int(time.time()).
int64_t floor_seconds(int64_t now_us) {
  int64_t s = now_us / us_per_sec;
  if (now_us % us_per_sec < 0)
    --s;
  return s;
}

/// The first reason (require_active order, then feature and limit) why `s` does not
/// grant the managed sandbox at `now_s`, or an empty error when it does.
box_error snapshot_refusal(const entitlement_snapshot& s, int64_t now_s) {
  if (s.status != entitlement_status::active)
    return entitlement_error("Workspace entitlement is not active");
  if (now_s < s.not_before || now_s >= s.expires_at)
    return entitlement_error("Workspace entitlement is not currently valid");
  auto feature = s.features.find(std::string{managed_sandbox_feature});
  if (feature == s.features.end() || !feature->second)
    return entitlement_error("Workspace entitlement does not grant managed_sandbox");
  auto limit = s.limits.find(std::string{managed_sandbox_sessions_limit});
  if (limit == s.limits.end())
    return entitlement_error(
      "Workspace entitlement does not define limit managed_sandbox_sessions");
  if (limit->second != 1)
    return entitlement_error(
      "Workspace entitlement must grant exactly one managed sandbox session");
  return {};
}

/// Expiry (epoch µs) of a grant derived from `s` at `now_us`: the snapshot's own expiry
/// or now + min(policy TTL, 300 s), whichever is first. "now" is taken in whole seconds
/// as the reference controller does, so the result is a whole second.
int64_t derived_expiry_us(const entitlement_snapshot& s, const admission_policy& policy,
                          int64_t now_us) {
  auto ttl = std::min(policy.max_grant_ttl_sec, hard_grant_ttl_sec);
  auto expires_s = std::min(s.expires_at, floor_seconds(now_us) + ttl);
  return expires_s * us_per_sec;
}

admission_grant derived_grant(const std::string& instance, const std::string& workspace,
                              int64_t generation, const entitlement_snapshot& s,
                              int64_t expires_us) {
  admission_grant g;
  g.instance_uuid = instance;
  g.workspace_uuid = workspace;
  g.execution_generation = generation;
  g.entitlement_revision = s.entitlement_revision;
  g.expires_at = expires_us;
  // Fixed by the controller, never taken from the snapshot.
  g.max_sessions = 1;
  g.max_managed_processes = 0;
  return g;
}

grant_receipt receipt_of(const admission_grant& g) {
  grant_receipt r;
  r.workspace_uuid = g.workspace_uuid;
  r.execution_generation = g.execution_generation;
  r.entitlement_revision = g.entitlement_revision;
  r.max_sessions = g.max_sessions;
  r.max_managed_processes = g.max_managed_processes;
  r.expires_at = g.expires_at;
  return r;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty())
      out += ", ";
    out += item;
  }
  return out;
}

/// The admission-mode checks, in the order the readiness error lists failing ones.
constexpr std::array<std::string_view, 14> admission_check_order{
  "configuration",
  "required_backend",
  "workspace_mount",
  "backend_available",
  readiness::isolation_keys[0],
  readiness::isolation_keys[1],
  readiness::isolation_keys[2],
  readiness::isolation_keys[3],
  readiness::storage_keys[0],
  readiness::storage_keys[1],
  readiness::storage_keys[2],
  readiness::storage_keys[3],
  readiness::session_cap,
  readiness::managed_process_cap,
};

constexpr const auto& storage_checks = readiness::storage_keys;
constexpr const auto& isolation_checks = readiness::isolation_keys;

} // namespace

// -- workspace_admission -------------------------------------------------------------

workspace_admission::workspace_admission(std::string instance_uuid,
                                         std::string workspace_uuid)
  : instance_(std::move(instance_uuid)),
    workspace_(std::move(workspace_uuid)),
    ns_(box_namespace(instance_, workspace_)) {
}

box_error workspace_admission::check_generation(int64_t gen) const {
  if (gen < generation_)
    return make_box_error(ec::permission, stale_generation_text);
  return {};
}

bool workspace_admission::observe_generation(int64_t gen) {
  if (gen <= generation_)
    return false;
  // The first observation sets the fence; there is nothing older to retire.
  bool advanced = generation_ != 0;
  generation_ = gen;
  return advanced;
}

box_error workspace_admission::check_forged_fields(const payload_facts& facts,
                                                   std::string_view tenant_path) {
  if (!facts.host_controlled_keys.empty()) {
    auto keys = facts.host_controlled_keys;
    std::sort(keys.begin(), keys.end());
    return admission_error("Managed sandbox policy fields are host-controlled: " + join(keys));
  }
  if (facts.has_session_id) {
    auto sid = py::strip(facts.session_id);
    if (!sid.empty() && sid != "global")
      return admission_error("Managed sandbox session_id is runtime-owned");
  }
  if (facts.network_not_off)
    return admission_error("Managed sandbox network access is disabled");
  auto mount_path = py::strip(facts.mount_path);
  if (!mount_path.empty() && mount_path != workspace_mount)
    return admission_error("Managed sandbox mount_path is runtime-owned");
  auto host_path = py::strip(facts.host_path);
  if (!host_path.empty()
      && (tenant_path.empty() || normalize_path(host_path) != normalize_path(tenant_path)))
    return admission_error("Managed sandbox host_path is runtime-owned");
  if (facts.timeout_not_int)
    return make_box_error(ec::validation, "timeout_sec must be an integer");
  return {};
}

box_error workspace_admission::check_logical_session(std::string_view logical_id,
                                                     const admission_policy& policy) {
  if (py::strip(logical_id) != policy.logical_session_id)
    return admission_error("Managed sandbox session_id is runtime-owned");
  return {};
}

void workspace_admission::revoke_at(int64_t revision) {
  grant_.reset();
  grant_derived_ = false;
  tombstone_ = std::max(tombstone_, revision);
  highest_revision_ = std::max(highest_revision_, revision);
}

result<workspace_admission::snapshot_outcome>
workspace_admission::put_snapshot(const entitlement_snapshot& snapshot, int64_t now_s) {
  if (snapshot.instance_uuid != instance_ || snapshot.workspace_uuid != workspace_)
    return untrusted_refusal(snapshot);
  // Monotonicity and equivocation come before anything authoritative, so a replayed
  // old snapshot (cancelled or not) is refused and changes nothing (admission.md §6.9).
  bool same_revision = false;
  if (snapshot_) {
    if (snapshot.entitlement_revision < snapshot_->entitlement_revision)
      return entitlement_error("Workspace entitlement revision rolled back");
    if (snapshot.entitlement_revision == snapshot_->entitlement_revision) {
      if (snapshot.fingerprint != snapshot_->fingerprint)
        return entitlement_error("Workspace entitlement revision has conflicting contents");
      same_revision = true;
    }
  }
  snapshot_ = snapshot;
  snapshot_outcome out;
  out.receipt.workspace_uuid = workspace_;
  out.receipt.entitlement_revision = snapshot.entitlement_revision;
  if (snapshot_refusal(snapshot, now_s)) {
    // A replay of the stored revision only revokes what is still running.
    bool had_grant = grant_.has_value();
    revoke_at(snapshot.entitlement_revision);
    if (!same_revision || had_grant)
      out.effect = session_effect::stop_all;
  }
  return out;
}

box_error workspace_admission::check_entitlement(const action_context& ctx,
                                                 const admission_policy& policy,
                                                 int64_t now_us, session_effect& effect) {
  effect = session_effect::none;
  if (!snapshot_) {
    // Only host-pushed grants: the caller's floor must be met by the installed grant.
    if (ctx.entitlement_revision > 0
        && (!grant_ || grant_->entitlement_revision < ctx.entitlement_revision))
      return entitlement_error("Workspace entitlement revision rolled back");
    return {};
  }
  const auto& s = *snapshot_;
  if (ctx.entitlement_revision >= 0 && s.entitlement_revision < ctx.entitlement_revision)
    return entitlement_error("Workspace entitlement revision rolled back");
  if (auto refusal = snapshot_refusal(s, floor_seconds(now_us))) {
    revoke_at(s.entitlement_revision);
    effect = session_effect::stop_all;
    return refusal;
  }
  // A revocation at revision R refuses every grant at or below R, the derived one too
  // (admission.md §3.4): only a snapshot at a newer revision brings access back.
  if (s.entitlement_revision <= tombstone_) {
    grant_.reset();
    grant_derived_ = false;
    return admission_error("Sandbox admission grant revision was revoked");
  }
  auto expires_us = derived_expiry_us(s, policy, now_us);
  if (expires_us <= now_us)
    return entitlement_error("Workspace entitlement expired before sandbox admission");
  grant_ = derived_grant(instance_, workspace_, ctx.placement_generation, s, expires_us);
  grant_derived_ = true;
  if (s.entitlement_revision >= highest_revision_) {
    fingerprint_sessions_ = grant_->max_sessions;
    fingerprint_processes_ = grant_->max_managed_processes;
  }
  highest_revision_ = std::max(highest_revision_, s.entitlement_revision);
  highest_generation_ = std::max(highest_generation_, ctx.placement_generation);
  return {};
}

box_error workspace_admission::check_grant(const action_context& ctx,
                                           const admission_policy& policy,
                                           int64_t now_us) const {
  if (!grant_)
    return admission_error("Sandbox admission grant is missing");
  if (grant_->expires_at <= now_us)
    return admission_error("Sandbox admission grant has expired");
  if (grant_->execution_generation != ctx.placement_generation)
    return admission_error("Sandbox admission grant belongs to another execution generation");
  if (grant_->max_sessions <= 0)
    return admission_error("Sandbox admission grant does not permit sessions");
  if (grant_->max_sessions > policy.max_sessions
      || grant_->max_managed_processes > policy.max_managed_processes)
    return admission_error("Sandbox admission grant exceeds the active runtime policy");
  return {};
}

result<workspace_admission::grant_outcome>
workspace_admission::upsert_grant(const admission_grant& grant, const box_config& config,
                                  int64_t now_us) {
  const auto& policy = config.admission;
  if (!policy.required)
    return admission_error("Sandbox admission enforcement is not enabled");
  if (!config.admission_error.empty())
    return make_box_error(ec::readiness,
                          "Invalid sandbox admission configuration: " + config.admission_error);
  if (grant.instance_uuid != instance_)
    return untrusted_refusal(grant);
  if (grant.expires_at <= now_us)
    return admission_error("Cannot install an expired sandbox admission grant");
  if (grant.expires_at > now_us + policy.max_grant_ttl_sec * us_per_sec)
    return admission_error("Sandbox admission grant lifetime exceeds the configured maximum");
  if (grant.max_sessions > policy.max_sessions)
    return admission_error("Sandbox admission grant exceeds the session cap");
  if (grant.max_managed_processes > policy.max_managed_processes)
    return admission_error("Sandbox admission grant exceeds the managed-process cap");
  if (grant.entitlement_revision <= tombstone_)
    return admission_error("Sandbox admission grant revision was revoked");
  if (grant.entitlement_revision < highest_revision_)
    return admission_error("Sandbox admission grant revision is stale");
  if (grant.execution_generation < highest_generation_)
    return admission_error("Sandbox admission execution generation is stale");
  // Refused before installing, so a stale grant never becomes active (protocol.md §5.11).
  if (auto err = check_generation(grant.execution_generation))
    return err;
  if (grant.entitlement_revision == highest_revision_ && fingerprint_sessions_ >= 0
      && (grant.max_sessions != fingerprint_sessions_
          || grant.max_managed_processes != fingerprint_processes_))
    return admission_error("Sandbox admission limits changed without a new entitlement revision");

  grant_outcome out;
  // An expired grant that no timer has reaped yet counts as absent, as after a reap.
  bool had_active = grant_ && grant_->expires_at > now_us;
  if (had_active && grant_->entitlement_revision == grant.entitlement_revision
      && grant_->execution_generation == grant.execution_generation
      && grant_->expires_at > grant.expires_at) {
    // A shorter renewal of the same grant (two concurrent first uses): keep it.
    out.effect = session_effect::none;
  } else {
    bool generation_changed =
      had_active && grant_->execution_generation != grant.execution_generation;
    grant_ = grant;
    grant_derived_ = false;
    highest_revision_ = std::max(highest_revision_, grant.entitlement_revision);
    highest_generation_ = std::max(highest_generation_, grant.execution_generation);
    fingerprint_sessions_ = grant.max_sessions;
    fingerprint_processes_ = grant.max_managed_processes;
    out.effect = (!had_active || generation_changed || grant.max_sessions == 0)
                   ? session_effect::stop_all
                   : session_effect::stop_non_canonical;
  }
  out.receipt = receipt_of(*grant_);
  out.fence_advanced = observe_generation(grant.execution_generation);
  return out;
}

result<workspace_admission::revocation_outcome>
workspace_admission::revoke(const admission_revocation& revocation, const box_config& config) {
  if (!config.admission.required)
    return admission_error("Sandbox admission enforcement is not enabled");
  if (revocation.instance_uuid != instance_)
    return untrusted_refusal(revocation);
  if (revocation.entitlement_revision < std::max(highest_revision_, tombstone_))
    return admission_error("Sandbox admission revocation is stale");
  revoke_at(revocation.entitlement_revision);
  revocation_outcome out;
  out.receipt.workspace_uuid = workspace_;
  out.receipt.entitlement_revision = revocation.entitlement_revision;
  out.effect = session_effect::stop_all;
  return out;
}

int64_t workspace_admission::next_expiry_us() const noexcept {
  return grant_ ? grant_->expires_at : 0;
}

session_effect workspace_admission::on_expiry(int64_t now_us, const admission_policy& policy) {
  if (!grant_ || grant_->expires_at > now_us)
    return session_effect::none;
  if (grant_derived_ && snapshot_ && snapshot_->entitlement_revision > tombstone_
      && !snapshot_refusal(*snapshot_, floor_seconds(now_us))) {
    auto expires_us = derived_expiry_us(*snapshot_, policy, now_us);
    if (expires_us > now_us) {
      grant_ = derived_grant(instance_, workspace_, grant_->execution_generation, *snapshot_,
                             expires_us);
      return session_effect::none;
    }
  }
  // Expiry is not a revocation: no tombstone, a fresh grant may follow at once.
  grant_.reset();
  grant_derived_ = false;
  return session_effect::stop_all;
}

result<box_spec> workspace_admission::normalize(box_spec spec, const admission_policy& policy,
                                                std::string_view tenant_path,
                                                bool skill_available,
                                                const mounts_outcome& mounts) const {
  if (spec.network != network_mode::off)
    return admission_error("Managed sandbox network access is disabled");
  if (spec.mount_path != workspace_mount)
    return admission_error("Managed sandbox mount_path is runtime-owned");
  // Lexically normalised first, so "/workspace/../etc" cannot pass as under /workspace.
  auto workdir = normalize_path(spec.workdir);
  if (workdir != workspace_mount && !workdir.starts_with("/workspace/"))
    return admission_error("Managed sandbox workdir must stay under /workspace");
  if (tenant_path.empty())
    return make_box_error(ec::readiness,
                          "Managed sandbox admission requires box.local.default_workspace");
  if (!spec.host_path.empty() && normalize_path(spec.host_path) != normalize_path(tenant_path))
    return admission_error("Managed sandbox host_path is runtime-owned");
  if (mounts.error)
    return mounts.error;
  if (!spec.skill_name.empty() && !skill_available)
    return admission_error("Managed sandbox skill is unavailable in this Workspace");
  spec.session_id = policy.logical_session_id;
  spec.network = network_mode::off;
  spec.image = default_box_image;
  spec.host_path = std::string{tenant_path};
  spec.host_path_mode = mount_mode::rw;
  spec.mount_path = std::string{workspace_mount};
  // Only the mounts the read-only rules admitted, at their real paths; the read-only
  // skill mount for skill_name is added by the caller, which owns the skill store.
  spec.extra_mounts = mounts.mounts;
  spec.persistent = true;
  spec.timeout_sec = std::min(spec.timeout_sec, policy.max_timeout_sec);
  spec.cpus = policy.cpus;
  spec.memory_mb = policy.memory_mb;
  spec.pids_limit = policy.pids_limit;
  spec.read_only_rootfs = policy.read_only_rootfs;
  spec.workspace_quota_mb = policy.workspace_quota_mb;
  return spec;
}

bool workspace_admission::evictable() const noexcept {
  return !grant_ && !snapshot_ && !network_policy_ && tombstone_ == 0 && highest_revision_ == 0
         && generation_ <= 1;
}

// -- free functions ------------------------------------------------------------------

box_error validate_required_policy(const admission_policy& p, bool testing) {
  if (!p.required)
    return admission_error("Cloud Box sandbox admission must be required");
  if (p.logical_session_id != "global")
    return admission_error("Cloud Box sandbox session ID must be global");
  // "scripted" names the test backend, whose readiness is whatever its config says:
  // it can stand in only where the operator declared a test (server.testing).
  if (p.required_backend != "bwrap" && p.required_backend != "nsjail"
      && !(testing && p.required_backend == "scripted"))
    return admission_error("Cloud Box sandbox backend must be bwrap or nsjail");
  if (p.max_sessions != 1 || p.max_managed_processes != 0)
    return admission_error(
      "Cloud Box sandbox policy must allow one session and zero managed processes");
  if (p.max_grant_ttl_sec > hard_grant_ttl_sec)
    return admission_error("Cloud Box sandbox admission grant TTL must not exceed 300 seconds");
  if (p.workspace_quota_mb <= 0)
    return admission_error("Cloud Box sandbox workspace quota must be a positive integer");
  return {};
}

std::string normalize_path(std::string_view path) {
  if (path.empty())
    return {};
  bool absolute = path.front() == '/';
  std::vector<std::string_view> parts;
  while (!path.empty()) {
    auto slash = path.find('/');
    auto part = path.substr(0, slash);
    path = slash == std::string_view::npos ? std::string_view{} : path.substr(slash + 1);
    if (part.empty() || part == ".")
      continue;
    if (part == "..") {
      if (!parts.empty() && parts.back() != "..")
        parts.pop_back();
      else if (!absolute)
        parts.push_back(part);
      // ".." above the root stays at the root
      continue;
    }
    parts.push_back(part);
  }
  std::string out;
  for (auto part : parts) {
    if (absolute || !out.empty())
      out += '/';
    out += part;
  }
  if (out.empty())
    return absolute ? "/" : ".";
  return out;
}

std::string tenant_workspace_path(const box_config& config, std::string_view box_ns) {
  if (config.local.default_workspace.empty())
    return {};
  std::string path = config.local.default_workspace;
  path += "/tenants/";
  path += box_ns;
  return normalize_path(path);
}

std::string configuration_error(const box_config& config) {
  return config.admission_error.empty() ? std::string{} : "box.admission: " + config.admission_error;
}

runtime_readiness compute_readiness(const box_config& config, const readiness_report& backend,
                                    std::string_view workspace_mount_error, bool unsafe_soft,
                                    bool testing) {
  runtime_readiness r;
  r.config_error = configuration_error(config);
  const auto& policy = config.admission;
  r.admission_mode = config.admission_mode();
  if (!r.admission_mode) {
    r.ready = backend.available;
    r.checks["backend_available"] = backend.available;
    r.error = backend.error;
    return r;
  }
  auto policy_error = config.admission_error.empty() ? validate_required_policy(policy, testing)
                                                     : box_error{};
  r.checks["configuration"] = config.admission_error.empty() && !policy_error;
  // A backend that isolates nothing never makes admission ready, whatever its report
  // says, unless this is a declared test.
  bool right_backend = backend.backend_name == policy.required_backend && (backend.isolating || testing);
  r.checks["required_backend"] = right_backend;
  r.checks["workspace_mount"] = workspace_mount_error.empty();
  // As the reference: the backend's readiness counts only for the required backend.
  r.checks["backend_available"] = right_backend && backend.available;
  auto detail = [&](std::string_view key) {
    if (!right_backend)
      return false;
    auto it = backend.details.find(std::string{key});
    return it != backend.details.end() && it->second;
  };
  for (auto key : isolation_checks)
    r.checks[std::string{key}] = detail(key);
  for (auto key : storage_checks)
    r.checks[std::string{key}] = unsafe_soft || detail(key);
  // 0.7.13's name for the read-only mount quota, beside the older one; never a failing
  // check of its own (the readiness error names the older key once).
  r.checks[readiness::hard_read_only_mount_quota] = r.checks[readiness::hard_skill_storage_quota];
  r.checks[readiness::session_cap] = policy.max_sessions <= 1;
  r.checks[readiness::managed_process_cap] = policy.max_managed_processes == 0;
  r.ready = std::all_of(r.checks.begin(), r.checks.end(),
                        [](const auto& kv) { return kv.second; });
  // A refused policy first: it is why every other check fails.
  if (!r.config_error.empty())
    r.error = r.config_error;
  else if (!backend.error.empty())
    r.error = backend.error;
  else if (!workspace_mount_error.empty())
    r.error = std::string{workspace_mount_error};
  else if (policy_error)
    r.error = policy_error.message;
  return r;
}

box_error readiness_error(const runtime_readiness& r) {
  std::vector<std::string> failing;
  auto add = [&](std::string_view name) {
    auto key = std::string{name};
    if (std::find(failing.begin(), failing.end(), key) == failing.end())
      failing.push_back(std::move(key));
  };
  for (auto name : admission_check_order) {
    auto it = r.checks.find(std::string{name});
    if (it != r.checks.end() && !it->second)
      add(name);
  }
  // Checks outside the known order (none today) still get named, after the known ones;
  // an alias is named by its older key alone.
  for (const auto& [name, ok] : r.checks)
    if (!ok && name != readiness::hard_read_only_mount_quota)
      add(name);
  auto list = failing.empty() ? std::string{"unknown"} : join(failing);
  // One refused value makes every check fail: it is named alone, with the validator's text.
  if (!r.config_error.empty())
    list = "configuration; " + r.config_error;
  return make_box_error(ec::readiness,
                        "Managed sandbox isolation is not ready (failed checks: " + list + ")");
}

// -- durable state ---------------------------------------------------------------------

std::string workspace_admission::durable_state() const {
  json::writer w;
  w.begin_object();
  w.key("v").value(1);
  w.key("instance_uuid").value(instance_);
  w.key("workspace_uuid").value(workspace_);
  w.key("generation").value(generation_);
  w.key("highest_revision").value(highest_revision_);
  w.key("highest_generation").value(highest_generation_);
  w.key("tombstone").value(tombstone_);
  w.key("fingerprint_sessions").value(fingerprint_sessions_);
  w.key("fingerprint_processes").value(fingerprint_processes_);
  w.key("snapshot");
  if (snapshot_)
    w.raw(snapshot_->fingerprint);
  else
    w.null();
  w.key("grant");
  if (grant_ && !grant_derived_) {
    w.begin_object();
    w.key("execution_generation").value(grant_->execution_generation);
    w.key("entitlement_revision").value(grant_->entitlement_revision);
    w.key("expires_at").value(grant_->expires_at);
    w.key("max_sessions").value(grant_->max_sessions);
    w.key("max_managed_processes").value(grant_->max_managed_processes);
    w.end_object();
  } else {
    w.null();
  }
  // Only when set: records of workspaces without one stay as they were.
  if (network_policy_)
    w.key("network_policy").raw(*network_policy_);
  w.end_object();
  return w.take();
}

box_error workspace_admission::restore(std::string_view text) {
  auto bad = [](std::string what) {
    return box_error{ec::runtime, "admission state record: " + std::move(what)};
  };
  auto parsed = decode_text(text, [&](const simdjson::dom::element& root) -> result<workspace_admission> {
    workspace_admission out{instance_, workspace_};
    simdjson::dom::object obj;
    if (root.get_object().get(obj) != simdjson::SUCCESS)
      return bad("not an object");
    int64_t version = 0;
    std::string_view inst, ws;
    if (obj["v"].get_int64().get(version) != simdjson::SUCCESS || version != 1)
      return bad("unknown version");
    if (obj["instance_uuid"].get_string().get(inst) != simdjson::SUCCESS || inst != instance_
        || obj["workspace_uuid"].get_string().get(ws) != simdjson::SUCCESS || ws != workspace_)
      return bad("belongs to another workspace");
    auto integer = [&](const char* key, int64_t& field) {
      return obj[key].get_int64().get(field) == simdjson::SUCCESS;
    };
    if (!integer("generation", out.generation_) || !integer("highest_revision", out.highest_revision_)
        || !integer("highest_generation", out.highest_generation_)
        || !integer("tombstone", out.tombstone_)
        || !integer("fingerprint_sessions", out.fingerprint_sessions_)
        || !integer("fingerprint_processes", out.fingerprint_processes_))
      return bad("a counter is missing");
    simdjson::dom::element snap;
    if (obj["snapshot"].get(snap) == simdjson::SUCCESS && !snap.is_null()) {
      auto decoded = decode_entitlement_snapshot(snap);
      if (!decoded)
        return bad("snapshot: " + decoded.error().message);
      out.snapshot_ = std::move(decoded.value());
    }
    simdjson::dom::object grant;
    if (obj["grant"].get_object().get(grant) == simdjson::SUCCESS) {
      admission_grant g;
      g.instance_uuid = instance_;
      g.workspace_uuid = workspace_;
      if (grant["execution_generation"].get_int64().get(g.execution_generation) != simdjson::SUCCESS
          || grant["entitlement_revision"].get_int64().get(g.entitlement_revision) != simdjson::SUCCESS
          || grant["expires_at"].get_int64().get(g.expires_at) != simdjson::SUCCESS
          || grant["max_sessions"].get_int64().get(g.max_sessions) != simdjson::SUCCESS
          || grant["max_managed_processes"].get_int64().get(g.max_managed_processes)
               != simdjson::SUCCESS)
        return bad("grant is incomplete");
      out.grant_ = g;
    }
    simdjson::dom::element policy;
    if (obj["network_policy"].get(policy) == simdjson::SUCCESS && !policy.is_null()) {
      auto decoded = decode_network_policy(policy, "network_policy");
      if (!decoded)
        return bad(decoded.error().message);
      out.network_policy_ = encode_network_policy(decoded.value());
    }
    return out;
  });
  if (!parsed)
    return parsed.error();
  *this = std::move(parsed.value());
  return {};
}

} // namespace boxrt
