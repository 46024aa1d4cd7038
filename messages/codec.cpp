// Strict simdjson decoders with the reference's validation messages, and the encoders
// of the reply shapes. Types are never coerced: a bool is not an int, "5" is not a number.
#include "messages/codec.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <utility>

#include "messages/base/pytext.hpp"
#include "messages/python_json.hpp"
#include "messages/time.hpp"

namespace boxrt {

namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

using maybe_error = std::optional<box_error>;
using py::code_points;
using py::strip;

constexpr auto ok = simdjson::SUCCESS;

// -- reading helpers ---------------------------------------------------------------

/// The value of `key`, the last one when duplicated (Python's json keeps the last).
std::optional<element> lookup(const object& obj, std::string_view key) {
  std::optional<element> found;
  for (auto field : obj)
    if (field.key == key)
      found = field.value;
  return found;
}

enum class int_read { ok, not_int, overflow, underflow };

/// A JSON integer only: never a bool, a float (even 1.0) or a string. One beyond 64
/// bits (which Python's json reads, see messages/python_json.hpp) over- or underflows.
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

/// Any JSON number (integer or float), never a bool or a string.
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

/// A lower bound as the reference words it: "must be greater than or equal to N"
/// (value < N fails), "must be greater than N" (value <= N) or "must be at least N".
enum class bound { ge, gt, at_least };

/// Typed access to one JSON object. Absent and null both mean "keep the default";
/// the `req_*` variants fail with "<name> is required" when the key is absent.
/// The overloads that take a `bound` check it on the value after the read, whether
/// or not the key was present (so a default is checked too).
class reader {
 public:
  reader(const object& obj, ec code, std::string prefix = {})
    : obj_(obj), code_(code), prefix_(std::move(prefix)) {
  }

  const object& obj() const noexcept { return obj_; }

  std::string name(std::string_view key) const { return prefix_ + std::string{key}; }

  box_error fail(std::string message) const { return box_error{code_, std::move(message)}; }

  box_error fail(std::string_view key, std::string_view what) const {
    return fail(name(key) + " " + std::string{what});
  }

  bool has(std::string_view key) const { return lookup(obj_, key).has_value(); }

  /// The value when present and not null.
  std::optional<element> get(std::string_view key) const {
    auto v = lookup(obj_, key);
    if (v && v->is_null())
      return std::nullopt;
    return v;
  }

  maybe_error str(std::string_view key, std::string& out) const {
    auto v = get(key);
    if (!v)
      return {};
    return as_str(key, *v, out);
  }

  maybe_error as_str(std::string_view key, const element& v, std::string& out) const {
    std::string_view s;
    if (v.get_string().get(s) != ok)
      return fail(key, "must be a string");
    out = std::string{s};
    return {};
  }

  /// `str`, then `out` stripped (the default too when the key is absent).
  maybe_error stripped(std::string_view key, std::string& out) const {
    if (auto err = str(key, out))
      return err;
    out = std::string{strip(out)};
    return {};
  }

  /// A list of strings: "<name> must be a list", "<name>[<i>] must be a string".
  maybe_error strings(std::string_view key, std::vector<std::string>& out) const {
    auto v = get(key);
    if (!v)
      return {};
    array arr;
    if (v->get_array().get(arr) != ok)
      return fail(key, "must be a list");
    return string_items(key, arr, out);
  }

  /// Appends the items of `arr`, each of which must be a string.
  maybe_error string_items(std::string_view key, const array& arr,
                           std::vector<std::string>& out) const {
    size_t i = 0;
    for (element item : arr) {
      std::string_view s;
      if (item.get_string().get(s) != ok)
        return fail(name(key) + "[" + std::to_string(i) + "] must be a string");
      out.emplace_back(s);
      ++i;
    }
    return {};
  }

  maybe_error integer(std::string_view key, int64_t& out) const {
    auto v = get(key);
    if (!v)
      return {};
    return as_int(key, *v, out);
  }

  /// A value below -2^63 fails the lower bound itself, in its words.
  maybe_error integer(std::string_view key, int64_t& out, bound b, int64_t limit) const {
    auto v = get(key);
    if (!v)
      return {};
    if (read_int(*v, out) == int_read::underflow)
      return check(key, INT64_MIN, b, limit);
    if (auto err = as_int(key, *v, out))
      return err;
    return check(key, out, b, limit);
  }

  maybe_error as_int(std::string_view key, const element& v, int64_t& out) const {
    switch (read_int(v, out)) {
      case int_read::ok: return {};
      case int_read::overflow: return fail(key, "must be less than or equal to 9223372036854775807");
      case int_read::underflow:
        return fail(key, "must be greater than or equal to -9223372036854775808");
      case int_read::not_int: break;
    }
    return fail(key, "must be an integer");
  }

  maybe_error number(std::string_view key, double& out) const {
    auto v = get(key);
    if (!v)
      return {};
    if (!read_number(*v, out))
      return fail(key, "must be a number");
    return {};
  }

  maybe_error number(std::string_view key, double& out, bound b, int64_t limit) const {
    if (auto err = number(key, out))
      return err;
    return check(key, out, b, limit);
  }

