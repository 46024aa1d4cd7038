#include "backends/session_dir.hpp"
#include "backends/mount_policy.hpp"

#include <filesystem>
#include <random>

namespace boxrt {

namespace {

namespace fs = std::filesystem;

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
  std::error_code err;
  if (!spec.host_path.empty() && spec.host_path_mode == mount_mode::rw) {
    fs::create_directories(spec.host_path, err);
    if (err)
      return make_box_error(ec::box_error, backend + " backend error: cannot create host_path "
                                             + spec.host_path + ": " + err.message());
  }
  return {};
}

size_t remove_foreign_session_dirs(const std::string& base, const std::string& instance) {
  std::error_code err;
  auto prefix = instance + "_";
  size_t removed = 0;
  for (const auto& entry : fs::directory_iterator{base, err}) {
    std::error_code kind_err;
    if (!entry.is_directory(kind_err) || entry.is_symlink(kind_err))
      continue;
    auto name = entry.path().filename().string();
    if (!instance.empty() && name.starts_with(prefix))
      continue;
    std::error_code rm_err;
    fs::remove_all(entry.path(), rm_err);
    if (!rm_err)
      ++removed;
  }
  return removed;
}

} // namespace boxrt
