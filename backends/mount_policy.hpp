// Default-deny host mounts (contract §4.7): every host path a session binds —
// host_path and each extra mount — must resolve under box.local.allowed_mount_roots
// and outside the denylist. Blocking (realpath): call it on the worker pool only.
#pragma once

#include <string>
#include <vector>

#include "messages/error.hpp"
#include "messages/models.hpp"

namespace boxrt {

/// Resolves box.local as the reference does: host_root absolute; default_workspace
/// relative to host_root (default "<host_root>/default"); allowed roots absolute
/// (default [host_root]); skills_root relative to host_root (default "skills").
local_config resolve_local(const local_config& local);

/// What a workspace may not mount: the trees of other workspaces and boxd's own folders.
/// Paths are absolute and resolved (resolve_local's); make_mount_fence fills it.
struct mount_fence {
  /// The requesting workspace's namespace (`ws-<24 hex>`), "" when none is known.
  std::string own_ns;
  /// Its workspace tree ("" = none): never counted as another workspace's.
  std::string own_tree;
  /// `<default_workspace>/tenants`: every folder in it is one workspace's tree.
  std::string workspace_tenants;
  /// boxd's state, its images and the transfer folder: refused when a source is, holds
  /// or lies inside one of them.
  std::vector<std::string> sealed;
};

/// The fence of workspace `own_ns` whose tree is `own_tree`, from the resolved local
/// config (`<host_root>/state`, `<host_root>/images`) and boxd's transfer folder.
mount_fence make_mount_fence(const local_config& resolved, std::string own_ns, const std::string& own_tree,
                             const std::string& transfer_dir);

/// The one refusal of admission mode for a read-only mount that is, holds or lies inside
/// another workspace's tree, a tenants folder, boxd's state or the transfer folder, or a
/// content-addressed mount not at its workspace's published revision (a boxd extension:
/// docs/compatibility.md). It names no path and comes before any existence check.
inline constexpr const char* foreign_mount_text =
  "Managed sandbox read-only mount is unavailable to this Workspace";

/// Checks spec.host_path and every extra mount with a mode other than none, except
/// boxd's own (runtime_owned: a skill of the workspace's store). With a `fence`, an
/// extra mount inside another workspace's tree is blocked too (standard mode's one rule
/// beyond the reference's: the host stays trusted otherwise).
/// BoxValidationError texts: "<field> <path> is blocked for security",
/// "host_path mounting is disabled because no allowed_mount_roots are configured",
/// "<field> is outside allowed_mount_roots: <roots joined by ', '>".
box_error check_spec_mounts(const box_spec& spec, const local_config& local, const mount_fence* fence = nullptr);

/// Admission mode's read-only extra mounts (langbot-plugin 0.7.13's
/// `_normalize_admitted_extra_mounts`), checked in the reference's order, the first
/// failure winning: at most `max_admitted_read_only_mounts`; roots required; then per
/// mount: read-only, source a directory, source under a root, a manifest needs a digest,
/// is a file and lies under a root, the target under /workspace/ unless the mount is
/// content-addressed, targets unique. Returns the mounts with host_path and
/// manifest_path replaced by their real paths. `roots` are resolved allowed mount roots.
/// BoxAdmissionError texts are the reference's. Blocking (realpath, stat).
///
/// The `fence` comes first for each source and manifest, before anything on disk is
/// looked at but the links on the way: a content-addressed source must be exactly
/// `…/tenants/<own_ns>/.langbot-skill-store/revisions/<hex>/package` (LangBot 4.11's
/// immutable revisions) outside every workspace tree, its manifest exactly the sibling
/// `manifest.json`; any other source or manifest must not be, hold or lie inside what
/// the fence keeps out. Both refusals are foreign_mount_text.
result<std::vector<mount_spec>> admit_read_only_mounts(const std::vector<mount_spec>& mounts,
                                                       const std::vector<std::string>& roots,
                                                       const mount_fence& fence);

inline constexpr size_t max_admitted_read_only_mounts = 256;

/// Creates the resolved default workspace under an allowed root (protocol.md §4.10.2
/// step 8). BoxValidationError texts: "box.local.default_workspace must point to a
/// directory on the Box runtime host", "... cannot be created because no
/// allowed_mount_roots are configured", "... is outside allowed_mount_roots: <roots>".
/// Blocking: call it on the worker pool, or at start-up.
box_error ensure_default_workspace(const local_config& local);

/// The admission-mode workspace-root check (protocol.md §4.9.5); "" when it passes.
std::string check_managed_workspace_root(const box_config& config);

} // namespace boxrt