  /// "<name> must be greater than or equal to <limit>" and the like when `value` is
  /// outside `b` (a NaN is outside every bound).
  template <class T>
  maybe_error check(std::string_view key, T value, bound b, int64_t limit) const {
    if (b == bound::gt ? value > limit : value >= limit)
      return {};
    const char* words = b == bound::ge   ? "must be greater than or equal to "
                        : b == bound::gt ? "must be greater than "
                                         : "must be at least ";
    return fail(key, words + std::to_string(limit));
  }

  /// "<name> must be less than or equal to <limit>" when `value` is above it (a NaN is
  /// above every limit): upper bounds keep every later computation on the value in range.
  template <class T>
  maybe_error at_most(std::string_view key, T value, int64_t limit) const {
    if (value <= static_cast<T>(limit))
      return {};
    return fail(key, "must be less than or equal to " + std::to_string(limit));
  }

  maybe_error boolean(std::string_view key, bool& out) const {
    auto v = get(key);
    if (!v)
      return {};
    if (v->get_bool().get(out) != ok)
      return fail(key, "must be a boolean");
    return {};
  }

  /// A required value: absent -> "<name> is required"; null is kept for the type check.
  maybe_error require(std::string_view key, element& out) const {
    auto v = lookup(obj_, key);
    if (!v)
      return fail(key, "is required");
    out = *v;
    return {};
  }

  maybe_error req_str(std::string_view key, std::string& out) const {
    element v;
    if (auto err = require(key, v))
      return err;
    return as_str(key, v, out);
  }

  maybe_error req_int(std::string_view key, int64_t& out) const {
    element v;
    if (auto err = require(key, v))
      return err;
    return as_int(key, v, out);
  }

  maybe_error req_int(std::string_view key, int64_t& out, bound b, int64_t limit) const {
    if (auto err = req_int(key, out))
      return err;
    return check(key, out, b, limit);
  }

  /// `req_str`, then `out` stripped.
  maybe_error req_stripped(std::string_view key, std::string& out) const {
    if (auto err = req_str(key, out))
      return err;
    out = std::string{strip(out)};
    return {};
  }

  /// A string id that is stripped and must not be empty.
  maybe_error req_id(std::string_view key, std::string& out) const {
    if (auto err = req_stripped(key, out))
      return err;
    if (out.empty())
      return fail(key, "must not be empty");
    return {};
  }

  template <class E, size_t N>
  maybe_error enumeration(std::string_view key, E& out,
                          const std::pair<std::string_view, E> (&values)[N]) const {
    auto v = get(key);
    if (!v)
      return {};
    std::string_view s;
    if (v->get_string().get(s) == ok)
      for (const auto& [text, value] : values)
        if (text == s) {
          out = value;
          return {};
        }
    std::string listing;
    for (const auto& [text, value] : values) {
      if (!listing.empty())
        listing += ", ";
      listing += text;
    }
    return fail(key, "must be one of: " + listing);
  }

  /// "Extra inputs are not permitted: <key>" for the first key outside `allowed`.
  maybe_error forbid_extra(std::initializer_list<std::string_view> allowed) const {
    for (auto field : obj_)
      if (std::find(allowed.begin(), allowed.end(), field.key) == allowed.end())
        return fail("Extra inputs are not permitted: " + std::string{field.key});
    return {};
  }

 private:
  const object& obj_;
  ec code_;
  std::string prefix_;
};

/// dict[str, str]: values must already be strings (no str() coercion).
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

/// instance_uuid then workspace_uuid: required, stripped and non-empty.
template <class T>
maybe_error read_tenant_ids(const reader& r, T& out) {
  if (auto err = r.req_id("instance_uuid", out.instance_uuid))
    return err;
  return r.req_id("workspace_uuid", out.workspace_uuid);
}

/// posixpath.isabs or ntpath.isabs: "/x", "C:\x", "C:/x", "\\server\share".
bool is_absolute_host_path(std::string_view p) noexcept {
  if (p.starts_with('/') || p.starts_with("\\\\"))
    return true;
  const bool letter = p.size() >= 3 && ((p[0] >= 'A' && p[0] <= 'Z') || (p[0] >= 'a' && p[0] <= 'z'));
  return letter && p[1] == ':' && (p[2] == '\\' || p[2] == '/');
}

/// Decodes one code point of valid UTF-8 at `i` and advances.
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

/// An approximation of Python's str.isalnum() for one code point: ASCII letters and
/// digits, and non-ASCII code points outside the punctuation, space, symbol and
/// private-use blocks that occur in practice.
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

/// skill_name: at most 64 characters; with '-' and '_' removed, non-empty alphanumeric.
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

/// The raw value as admission must compare it: a stripped string, or the compact JSON
/// of any other non-null value (so a forged non-string never passes as blank).
std::string raw_text(const element& e) {
  std::string_view s;
  if (e.get_string().get(s) == ok)
    return std::string{strip(s)};
  return simdjson::minify(e);
}

constexpr std::pair<std::string_view, network_mode> network_values[] = {
  {"off", network_mode::off}, {"on", network_mode::on}};

constexpr std::pair<std::string_view, mount_mode> mount_values[] = {
  {"none", mount_mode::none}, {"ro", mount_mode::ro}, {"rw", mount_mode::rw}};

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
  return r.enumeration("mode", out.mode, mount_values);
}

/// Epoch µs from an aware ISO string or a Unix timestamp in seconds.
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

