#include "backends/state/transfer_store.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <cstring>

#include <spdlog/spdlog.h>

#include "backends/linux/beneath.hpp"

namespace boxrt {

namespace {

struct split_path {
  std::string parent;
  std::string name;
};

split_path split(const std::string& dir) {
  auto slash = dir.rfind('/');
  if (slash == std::string::npos)
    return {".", dir};
  return {slash == 0 ? "/" : dir.substr(0, slash), dir.substr(slash + 1)};
}

box_error runtime(std::string text) {
  return box_error{ec::runtime, std::move(text)};
}

} // namespace

box_error write_transfer_chunk(const std::string& dir, const std::string& key, std::string_view bytes, bool first,
                               int64_t max_bytes) {
  auto [parent, name] = split(dir);
  auto root = beneath::make_dirs_trusted(parent, 0700);
  if (!root)
    return runtime("Cannot create the file transfer directory: " + std::string{std::strerror(errno)});
  if (::mkdirat(root.get(), name.c_str(), 0700) != 0 && errno != EEXIST)
    return runtime("Cannot create the file transfer directory: " + std::string{std::strerror(errno)});
  auto folder = beneath::open(root.get(), name, O_PATH | O_DIRECTORY, beneath::links::none);
  if (!folder)
    return runtime("Cannot create the file transfer directory: " + std::string{std::strerror(errno)});
  int64_t existing = 0;
  if (!first) {
    struct stat st{};
    if (::fstatat(folder.get(), key.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
      existing = static_cast<int64_t>(st.st_size);
  }
  const auto size = static_cast<int64_t>(bytes.size());
  if ((first ? size : existing + size) > max_bytes)
    return box_error{ec::value, "File transfer exceeds the configured size limit"};
  // O_NONBLOCK: a FIFO planted under the key's name fails instead of hanging a worker.
  int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | (first ? O_TRUNC : O_APPEND);
  auto fd = beneath::open(folder.get(), key, flags, beneath::links::none, 0600);
  struct stat st{};
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return runtime("Cannot write the file transfer chunk: " + std::string{std::strerror(fd ? EINVAL : errno)});
  if (!beneath::write_all(fd.get(), bytes))
    return runtime("Cannot write the file transfer chunk: " + std::string{std::strerror(errno)});
  return {};
}

void remove_transfer_file(const std::string& path) {
  auto [parent, name] = split(path);
  if (auto folder = beneath::open_root(parent))
    ::unlinkat(folder.get(), name.c_str(), 0);
}

void remove_transfer_folder(const std::string& dir) {
  auto [parent, name] = split(dir);
  auto root = beneath::open_root(parent);
  if (!root)
    return;
  if (auto err = beneath::remove_tree(root.get(), name))
    spdlog::warn("transfers: cannot remove {} ({}: {})", dir, err.detail, std::strerror(err.error));
}

} // namespace boxrt
