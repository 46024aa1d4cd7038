#include "backends/linux/usage.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "backends/linux/beneath.hpp"

namespace boxrt {

namespace {

bool vanished(int err) {
  return err == ENOENT || err == ENOTDIR;
}

void add(int64_t& sum, int64_t x) {
  if (__builtin_add_overflow(sum, x, &sum))
    sum = INT64_MAX;
}

/// Adds what is below the open folder `dir` (consumed) to `out`; `budget` is how many
/// more entries may be looked at.
void walk(int dir, tree_usage& out, int depth_left, int64_t& budget) {
  DIR* d = ::fdopendir(dir);
  if (!d) {
    ::close(dir);
    ++out.error_count;
    return;
  }
  int fd = ::dirfd(d);
  errno = 0;
  while (auto* e = ::readdir(d)) {
    std::string_view name{e->d_name};
    if (name == "." || name == "..")
      continue;
    if (--budget < 0) {
      ++out.error_count;
      break;
    }
    struct stat st{};
    if (::fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (!vanished(errno))
        ++out.error_count;
      errno = 0;
      continue;
    }
    if (!S_ISDIR(st.st_mode)) {
      add(out.size_bytes, st.st_size);
      ++out.file_count;
      continue;
    }
    if (depth_left <= 0) {
      ++out.error_count;
      continue;
    }
    int sub = ::openat(fd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0) {
      if (!vanished(errno))
        ++out.error_count;
      errno = 0;
      continue;
    }
    walk(sub, out, depth_left - 1, budget);
    errno = 0;
  }
  if (errno != 0)
    ++out.error_count;
  ::closedir(d);
}

} // namespace

tree_usage measure_tree(int root, const std::string& rel, int max_depth, int64_t max_entries) {
  tree_usage out;
  struct stat st{};
  if (!beneath::stat(root, rel, beneath::links::none, st)) {
    if (!vanished(errno))
      out.error_count = 1;
    return out;
  }
  out.exists = true;
  if (!S_ISDIR(st.st_mode)) {
    out.size_bytes = st.st_size;
    out.file_count = 1;
    return out;
  }
  auto dir = beneath::open(root, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, beneath::links::none);
  if (!dir) {
    if (!vanished(errno))
      ++out.error_count;
    return out;
  }
  walk(dir.release(), out, max_depth, max_entries);
  return out;
}

} // namespace boxrt