struct limit_def {
  std::string_view name;
  int64_t runtime_limits::*field;
  int64_t min;
  int64_t max;
};

constexpr limit_def limit_defs[] = {
  {"max_sessions", &runtime_limits::max_sessions, 0, 5000},
  {"max_managed_processes", &runtime_limits::max_managed_processes, 0, 1024},
  {"max_completed_processes", &runtime_limits::max_completed_processes, 0, 10000},
  {"max_admission_records", &runtime_limits::max_admission_records, 1, 250000},
  {"max_rpc_file_bytes", &runtime_limits::max_rpc_file_bytes, 1, 104857600},
  {"completed_process_retention_sec", &runtime_limits::completed_process_retention_sec, 0, 86400},
  {"session_ttl_sec", &runtime_limits::session_ttl_sec, 0, 86400},
  {"max_output_bytes", &runtime_limits::max_output_bytes, 1024, 16777216},
  {"max_timeout_sec", &runtime_limits::max_timeout_sec, 1, 86400},
  {"max_sessions_per_workspace", &runtime_limits::max_sessions_per_workspace, 1, 5000},
  {"io_read_bps", &runtime_limits::io_read_bps, 0, int64_t{1} << 40},
  {"io_write_bps", &runtime_limits::io_write_bps, 0, int64_t{1} << 40},
  {"io_read_iops", &runtime_limits::io_read_iops, 0, int64_t{1} << 30},
  {"io_write_iops", &runtime_limits::io_write_iops, 0, int64_t{1} << 30},
};

constexpr std::string_view backend_names[] = {"",       "auto",    "local",   "bwrap",
                                              "nsjail", "process", "scripted"};

result<local_config> decode_local(const element& v) {
  local_config local;
  if (v.is_null())
    return local;
  object o;
  if (v.get_object().get(o) != ok)
    return box_error{ec::value, "box.local must be an object"};
  reader r{o, ec::value, "box.local."};
  if (auto err = r.str("host_root", local.host_root))
    return *err;
  if (auto err = r.str("default_workspace", local.default_workspace))
    return *err;
  if (auto err = r.str("skills_root", local.skills_root))
    return *err;
  if (auto roots = r.get("allowed_mount_roots")) {
    std::vector<std::string> entries;
    std::string_view s;
    array arr;
    if (roots->get_string().get(s) == ok) {
      size_t start = 0;
      while (start <= s.size()) {
        size_t comma = s.find(',', start);
        if (comma == std::string_view::npos)
          comma = s.size();
        entries.emplace_back(s.substr(start, comma - start));
        start = comma + 1;
      }
    } else if (roots->get_array().get(arr) == ok) {
      if (auto err = r.string_items("allowed_mount_roots", arr, entries))
        return *err;
    } else {
      return r.fail("allowed_mount_roots", "must be a list or a comma-separated string");
    }
    for (auto& entry : entries) {
      auto trimmed = strip(entry);
      if (!trimmed.empty())
        local.allowed_mount_roots.emplace_back(trimmed);
    }
  }
  if (auto err = r.integer("skills_quota_mb", local.skills_quota_mb, bound::ge, 0))
    return *err;
  if (auto err = r.at_most("skills_quota_mb", local.skills_quota_mb, resource_bounds::quota_mb))
    return *err;
  return local;
}

result<scripted_config> decode_scripted(const element& v) {
  scripted_config scripted;
  if (v.is_null())
    return scripted;
  object o;
  if (v.get_object().get(o) != ok)
    return box_error{ec::value, "box.scripted must be an object"};
  reader r{o, ec::value, "box.scripted."};
  if (auto err = r.boolean("available", scripted.available))
    return *err;
  if (auto err = r.strings("ready_keys", scripted.ready_keys))
    return *err;
  return scripted;
}

// -- encoding helpers ----------------------------------------------------------------

void string_or_null(json::writer& w, const std::string& s) {
  if (s.empty())
    w.null();
  else
    w.value(s);
}

/// `key` and a map as an object, in the map's (bytewise sorted) order.
template <class Map>
void map_object(json::writer& w, std::string_view key, const Map& map) {
  w.key(key).begin_object();
  for (const auto& [k, v] : map)
    w.key(k).value(v);
  w.end_object();
}

} // namespace

// -- decoders --------------------------------------------------------------------------

