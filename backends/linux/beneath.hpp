// Host-side file work on trees a tenant can write (skill packages, workspaces, upload
// folders): every path below a root is resolved by the kernel beneath a descriptor of
// that root (openat2 with RESOLVE_BENEATH), and every later step works on descriptors,
// so a tenant that swaps a folder for a symlink while boxd works can never redirect
// boxd out of the tree. No function here takes a path below the root as a string to
// open, stat, list, create, rename or remove by.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "messages/base/unique_fd.hpp"

namespace boxrt::beneath {

/// What symlinks a path below a root may use.
enum class links {
  /// None at all (RESOLVE_NO_SYMLINKS): where the reference never follows a link
  /// (archive installs, hand-over, clean-up, uploads).
  none,
  /// Followed while they stay beneath the root, atomically by the kernel; an escaping
  /// one (absolute, or `..` above the root) fails with EXDEV.
  inside,
};

/// Opens an absolute host path that may lead through trees a tenant can write (a host
/// path below a workspace, a skill package, an upload folder). It walks the path one
/// component at a time by descriptor; a symlink is followed only where no tenant can
/// have made it: in a folder owned by root (or boxd's own uid) that neither group nor
/// others may write. Any other link on the way fails with ELOOP, so a folder swapped
/// for a link mid-walk never redirects it. The caller then judges where it arrived by
/// path_of(fd), which the kernel reports. -1 with errno on failure.
unique_fd open_trusted(const std::string& path, int flags = O_PATH | O_DIRECTORY);

/// open_trusted for a folder, creating the components that are missing (mkdir -p with
/// mkdirat on each parent's descriptor). -1 with errno on failure.
unique_fd make_dirs_trusted(const std::string& path, mode_t mode);

/// Opens a root folder by host path (open_trusted). -1 with errno on failure.
unique_fd open_root(const std::string& path, int flags = O_PATH | O_DIRECTORY);

/// openat2(root, rel, flags | O_CLOEXEC, mode) resolved beneath `root`, never through a
/// magic link, and through symlinks only as `l` allows; retried while a concurrent
/// rename makes the kernel answer EAGAIN. "" and "." name the root itself. -1 with
/// errno on failure.
unique_fd open(int root, std::string_view rel, int flags, links l, mode_t mode = 0);

/// The status of what `rel` names beneath `root` (links::none: of the entry itself,
/// as lstat). False with errno on failure.
bool stat(int root, std::string_view rel, links l, struct stat& st);

/// Creates the folders of `rel` beneath `root` that are missing (mkdir -p), each with
/// mkdirat on a descriptor of its parent resolved beneath the root. 0 or the errno of
/// the step that failed (EEXIST when something other than a folder is in the way).
int make_dirs(int root, std::string_view rel, mode_t mode, links l);

/// The names in the open directory `dir` (without "." and ".."), sorted; at most
/// `limit`, `over_limit` set when there are more. nullopt with errno when unreadable.
std::optional<std::vector<std::string>> list(int dir, size_t limit, bool& over_limit);

/// What a removal could not remove.
struct removal_error {
  int error = 0;        // errno of the step that failed; 0 = everything is gone
  std::string detail;   // which step
  explicit operator bool() const noexcept { return error != 0; }
};

/// Removes the entry `name` of the directory `parent` and everything below it. It walks
/// descriptors only (openat with O_NOFOLLOW per level, unlinkat), iteratively: no path
/// length or depth limit, a constant number of descriptors, and never a symlink
/// followed. It never descends into another mount (a bind or a quota image below is
/// reported, not entered). A tenant that moves folders while this runs makes it start
/// again from the top (bounded); what still cannot be removed is reported.
removal_error remove_tree(int parent, const std::string& name);

/// Removes everything below the open directory `dir`, keeping `dir` itself.
removal_error remove_contents(int dir);

/// Lets the group `gid` read and write the open file or folder `fd` through a POSIX
/// ACL entry (its owner and group bits stay as they are); a folder also passes the
/// entry on to whatever is created in it (its default ACL). `close_others` takes every
/// permission from everyone else (the file's own mode included). 0 or errno.
int grant_group(int fd, uint32_t gid, bool close_others);

/// Gives the folder `dir` and everything below it to `uid`:`gid`, walking descriptors
/// only: no link is ever followed (links themselves are re-owned), no mount is entered,
/// no depth limit, a constant number of descriptors. `dir` itself changes owner last,
/// so an interrupted hand-over is redone in full next time. With `host_gid` >= 0, that
/// group keeps read and write access to every file and folder (grant_group), and `dir`
/// is closed to everyone else. 0, or the errno of the first step that failed.
int hand_over(int dir, uint32_t uid, uint32_t gid, int64_t host_gid = -1);

/// The absolute path of an open descriptor, as the kernel names it (for replies and
/// messages, never to open by).
std::string path_of(int fd);

/// Python's OSError text: "[Errno 2] No such file or directory: '<path>'".
std::string os_error_text(int err, const std::string& path);

/// Reads the open regular file `fd` up to `limit` bytes; `too_big` when there is more.
/// nullopt with errno on a read error.
std::optional<std::string> read_limited(int fd, uint64_t limit, bool& too_big);

/// Writes all of `data` to `fd`; false with errno on failure (one loop for the tree).
using boxrt::write_all;

} // namespace boxrt::beneath
