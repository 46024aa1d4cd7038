// The admission plane of one workspace as plain C++ (no CAF): generation fence,
// entitlement snapshot and resolver rules, grants, tombstones, forged-field rules and
// spec normalisation. The workspace supervisor actor owns one and acts on its verdicts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "messages/base/heap_optional.hpp"
#include "messages/error.hpp"
#include "messages/models.hpp"
#include "messages/requests.hpp"

namespace boxrt {

/// What the caller must do to the workspace's sessions after a state change.
enum class session_effect : uint8_t {
  none,
  /// Stop every session of the workspace (revocation, new grant, generation change).
  stop_all,
  /// Stop every session except the canonical `global` of the grant's generation.
  stop_non_canonical,
};

class workspace_admission {
 public:
  workspace_admission(std::string instance_uuid, std::string workspace_uuid);

  const std::string& instance_uuid() const noexcept { return instance_; }
  const std::string& workspace_uuid() const noexcept { return workspace_; }
  /// "ws-<24 hex>" of this workspace.
  const std::string& box_ns() const noexcept { return ns_; }

  // -- generation fence (protocol.md §4.8) --------------------------------------------

  /// Highest placement generation seen; 0 when none.
  int64_t generation() const noexcept { return generation_; }

  /// PermissionError "Stale Box placement generation" when `gen` < the current one.
  /// Changes nothing.
  box_error check_generation(int64_t gen) const;

  /// Stores `gen` when higher. Returns true when the fence advanced (callers then
  /// retire the sessions and cancel the requests of older generations).
  bool observe_generation(int64_t gen);

  // -- forged-field rules of admission mode (admission.md §4.4) ----------------------

  /// Checks, in order: host-controlled keys, session_id, network, extra_mounts,
  /// mount_path, host_path (must equal `tenant_path` after lexical normalisation),
  /// then timeout_sec type. Returns the first violation or an empty error.
  static box_error check_forged_fields(const payload_facts& facts, std::string_view tenant_path);

  /// Admission-mode rule for get/delete: the logical id must be the policy's `global`.
  static box_error check_logical_session(std::string_view logical_id,
                                         const admission_policy& policy);

  // -- entitlement snapshots (contract §3, admission.md §2) ---------------------------

  struct snapshot_outcome {
    entitlement_receipt receipt;  // revoked_sessions left 0: the supervisor counts them
    session_effect effect = session_effect::none;
  };

  /// Applies the resolver rules: scope (instance and workspace must match), rollback,
  /// equivocation. An accepted snapshot that does not grant the managed sandbox at
  /// `now_s` (status, window, feature, limit) is stored and revokes: grant dropped,
  /// tombstone and highest revision raised to its revision, effect stop_all.
  result<snapshot_outcome> put_snapshot(const entitlement_snapshot& snapshot, int64_t now_s);

  bool has_snapshot() const noexcept { return snapshot_.has_value(); }
  const heap_optional<entitlement_snapshot>& snapshot() const noexcept { return snapshot_; }

  /// Entitlement gate of a sandbox action in admission mode. With a snapshot it checks
  /// the revision floor of `ctx`, require_active, the feature and the limit, then derives
  /// (or renews) the grant for ctx's generation: revision = snapshot revision,
  /// max_sessions 1, max_managed_processes 0, expires = min(snapshot expiry,
  /// now + min(policy.max_grant_ttl_sec, 300 s)). Without a snapshot only the floor is
  /// checked against the host-pushed grant. Errors are EntitlementUnavailableError; an
  /// authoritative refusal (the snapshot says no) also sets `effect` to stop_all.
  box_error check_entitlement(const action_context& ctx, const admission_policy& policy,
                              int64_t now_us, session_effect& effect);

  /// Grant gate (protocol.md §4.9.5 table, after readiness): missing, expired, other
  /// generation, no sessions, over the active policy.
  box_error check_grant(const action_context& ctx, const admission_policy& policy,
                        int64_t now_us) const;

  // -- host-pushed grants and revocations (protocol.md §4.9.3, §4.9.4) ---------------

  struct grant_outcome {
    grant_receipt receipt;
    session_effect effect = session_effect::none;
    bool fence_advanced = false;
  };

  /// Installs a grant with every rule of §4.9.3, in order. boxrt checks the fence
  /// before installing (a grant older than the fence is refused with PermissionError
  /// "Stale Box placement generation" and nothing changes), then advances the fence
  /// to the grant's generation.
  result<grant_outcome> upsert_grant(const admission_grant& grant, const box_config& config,
                                     int64_t now_us);

  struct revocation_outcome {
    revocation_receipt receipt;
    session_effect effect = session_effect::stop_all;
  };

  result<revocation_outcome> revoke(const admission_revocation& revocation,
                                    const box_config& config);

  const heap_optional<admission_grant>& grant() const noexcept { return grant_; }
  int64_t tombstone() const noexcept { return tombstone_; }
  int64_t highest_revision() const noexcept { return highest_revision_; }