result<box_spec> decode_box_spec(const element& data, bool require_cmd) {
  object obj;
  if (data.get_object().get(obj) != ok)
    return box_error{ec::validation, "spec must be an object"};
  reader r{obj, ec::validation};
  // The reference reads data["session_id"] before it validates anything.
  if (!r.has("session_id"))
    return box_error{ec::key, "'session_id'"};
  box_spec spec;

  if (auto err = r.stripped("cmd", spec.cmd))
    return *err;

  // workdir falls back to a non-blank mount_path when absent, null or "".
  auto raw_workdir = lookup(obj, "workdir");
  std::string_view workdir_text;
  const bool workdir_unset =
    !raw_workdir || raw_workdir->is_null()
    || (raw_workdir->get_string().get(workdir_text) == ok && workdir_text.empty());
  if (workdir_unset) {
    auto raw_mount = lookup(obj, "mount_path");
    std::string_view mount_text;
    if (raw_mount && raw_mount->get_string().get(mount_text) == ok && !strip(mount_text).empty())
      spec.workdir = std::string{mount_text};
    else if (raw_workdir && !raw_workdir->is_null())
      spec.workdir.clear();
  } else if (auto err = r.str("workdir", spec.workdir)) {
    return *err;
  }
  spec.workdir = std::string{strip(spec.workdir)};
  if (!spec.workdir.starts_with('/'))
    return r.fail("workdir must be an absolute path inside the sandbox");

  // Python's int has no top: a timeout beyond 64 bits is as long as the longest, and
  // the ceiling (box.limits.max_timeout_sec) clamps it like any other.
  if (auto v = r.get("timeout_sec"); v && read_int(*v, spec.timeout_sec) == int_read::overflow)
    spec.timeout_sec = INT64_MAX;
  else if (auto err = r.integer("timeout_sec", spec.timeout_sec, bound::gt, 0))
    return *err;

  if (auto err = r.enumeration("network", spec.network, network_values))
    return *err;

  if (auto err = r.req_id("session_id", spec.session_id))
    return *err;

  if (auto err = read_env(r, "env", spec.env))
    return *err;

  if (auto err = r.str("image", spec.image))
    return *err;

  if (auto err = r.str("host_path", spec.host_path))
    return *err;
  if (r.get("host_path")) {
    spec.host_path = std::string{strip(spec.host_path)};
    if (!is_absolute_host_path(spec.host_path))
      return r.fail("host_path must be an absolute host path");
  }

  if (auto err = r.enumeration("host_path_mode", spec.host_path_mode, mount_values))
    return *err;

  if (auto err = r.stripped("mount_path", spec.mount_path))
    return *err;
  if (!spec.mount_path.starts_with('/'))
    return r.fail("mount_path must be an absolute path inside the sandbox");

  if (auto mounts = r.get("extra_mounts")) {
    array arr;
    if (mounts->get_array().get(arr) != ok)
      return r.fail("extra_mounts must be a list");
    size_t i = 0;
    for (element item : arr) {
      mount_spec m;
      if (auto err = decode_mount(item, i, m))
        return *err;
      spec.extra_mounts.push_back(std::move(m));
      ++i;
    }
  }

  if (auto err = r.stripped("skill_name", spec.skill_name))
    return *err;
  if (!spec.skill_name.empty() && !valid_skill_name(spec.skill_name))
    return r.fail("skill_name can only contain up to 64 letters, numbers, hyphens and underscores");

  if (auto err = r.boolean("persistent", spec.persistent))
    return *err;

  if (auto err = r.number("cpus", spec.cpus, bound::gt, 0))
    return *err;
  if (auto err = r.at_most("cpus", spec.cpus, resource_bounds::cpus()))
    return *err;

  if (auto err = r.integer("memory_mb", spec.memory_mb, bound::at_least, 32))
    return *err;
  if (auto err = r.at_most("memory_mb", spec.memory_mb, resource_bounds::memory_mb))
    return *err;

  if (auto err = r.integer("pids_limit", spec.pids_limit, bound::at_least, 1))
    return *err;
  if (auto err = r.at_most("pids_limit", spec.pids_limit, resource_bounds::pids_limit))
    return *err;

  if (auto err = r.boolean("read_only_rootfs", spec.read_only_rootfs))
    return *err;

  if (auto err = r.integer("workspace_quota_mb", spec.workspace_quota_mb, bound::ge, 0))
    return *err;
  if (auto err = r.at_most("workspace_quota_mb", spec.workspace_quota_mb, resource_bounds::quota_mb))
    return *err;

  if (!spec.host_path.empty() && spec.host_path_mode != mount_mode::none
      && spec.workdir != spec.mount_path && !spec.workdir.starts_with(spec.mount_path + "/"))
    return r.fail("workdir must stay under mount_path when host_path is provided");

  if (require_cmd && spec.cmd.empty())
    return r.fail("cmd must not be empty");
  return spec;
}

payload_facts extract_payload_facts(const element& data) {
  payload_facts facts;
  object obj;
  if (data.get_object().get(obj) != ok)
    return facts;
  static constexpr std::string_view host_controlled[] = {
    "backend",     "entitlement",  "entitlement_revision", "managed_sandbox",
    "max_managed_processes", "max_sessions", "plan", "subscription"};
  for (auto key : host_controlled)
    if (lookup(obj, key))
      facts.host_controlled_keys.emplace_back(key);
  std::sort(facts.host_controlled_keys.begin(), facts.host_controlled_keys.end());

  if (auto v = lookup(obj, "session_id"); v && !v->is_null()) {
    facts.has_session_id = true;
    facts.session_id = raw_text(*v);
  }
  if (auto v = lookup(obj, "network"); v && !v->is_null()) {
    std::string_view s;
    const bool off = v->get_string().get(s) == ok && (s.empty() || s == "off");
    facts.network_not_off = !off;
  }
  if (auto v = lookup(obj, "extra_mounts"); v && !v->is_null()) {
    array arr;
    facts.extra_mounts_nonempty = v->get_array().get(arr) != ok || arr.size() > 0;
  }
  if (auto v = lookup(obj, "mount_path"); v && !v->is_null())
    facts.mount_path = raw_text(*v);
  if (auto v = lookup(obj, "host_path"); v && !v->is_null())
    facts.host_path = raw_text(*v);
  if (auto v = lookup(obj, "timeout_sec"); v && !v->is_null()) {
    int64_t ignored = 0;
    facts.timeout_not_int = read_int(*v, ignored) == int_read::not_int;
  }
  return facts;
}

