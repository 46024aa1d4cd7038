// Per-session host directories of the process and nsjail backends: their names
// (<instance>_<session>_<8 hex>), the §10 host_path denylist check every start runs
// first, and removal of directories an earlier boxd run left behind.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "messages/error.hpp"
#include "messages/models.hpp"

namespace boxrt {

/// `n` random lowercase hex digits.
std::string random_hex(size_t n);

/// `text` made safe as one path component: runs of characters outside
/// [A-Za-z0-9_.-] become '-', leading/trailing '-' are dropped, at most 64 characters
/// are kept, and "session" stands in for an empty result.
std::string path_safe_name(std::string_view text);

/// "<base>/<instance>_<path_safe_name(session_id)>_<8 hex>".
std::string session_dir_path(const std::string& base, const std::string& instance,
                             const std::string& session_id);

/// The security check of backends-and-skills.md §10, run first by every start: the
/// realpath of host_path (and of every extra mount whose mode is not none) must not be
/// "/" or lie under /etc /proc /sys /dev /root /boot /run /var/run or the Docker
/// sockets ("host_path <path> is blocked for security"). The allowed-roots check is
/// the session actor's (check_spec_mounts); this one guards a backend used directly.
box_error check_host_denylist(const box_spec& spec);

/// The start of every session of a directory-per-session backend: the denylist check,
/// then a missing rw host_path is created (a missing ro one stays the caller's error).
/// Errors name the backend ("<backend> backend error: cannot create host_path ...").
box_error prepare_host_path(const box_spec& spec, const std::string& backend);

/// Removes every directory in `base` whose name does not start with "<instance>_"
/// (every one when `instance` is empty); returns how many were removed.
size_t remove_foreign_session_dirs(const std::string& base, const std::string& instance);

} // namespace boxrt