  // -- expiry ------------------------------------------------------------------------

  /// When the active grant expires (epoch µs), or 0 without a grant.
  int64_t next_expiry_us() const noexcept;

  /// Timer callback: a due snapshot-derived grant is renewed while the snapshot still
  /// grants; otherwise a due grant is dropped and the effect is stop_all.
  session_effect on_expiry(int64_t now_us, const admission_policy& policy);

  // -- admission-mode spec normalisation (protocol.md §4.9.2) -------------------------

  /// Checks network, mount_path, workdir, host_path (== tenant_path when given), the
  /// extra mounts (`mounts`: the outcome of admit_read_only_mounts on the worker pool,
  /// reported at this point of the order; its mounts replace spec.extra_mounts) and
  /// skill_name (`skill_available` tells whether it resolves), then forces
  /// session_id = policy.logical_session_id, image, host mount, persistence, timeout
  /// clamp and the policy's resources.
  result<box_spec> normalize(box_spec spec, const admission_policy& policy,
                             std::string_view tenant_path, bool skill_available,
                             const mounts_outcome& mounts = {}) const;

  /// True when nothing of safety meaning is held: no grant, no snapshot, no tombstone,
  /// no revision seen and a fence at most 1. Only such records may be evicted.
  bool evictable() const noexcept;

  // -- egress policy (docs/network.md) --------------------------------------------------

  /// The workspace's own network policy (canonical JSON), kept with its admission
  /// state; empty when it has none (the operator's default applies).
  const heap_optional<std::string>& network_policy() const noexcept { return network_policy_; }
  void set_network_policy(std::optional<std::string> policy) {
    if (policy)
      network_policy_ = std::move(*policy);
    else
      network_policy_.reset();
  }

  // -- durable state (contract §4.11) ---------------------------------------------------

  /// What must survive a restart, as JSON: fence, highest revision and generation,
  /// tombstone, the stored snapshot and a host-pushed grant. A grant derived from the
  /// snapshot is left out: it is derived again, and its expiry moves on every use.
  std::string durable_state() const;

  /// Loads what durable_state() wrote (before any request). Error when `json` is not
  /// such a record or belongs to another workspace; nothing changes then.
  box_error restore(std::string_view json);

 private:
  std::string instance_;
  std::string workspace_;
  std::string ns_;
  int64_t generation_ = 0;
  // On the heap: most workspaces have neither, and there may be 100,000 of them.
  heap_optional<entitlement_snapshot> snapshot_;
  heap_optional<admission_grant> grant_;
  heap_optional<std::string> network_policy_;
  bool grant_derived_ = false;
  int64_t highest_revision_ = 0;
  int64_t highest_generation_ = 0;
  int64_t tombstone_ = 0;
  int64_t fingerprint_sessions_ = -1;
  int64_t fingerprint_processes_ = -1;

  /// The authoritative-loss bookkeeping shared by snapshots and the entitlement gate:
  /// drops the grant and raises the tombstone and the highest revision to `revision`.
  void revoke_at(int64_t revision);
};

/// The Cloud policy rules of admission.md §3.6 items 2-7 (BoxAdmissionError), with
/// boxrt's backend rule "bwrap or nsjail". Empty when `p` is a valid required policy.
box_error validate_required_policy(const admission_policy& p, bool testing = false);

/// Lexical normalisation of an absolute path: collapses "//", ".", ".." and a trailing
/// "/". Used to compare host paths without touching the filesystem.
std::string normalize_path(std::string_view path);

/// `<default_workspace>/tenants/<box_ns>` (lexically normalised), or "" when
/// there is no default workspace.
std::string tenant_workspace_path(const box_config& config, std::string_view box_ns);

/// Instance-level readiness (protocol.md §4.9.6 with contract §4.1): standard or
/// grant_enforced, the checks, and the error text.
struct runtime_readiness {
  bool ready = false;
  bool admission_mode = false;
  std::map<std::string, bool> checks;
  std::string error;
  /// The admission policy boxd was given and refused (configuration_error()); when set,
  /// the readiness error names it instead of every check it made fail.
  std::string config_error;
};

/// "box.admission: <the validator's text>" when the config's admission policy was
/// refused (it then fails closed); "" when it was accepted.
std::string configuration_error(const box_config& config);

/// Combines the backend's report with the config. `workspace_mount_error` is the
/// result of the (blocking) default-workspace check, "" when it passed. `unsafe_soft`
/// is LANGBOT_BOX_ALLOW_UNSAFE_SOFT_STORAGE_LIMITS.
runtime_readiness compute_readiness(const box_config& config, const readiness_report& backend,
                                    std::string_view workspace_mount_error, bool unsafe_soft,
                                    bool testing = false);

/// "Managed sandbox isolation is not ready (failed checks: a, b)" or "(failed checks:
/// unknown)", as BoxReadinessError.
box_error readiness_error(const runtime_readiness& r);

} // namespace boxrt
