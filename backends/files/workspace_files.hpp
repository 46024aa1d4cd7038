// The file actions of a session's workspace (docs/files.md), done by the host on the
// workspace's own folder. Every path is resolved by the kernel beneath a descriptor of
// the workspace root (openat2 with RESOLVE_BENEATH, backends/linux/beneath.hpp), and
// every later step works on descriptors, so a tenant that swaps a folder for a symlink
// meanwhile never redirects the host out of its workspace. Each action runs with the
// calling thread's file-system identity switched to the workspace's uid and group
// (setfsuid, setfsgid and the supplementary groups, which the kernel keeps per thread):
// ownership, permissions and a quota image's size hold exactly as for a command.
// Blocking: worker pool only.
#pragma once

#include <cstdint>
#include <string>

#include "messages/error.hpp"
#include "messages/files.hpp"

namespace boxrt::files {

/// The bounds of one file action (messages/files.hpp).
using limits = file_limits;

/// Where the action works: the workspace root (an open folder; O_PATH is enough), the
/// identity to work as (uid < 0: the caller's own), whether the workspace is read-only,
/// and how paths are shown in error texts (the sandbox's `mount_path`).
struct workspace {
  int root = -1;
  int64_t uid = -1;
  int64_t gid = -1;
  bool read_only = false;
  std::string shown = "/workspace";
};

/// Runs `op` (its path already relative to the root, without "." or ".." components;
/// see normalize) in `ws`. Errors are typed: a path leading out of the workspace or a bad
/// value is a validation error; the file system's refusals are BoxErrors with Python's
/// OSError text ("[Errno 2] No such file or directory: '/workspace/x'").
result<file_result> run(const workspace& ws, const file_op& op, const limits& lim);

/// The refusal of a write whose content is over the call's cap (the wire checks it
/// before the bytes travel, the action again after base64).
box_error write_too_large(int64_t bytes, int64_t max_call_bytes);

/// A path as the tenant sent it, made relative to the workspace mounted at `mount_path`:
/// an absolute one must lie at or below `mount_path`; "." and empty components go, ".."
/// takes one back and may never leave the workspace; a NUL byte is refused. The error
/// is a validation error naming the path.
result<std::string> normalize(const std::string& path, const std::string& mount_path);

} // namespace boxrt::files