result<process_spec> decode_process_spec(const element& data) {
  object obj;
  if (data.get_object().get(obj) != ok)
    return box_error{ec::validation, "spec must be an object"};
  reader r{obj, ec::validation};
  process_spec spec;

  if (auto err = r.stripped("process_id", spec.process_id))
    return *err;
  if (!valid_process_id(spec.process_id))
    return r.fail(
      "process_id can only contain up to 128 letters, numbers, dots, hyphens and underscores");

  if (auto err = r.req_id("command", spec.command))
    return *err;

  if (auto err = r.strings("args", spec.args))
    return *err;

  if (auto err = read_env(r, "env", spec.env))
    return *err;

  if (auto err = r.stripped("cwd", spec.cwd))
    return *err;
  if (!spec.cwd.starts_with('/'))
    return r.fail("cwd must be an absolute path inside the sandbox");

  if (auto err = r.integer("memory_mb", spec.memory_mb, bound::ge, 0))
    return *err;
  if (auto err = r.at_most("memory_mb", spec.memory_mb, resource_bounds::memory_mb))
    return *err;
  return spec;
}

result<action_context> decode_action_context(const element& ctx) {
  object obj;
  if (ctx.get_object().get(obj) != ok || json::python::stand_in(ctx))
    return box_error{ec::envelope, "context must be an object"};
  reader r{obj, ec::envelope};
  action_context out;

  if (auto err = read_tenant_ids(r, out))
    return *err;

  // InstallationBinding names the generation execution_generation (an alias).
  const bool has_placement = r.get("placement_generation").has_value();
  const bool has_execution = r.get("execution_generation").has_value();
  if (auto err = r.integer("placement_generation", out.placement_generation, bound::ge, 1))
    return *err;
  if (has_execution) {
    int64_t execution = 0;
    if (auto err = r.integer("execution_generation", execution, bound::ge, 1))
      return *err;
    if (has_placement && execution != out.placement_generation)
      return r.fail("execution_generation must equal placement_generation");
    out.placement_generation = execution;
  }

  if (auto v = r.get("installation_uuid")) {
    std::string installation;
    if (auto err = r.as_str("installation_uuid", *v, installation))
      return *err;
    if (strip(installation).empty())
      return r.fail("installation_uuid must not be empty");
  }

  if (r.get("runtime_revision")) {
    int64_t revision = 0;
    if (auto err = r.integer("runtime_revision", revision, bound::ge, 1))
      return *err;
  }

  if (r.get("artifact_digest")) {
    std::string digest;
    if (auto err = r.str("artifact_digest", digest))
      return *err;
    const bool hex64 = digest.size() == 64
                       && std::all_of(digest.begin(), digest.end(), [](char c) {
                            return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                          });
    if (!hex64)
      return r.fail("artifact_digest must be 64 lower-case hex characters");
  }

  if (r.get("entitlement_revision")) {
    if (auto err = r.integer("entitlement_revision", out.entitlement_revision, bound::ge, 0))
      return *err;
  }

  if (auto err = r.forbid_extra({"instance_uuid", "workspace_uuid", "placement_generation",
                                 "installation_uuid", "runtime_revision", "artifact_digest",
                                 "execution_generation", "entitlement_revision"}))
    return *err;
  return out;
}

result<admission_grant> decode_admission_grant(const element& data) {
  object obj;
  if (data.get_object().get(obj) != ok)
    return box_error{ec::validation, "grant must be an object"};
  reader r{obj, ec::validation};
  admission_grant g;
  if (auto err = read_tenant_ids(r, g))
    return *err;
  if (auto err = r.req_int("execution_generation", g.execution_generation, bound::ge, 1))
    return *err;
  if (auto err = r.req_int("entitlement_revision", g.entitlement_revision, bound::ge, 1))
    return *err;
  {
    element v;
    if (auto err = r.require("expires_at", v))
      return *err;
    if (auto err = read_expiry(r, v, g.expires_at))
      return *err;
  }
  if (auto err = r.req_int("max_sessions", g.max_sessions, bound::ge, 0))
    return *err;
  if (auto err = r.req_int("max_managed_processes", g.max_managed_processes, bound::ge, 0))
    return *err;
  if (auto err = r.forbid_extra({"instance_uuid", "workspace_uuid", "execution_generation",
                                 "entitlement_revision", "expires_at", "max_sessions",
                                 "max_managed_processes"}))
    return *err;
  return g;
}

result<admission_revocation> decode_admission_revocation(const element& data) {
  object obj;
  if (data.get_object().get(obj) != ok)
    return box_error{ec::validation, "revocation must be an object"};
  reader r{obj, ec::validation};
  admission_revocation rev;
  if (auto err = read_tenant_ids(r, rev))
    return *err;
  if (auto err = r.req_int("entitlement_revision", rev.entitlement_revision, bound::ge, 1))
    return *err;
  if (auto err = r.forbid_extra({"instance_uuid", "workspace_uuid", "entitlement_revision"}))
    return *err;
  return rev;
}

