// The mount namespaces a sandbox is made from, kept out of boxd's own: the template
// every launch copies (the host's system mounts only, private, made once), and the
// session's own small file systems (views, io folder), which exist only as detached
// mounts held by descriptor until a launch attaches them inside the sandbox.
//
// Why: a launch copies the mount table of the namespace it starts from, and a sandbox
// keeps that copy for its life. Copying boxd's own table, which held three mounts of
// every live sandbox and every tenant's quota image, made each start and each sandbox
// cost O(live sandboxes), and made every per-exec mount propagate into every copy.
#pragma once

#include <string>
#include <vector>

#include "messages/error.hpp"
#include "messages/base/unique_fd.hpp"

namespace boxrt::sandbox_detail {

/// A tmpfs that is mounted nowhere yet (fsopen + fsmount): `options` as for mount(2)
/// ("size=64k,mode=0755,uid=..."), `attrs` MOUNT_ATTR_* flags. The descriptor is the
/// mount's root: files inside are made with *at calls on it, and a launch attaches the
/// mount itself (move_mount) where the sandbox shows it. It keeps working after that.
result<unique_fd> detached_tmpfs(const std::string& options, unsigned attrs);

/// The mount points of the calling process's namespace that a launch does not need:
/// every mount but `/` and those at, above or below one of `keep` (the system paths, /dev,
/// /proc, /sys, the staging folder, the driver's own folder), deepest first.
std::vector<std::string> mounts_to_leave_out(const std::vector<std::string>& keep);

/// Makes the template namespace: a private copy of the caller's mount namespace with
/// `leave_out` detached and a read-only tmpfs at `init_dir` holding `init_dir`/init, a
/// copy of the image in memfd `init_image` (one copy every bwrap sandbox binds, so its
/// pages are shared). Returns a descriptor of the namespace (it lives as long as that).
/// Forks a helper; call before sandboxes start.
result<unique_fd> make_template_namespace(const std::vector<std::string>& leave_out, const std::string& init_dir,
                                          int init_image);

} // namespace boxrt::sandbox_detail
