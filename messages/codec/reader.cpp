#include "messages/codec/reader.hpp"

namespace boxrt::codec_detail {

std::optional<element> lookup(const object& obj, std::string_view key) {
  std::optional<element> found;
  for (auto field : obj)
    if (field.key == key)
      found = field.value;
  return found;
}

int_read read_int(const element& e, int64_t& out) {
  switch (e.type()) {
    case element_type::INT64:
      out = e.get_int64().value_unsafe();
      return int_read::ok;
    case element_type::UINT64: {
      uint64_t u = e.get_uint64().value_unsafe();
      if (u > static_cast<uint64_t>(INT64_MAX))
        return int_read::overflow;
      out = static_cast<int64_t>(u);
      return int_read::ok;
    }
    case element_type::OBJECT:
      if (auto big = json::python::stand_in(e);
          big && !big->empty() && std::isdigit(static_cast<unsigned char>(big->back())) != 0)
        return big->front() == '-' ? int_read::underflow : int_read::overflow;
      return int_read::not_int;
    default: return int_read::not_int;
  }
}

bool read_number(const element& e, double& out) {
  switch (e.type()) {
    case element_type::INT64:
      out = static_cast<double>(e.get_int64().value_unsafe());
      return true;
    case element_type::UINT64:
      out = static_cast<double>(e.get_uint64().value_unsafe());
      return true;
    case element_type::DOUBLE:
      out = e.get_double().value_unsafe();
      return true;
    default: return false;
  }
}

maybe_error read_env(const reader& r, std::string_view key,
                     std::map<std::string, std::string>& out) {
  auto v = r.get(key);
  if (!v)
    return {};
  object o;
  if (v->get_object().get(o) != ok)
    return r.fail(key, "must be an object");
  for (auto field : o) {
    std::string_view s;
    if (field.value.get_string().get(s) != ok)
      return r.fail(key, "values must be strings");
    out[std::string{field.key}] = std::string{s};
  }
  return {};
}

bool is_absolute_host_path(std::string_view p) noexcept {
  if (p.starts_with('/') || p.starts_with("\\\\"))
    return true;
  const bool letter = p.size() >= 3 && ((p[0] >= 'A' && p[0] <= 'Z') || (p[0] >= 'a' && p[0] <= 'z'));
  return letter && p[1] == ':' && (p[2] == '\\' || p[2] == '/');
}

char32_t next_code_point(std::string_view s, size_t& i) noexcept {
  auto c = static_cast<unsigned char>(s[i++]);
  if (c < 0x80)
    return c;
  int extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
  char32_t cp = c & (0x3F >> extra);
  for (int k = 0; k < extra && i < s.size(); ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(s[i++]) & 0x3F);
  return cp;
}

bool is_alnum_code_point(char32_t cp) noexcept {
  if (cp < 0x80)
    return (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z') || (cp >= '0' && cp <= '9');
  if (cp <= 0xBF) // C1 controls, NBSP, Latin-1 punctuation; keep ª ² ³ µ ¹ º ¼ ½ ¾
    return cp == 0xAA || cp == 0xB2 || cp == 0xB3 || cp == 0xB5 || cp == 0xB9 || cp == 0xBA
           || (cp >= 0xBC && cp <= 0xBE);
  if (cp == 0xD7 || cp == 0xF7) // × ÷
    return false;
  auto in = [cp](char32_t lo, char32_t hi) { return cp >= lo && cp <= hi; };
  if (in(0x2000, 0x206F) || in(0x20A0, 0x20CF) || in(0x2190, 0x23FF) || in(0x2500, 0x27BF)
      || in(0x2E00, 0x2E7F) || in(0x3000, 0x3004) || in(0x3008, 0x3020) || in(0xE000, 0xF8FF)
      || in(0xFE30, 0xFE4F) || in(0xFF00, 0xFF0F) || in(0xFF1A, 0xFF20) || in(0xFF3B, 0xFF40)
      || in(0xFF5B, 0xFF65) || in(0xFFF0, 0xFFFF) || in(0xF0000, 0x10FFFF))
    return false;
  return true;
}

bool valid_skill_name(std::string_view name) noexcept {
  if (code_points(name) > 64)
    return false;
  bool any = false;
  for (size_t i = 0; i < name.size();) {
    char32_t cp = next_code_point(name, i);
    if (cp == '-' || cp == '_')
      continue;
    if (!is_alnum_code_point(cp))
      return false;
    any = true;
  }
  return any;
}

bool valid_process_id(std::string_view id) noexcept {
  if (id.empty() || id.size() > 128)
    return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'
           || c == '.' || c == '-';
  });
}