result<entitlement_snapshot> decode_entitlement_snapshot(const element& data) {
  object obj;
  if (data.get_object().get(obj) != ok)
    return box_error{ec::validation, "entitlement snapshot must be an object"};
  reader r{obj, ec::validation};
  entitlement_snapshot s;

  for (auto [key, field] : {std::pair{"instance_uuid", &entitlement_snapshot::instance_uuid},
                            std::pair{"workspace_uuid", &entitlement_snapshot::workspace_uuid}}) {
    std::string& value = s.*field;
    if (auto err = r.req_str(key, value))
      return *err;
    const size_t n = code_points(value);
    if (n < 1 || n > 256)
      return r.fail(key, "must be between 1 and 256 characters");
  }

  if (auto err = r.req_int("entitlement_revision", s.entitlement_revision, bound::ge, 1))
    return *err;

  {
    element v;
    if (auto err = r.require("status", v))
      return *err;
    std::string_view text;
    if (v.get_string().get(text) != ok)
      text = {};
    if (text == "active")
      s.status = entitlement_status::active;
    else if (text == "suspended")
      s.status = entitlement_status::suspended;
    else if (text == "cancelled")
      s.status = entitlement_status::cancelled;
    else
      return r.fail("status must be one of: active, suspended, cancelled");
  }

  if (auto err = r.req_int("not_before", s.not_before, bound::ge, 0))
    return *err;

  if (auto err = r.req_int("expires_at", s.expires_at, bound::gt, 0))
    return *err;

  if (auto v = r.get("features")) {
    object features;
    if (v->get_object().get(features) != ok)
      return r.fail("features must be an object");
    for (auto field : features) {
      if (strip(field.key).empty())
        return r.fail("Entitlement feature names must be non-empty");
      bool enabled = false;
      if (field.value.get_bool().get(enabled) != ok)
        return r.fail("Entitlement feature " + py::repr(field.key) + " must be a boolean");
      s.features[std::string{field.key}] = enabled;
    }
  }

  if (auto v = r.get("limits")) {
    object limits;
    if (v->get_object().get(limits) != ok)
      return r.fail("limits must be an object");
    for (auto field : limits) {
      if (strip(field.key).empty())
        return r.fail("Entitlement limit names must be non-empty");
      int64_t value = 0;
      if (read_int(field.value, value) != int_read::ok || value < 0)
        return r.fail("Entitlement limit " + py::repr(field.key) + " must be a non-negative integer");
      s.limits[std::string{field.key}] = value;
    }
  }

  if (auto err = r.str("plan_name", s.plan_name))
    return *err;
  if (r.get("plan_name")) {
    const size_t n = code_points(s.plan_name);
    if (n < 1 || n > 128)
      return r.fail("plan_name must be between 1 and 128 characters");
  }

  if (auto err = r.forbid_extra({"instance_uuid", "workspace_uuid", "entitlement_revision",
                                 "status", "not_before", "expires_at", "features", "limits",
                                 "plan_name"}))
    return *err;
  s.fingerprint = canonical_json(s);
  return s;
}

result<admission_policy> decode_admission_policy(const element& data) {
  object obj;
  if (data.get_object().get(obj) != ok)
    return box_error{ec::validation, "box.admission must be an object"};
  reader r{obj, ec::validation};
  admission_policy p;

  if (auto err = r.boolean("required", p.required))
    return *err;

  if (auto v = r.get("logical_session_id")) {
    std::string_view s;
    if (v->get_string().get(s) != ok || s != "global")
      return r.fail("logical_session_id must be global");
  }

  if (auto v = r.get("required_backend")) {
    std::string_view s;
    // "scripted" is accepted for the test backend only: it names no isolation, and
    // its readiness is what its own config says.
    if (v->get_string().get(s) != ok || (s != "bwrap" && s != "nsjail" && s != "scripted"))
      return r.fail("required_backend must be one of: bwrap, nsjail");
    p.required_backend = std::string{s};
  }

  if (auto err = r.integer("max_sessions", p.max_sessions))
    return *err;
  if (p.max_sessions < 0 || p.max_sessions > 1)
    return r.fail("max_sessions must be between 0 and 1");

  if (auto err = r.integer("max_managed_processes", p.max_managed_processes))
    return *err;
  if (p.max_managed_processes != 0)
    return r.fail("max_managed_processes must be 0");

  if (auto err = r.integer("max_grant_ttl_sec", p.max_grant_ttl_sec, bound::gt, 0))
    return *err;

  if (auto err = r.integer("max_timeout_sec", p.max_timeout_sec, bound::gt, 0))
    return *err;

  if (auto err = r.number("cpus", p.cpus, bound::gt, 0))
    return *err;
  if (auto err = r.at_most("cpus", p.cpus, resource_bounds::cpus()))
    return *err;

  if (auto err = r.integer("memory_mb", p.memory_mb, bound::at_least, 32))
    return *err;
  if (auto err = r.at_most("memory_mb", p.memory_mb, resource_bounds::memory_mb))
    return *err;

  if (auto err = r.integer("pids_limit", p.pids_limit, bound::gt, 0))
    return *err;
  if (auto err = r.at_most("pids_limit", p.pids_limit, resource_bounds::pids_limit))
    return *err;

  if (auto err = r.boolean("read_only_rootfs", p.read_only_rootfs))
    return *err;

  if (auto err = r.integer("workspace_quota_mb", p.workspace_quota_mb, bound::ge, 0))
    return *err;
  if (auto err = r.at_most("workspace_quota_mb", p.workspace_quota_mb, resource_bounds::quota_mb))
    return *err;

  if (auto err = r.integer("readiness_cache_sec", p.readiness_cache_sec, bound::ge, 0))
    return *err;

  if (auto err = r.stripped("entitlements_file", p.entitlements_file))
    return *err;

  if (auto err = r.forbid_extra({"required", "logical_session_id", "required_backend",
                                 "max_sessions", "max_managed_processes", "max_grant_ttl_sec",
                                 "max_timeout_sec", "cpus", "memory_mb", "pids_limit",
                                 "read_only_rootfs", "workspace_quota_mb",
                                 "readiness_cache_sec", "entitlements_file"}))
    return *err;
  return p;
}

