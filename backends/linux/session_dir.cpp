#include "backends/linux/session_dir.hpp"
#include "backends/linux/beneath.hpp"
#include "backends/mount_policy.hpp"

#include <sys/stat.h>

#include <cstring>
#include <random>

#include <spdlog/spdlog.h>

namespace boxrt {

namespace {

bool safe_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
         || c == '_' || c == '.' || c == '-';
}

} // namespace

std::string random_hex(size_t n) {
  static constexpr char digits[] = "0123456789abcdef";
  thread_local std::mt19937_64 engine{std::random_device{}()};
  std::string out;
  out.reserve(n);
  std::uniform_int_distribution<int> pick{0, 15};
  for (size_t i = 0; i < n; ++i)
    out += digits[pick(engine)];
  return out;
}

std::string path_safe_name(std::string_view text) {
  std::string out;
  for (auto c : text) {
    if (safe_char(c))
      out += c;
    else if (out.empty() || out.back() != '-')
      out += '-';
  }
  auto first = out.find_first_not_of('-');
  if (first == std::string::npos)
    return "session";
  out = out.substr(first, out.find_last_not_of('-') - first + 1);
  if (out.size() > 64)
    out.resize(64);
  // "." and ".." are safe characters but not safe names.
  if (out == "." || out == "..")
    return "session";
  return out;
}

std::string session_dir_path(const std::string& base, const std::string& instance,
                             const std::string& session_id) {
  return base + "/" + instance + "_" + path_safe_name(session_id) + "_" + random_hex(8);
}

box_error check_host_denylist(const box_spec& spec) {
  // check_spec_mounts with "/" as the one allowed root applies only its denylist.
  local_config everything;
  everything.allowed_mount_roots = {"/"};
  return check_spec_mounts(spec, everything);
}

box_error prepare_host_path(const box_spec& spec, const std::string& backend) {
  if (auto err = check_host_denylist(spec))
    return err;
  if (!spec.host_path.empty() && spec.host_path_mode == mount_mode::rw) {
    // Created component by component, following no link a tenant could have planted.
    if (!beneath::make_dirs_trusted(spec.host_path, 0755))
      return make_box_error(ec::box_error, backend + " backend error: cannot create host_path " + spec.host_path
                                             + ": " + std::strerror(errno));
  }
  return {};
}

size_t remove_foreign_session_dirs(const std::string& base, const std::string& instance) {
  auto dir = beneath::open_root(base, O_RDONLY | O_DIRECTORY);
  if (!dir)
    return 0;
  bool over = false;
  auto names = beneath::list(dir.get(), SIZE_MAX, over);
  if (!names)
    return 0;
  auto prefix = instance + "_";
  size_t removed = 0;
  for (const auto& name : *names) {
    struct stat st{};
    if (::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode))
      continue;
    if (!instance.empty() && name.starts_with(prefix))
      continue;
    // By descriptor: a session folder a tenant could write is walked without following
    // a link, however its folders are swapped meanwhile.
    if (auto err = beneath::remove_tree(dir.get(), name)) {
      spdlog::warn("cannot remove {}/{} ({}: {}); retried at the next start", base, name, err.detail,
                   std::strerror(err.error));
      continue;
    }
    ++removed;
  }
  return removed;
}

} // namespace boxrt