std::string raw_text(const element& e) {
  std::string_view s;
  if (e.get_string().get(s) == ok)
    return std::string{strip(s)};
  return simdjson::minify(e);
}

namespace {

/// Python's `posixpath.normpath(p) == p` for an absolute `p`: no empty, "." or ".."
/// component and no trailing slash, the root aside; exactly two leading slashes stay.
bool normalized(std::string_view p) {
  if (p.starts_with("//") && !p.starts_with("///"))
    p.remove_prefix(1);
  if (p == "/")
    return true;
  if (p.ends_with('/'))
    return false;
  for (size_t at = 1; at <= p.size();) {
    auto next = p.find('/', at);
    auto part = p.substr(at, next == std::string_view::npos ? std::string_view::npos : next - at);
    if (part.empty() || part == "." || part == "..")
      return false;
    if (next == std::string_view::npos)
      break;
    at = next + 1;
  }
  return true;
}

} // namespace

maybe_error decode_mount(const element& e, size_t index, mount_spec& out) {
  const std::string prefix = "extra_mounts[" + std::to_string(index) + "]";
  object o;
  if (e.get_object().get(o) != ok)
    return box_error{ec::validation, prefix + " must be an object"};
  reader r{o, ec::validation, prefix + "."};
  if (auto err = r.req_stripped("host_path", out.host_path))
    return err;
  if (!is_absolute_host_path(out.host_path))
    return r.fail("host_path", "must be an absolute host path");
  if (auto err = r.req_stripped("mount_path", out.mount_path))
    return err;
  if (!out.mount_path.starts_with('/'))
    return r.fail("mount_path", "must be an absolute path inside the sandbox");
  if (!normalized(out.mount_path))
    return r.fail("mount_path", "must be normalized");
  if (auto err = r.enumeration("mode", out.mode, mount_values))
    return err;
  // langbot-plugin 0.7.13's artifact fields, checked in its order.
  if (auto err = r.stripped("content_digest", out.content_digest))
    return err;
  if (r.get("content_digest")) {
    if (!out.content_digest.starts_with("sha256:"))
      return r.fail("content_digest", "must use sha256:<hex>");
    auto hex = std::string_view{out.content_digest}.substr(7);
    if (hex.size() != 64 || hex.find_first_not_of("0123456789abcdef") != std::string_view::npos)
      return r.fail("content_digest", "must use sha256:<64 lowercase hex>");
  }
  if (auto err = r.stripped("manifest_path", out.manifest_path))
    return err;
  if (r.get("manifest_path") && !is_absolute_host_path(out.manifest_path))
    return r.fail("manifest_path", "must be an absolute host path");
  const auto& p = out.mount_path;
  if ((p == artifact_mount_root || p.starts_with(std::string{artifact_mount_root} + "/")) && !is_content_addressed(out))
    return box_error{ec::validation, prefix + ": Artifact paths require a read-only digest-addressed mount and manifest"};
  return {};
}

maybe_error read_expiry(const reader& r, const element& v, epoch_us& out) {
  // Python datetime covers years 1..9999.
  constexpr double min_sec = -62135596800.0;
  constexpr double max_sec = 253402300800.0;
  std::string_view s;
  if (v.get_string().get(s) == ok) {
    bool has_tz = false;
    auto parsed = parse_iso_datetime(s, has_tz);
    if (!parsed)
      return r.fail("expires_at", "must be a valid datetime");
    if (!has_tz)
      return r.fail("expires_at", "must include a timezone");
    out = *parsed;
    return {};
  }
  double secs = 0;
  if (!read_number(v, secs) || !(secs >= min_sec && secs < max_sec))
    return r.fail("expires_at", "must be a valid datetime");
  if (v.type() == element_type::INT64)
    out = v.get_int64().value_unsafe() * 1'000'000;
  else
    out = std::llround(secs * 1e6);
  return {};
}

} // namespace boxrt::codec_detail