result<runtime_limits> decode_runtime_limits(const element& data, const runtime_limits& base) {
  object obj;
  if (data.get_object().get(obj) != ok)
    return box_error{ec::value, "box.limits must be an object"};
  // Validate everything into a copy so a failure leaves `base` untouched.
  runtime_limits out = base;
  for (const auto& def : limit_defs) {
    auto v = lookup(obj, def.name);
    if (!v)
      continue;
    const std::string name = "box.limits." + std::string{def.name};
    int64_t value = 0;
    switch (read_int(*v, value)) {
      case int_read::not_int: return box_error{ec::value, name + " must be an integer"};
      case int_read::overflow: value = INT64_MAX; break;
      case int_read::underflow: value = INT64_MIN; break;
      case int_read::ok: break;
    }
    if (value < def.min || value > def.max)
      return box_error{ec::value, name + " must be between " + std::to_string(def.min) + " and "
                                    + std::to_string(def.max)};
    out.*def.field = value;
  }
  return out;
}

result<box_config> decode_box_config(const element& data, const box_config& base) {
  object obj;
  if (data.get_object().get(obj) != ok)
    return box_error{ec::value, "box config must be an object"};
  box_config cfg = base;

  if (auto v = lookup(obj, "backend")) {
    std::string_view s;
    if (v->is_null())
      s = {};
    else if (v->get_string().get(s) != ok)
      return box_error{ec::value, "box.backend must be a string"};
    s = strip(s);
    if (std::find(std::begin(backend_names), std::end(backend_names), s) == std::end(backend_names))
      return box_error{ec::value, "box.backend must be one of: \"\", auto, local, bwrap, nsjail, "
                                  "process, scripted"};
    cfg.backend = std::string{s};
  }

  if (auto v = lookup(obj, "limits"); v && !v->is_null()) {
    auto limits = decode_runtime_limits(*v, base.limits);
    if (!limits)
      return limits.error();
    cfg.limits = limits.value();
  }

  if (auto v = lookup(obj, "local")) {
    auto local = decode_local(*v);
    if (!local)
      return local.error();
    cfg.local = std::move(local.value());
  }

  if (auto v = lookup(obj, "admission")) {
    cfg.admission = admission_policy{};
    cfg.admission_error.clear();
    if (!v->is_null()) {
      auto policy = decode_admission_policy(*v);
      if (policy) {
        cfg.admission = policy.value();
      } else {
        // Fail closed: admission stays required and reports why it cannot be used.
        cfg.admission.required = true;
        cfg.admission_error = policy.error().message;
      }
    }
  }

  if (auto v = lookup(obj, "scripted")) {
    auto scripted = decode_scripted(*v);
    if (!scripted)
      return scripted.error();
    cfg.scripted = std::move(scripted.value());
  }
  return cfg;
}

// -- encoders --------------------------------------------------------------------------

void encode(json::writer& w, const session_info& x) {
  w.begin_object();
  w.key("session_id").value(x.session_id);
  w.key("backend_name").value(x.backend_name);
  w.key("backend_session_id").value(x.backend_session_id);
  w.key("image").value(x.image);
  w.key("network").value(to_string(x.network));
  w.key("host_path");
  string_or_null(w, x.host_path);
  w.key("host_path_mode").value(to_string(x.host_path_mode));
  w.key("mount_path").value(x.mount_path);
  w.key("persistent").value(x.persistent);
  w.key("cpus").value(x.cpus);
  w.key("memory_mb").value(x.memory_mb);
  w.key("pids_limit").value(x.pids_limit);
  w.key("read_only_rootfs").value(x.read_only_rootfs);
  w.key("workspace_quota_mb").value(x.workspace_quota_mb);
  w.key("created_at").value(iso_utc_z(x.created_at));
  w.key("last_used_at").value(iso_utc_z(x.last_used_at));
  if (!x.managed_processes.empty()) {
    w.key("managed_processes").begin_object();
    for (const auto& p : x.managed_processes) {
      w.key(p.process_id);
      encode(w, p);
    }
    w.end_object();
    for (const auto& p : x.managed_processes)
      if (p.process_id == "default") {
        w.key("managed_process");
        encode(w, p);
      }
  }
  w.end_object();
}

void encode(json::writer& w, const exec_result& x) {
  w.begin_object();
  w.key("session_id").value(x.session_id);
  w.key("backend_name").value(x.backend_name);
  w.key("status").value(to_string(x.status));
  w.key("exit_code");
  if (x.status == exec_status::timed_out)
    w.null();
  else
    w.value(x.exit_code);
  w.key("stdout").value(x.stdout_text);
  w.key("stderr").value(x.stderr_text);
  w.key("duration_ms").value(x.duration_ms);
  w.end_object();
}

void encode(json::writer& w, const process_info& x) {
  const bool exited = x.status == process_status::exited;
  std::vector<std::string> env_keys = x.env_keys;
  std::sort(env_keys.begin(), env_keys.end());
  w.begin_object();
  w.key("session_id").value(x.session_id);
  w.key("process_id").value(x.process_id);
  w.key("status").value(to_string(x.status));
  w.key("command").value(x.command);
  w.key("args").begin_array();
  for (const auto& a : x.args)
    w.value(a);
  w.end_array();
  w.key("cwd").value(x.cwd);
  w.key("env_keys").begin_array();
  for (const auto& k : env_keys)
    w.value(k);
  w.end_array();
  w.key("attached").value(x.attached);
  w.key("started_at").value(iso_utc_z(x.started_at));
  w.key("exited_at");
  if (exited)
    w.value(iso_utc_z(x.exited_at));
  else
    w.null();
  w.key("exit_code");
  if (exited)
    w.value(x.exit_code);
  else
    w.null();
  w.key("stderr_preview").value(x.stderr_preview);
  w.end_object();
}

void encode(json::writer& w, const grant_receipt& x) {
  w.begin_object();
  w.key("installed").value(true);
  w.key("workspace_uuid").value(x.workspace_uuid);
  w.key("execution_generation").value(x.execution_generation);
  w.key("entitlement_revision").value(x.entitlement_revision);
  w.key("max_sessions").value(x.max_sessions);
  w.key("max_managed_processes").value(x.max_managed_processes);
  w.key("expires_at").value(iso_utc_offset(x.expires_at));
  w.end_object();
}

void encode(json::writer& w, const revocation_receipt& x) {
  w.begin_object();
  w.key("revoked").value(true);
  w.key("workspace_uuid").value(x.workspace_uuid);
  w.key("entitlement_revision").value(x.entitlement_revision);
  w.end_object();
}

void encode(json::writer& w, const entitlement_receipt& x) {
  w.begin_object();
  w.key("accepted").value(true);
  w.key("workspace_uuid").value(x.workspace_uuid);
  w.key("entitlement_revision").value(x.entitlement_revision);
  w.key("revoked_sessions").value(x.revoked_sessions);
  w.end_object();
}

void encode(json::writer& w, const box_spec& x) {
  w.begin_object();
  w.key("cmd").value(x.cmd);
  w.key("workdir").value(x.workdir);
  w.key("timeout_sec").value(x.timeout_sec);
  w.key("network").value(to_string(x.network));
  w.key("session_id").value(x.session_id);
  map_object(w, "env", x.env);
  w.key("image").value(x.image);
  w.key("host_path");
  string_or_null(w, x.host_path);
  w.key("host_path_mode").value(to_string(x.host_path_mode));
  w.key("mount_path").value(x.mount_path);
  w.key("extra_mounts").begin_array();
  for (const auto& m : x.extra_mounts) {
    w.begin_object();
    w.key("host_path").value(m.host_path);
    w.key("mount_path").value(m.mount_path);
    w.key("mode").value(to_string(m.mode));
    w.end_object();
  }
  w.end_array();
  w.key("skill_name");
  string_or_null(w, x.skill_name);
  w.key("persistent").value(x.persistent);
  w.key("cpus").value(x.cpus);
  w.key("memory_mb").value(x.memory_mb);
  w.key("pids_limit").value(x.pids_limit);
  w.key("read_only_rootfs").value(x.read_only_rootfs);
  w.key("workspace_quota_mb").value(x.workspace_quota_mb);
  w.end_object();
}

void encode(json::writer& w, const entitlement_snapshot& x) {
  w.begin_object();
  w.key("instance_uuid").value(x.instance_uuid);
  w.key("workspace_uuid").value(x.workspace_uuid);
  w.key("entitlement_revision").value(x.entitlement_revision);
  w.key("status").value(to_string(x.status));
  w.key("not_before").value(x.not_before);
  w.key("expires_at").value(x.expires_at);
  map_object(w, "features", x.features);
  map_object(w, "limits", x.limits);
  w.key("plan_name");
  string_or_null(w, x.plan_name);
  w.end_object();
}

std::string canonical_json(const entitlement_snapshot& x) {
  // Keys in sorted order; std::map already sorts features and limits bytewise, which
  // is code-point order for UTF-8.
  json::writer w;
  w.begin_object();
  w.key("entitlement_revision").value(x.entitlement_revision);
  w.key("expires_at").value(x.expires_at);
  map_object(w, "features", x.features);
  w.key("instance_uuid").value(x.instance_uuid);
  map_object(w, "limits", x.limits);
  w.key("not_before").value(x.not_before);
  if (!x.plan_name.empty())
    w.key("plan_name").value(x.plan_name);
  w.key("status").value(to_string(x.status));
  w.key("workspace_uuid").value(x.workspace_uuid);
  w.end_object();
  return w.take();
}

} // namespace boxrt
