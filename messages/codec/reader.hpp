// Internal to messages/codec/: typed access to simdjson objects with the reference's
// validation messages (reader), and the small checks the decoders share.
#pragma once

#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <utility>

#include "messages/base/pytext.hpp"
#include "messages/base/python_json.hpp"
#include "messages/time.hpp"

#include "messages/codec.hpp"

namespace boxrt::codec_detail {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

using maybe_error = std::optional<box_error>;
using py::code_points;
using py::strip;

inline constexpr auto ok = simdjson::SUCCESS;

// -- reading helpers ---------------------------------------------------------------

/// The value of `key`, the last one when duplicated (Python's json keeps the last).
std::optional<element> lookup(const object& obj, std::string_view key);

enum class int_read { ok, not_int, overflow, underflow };

/// A JSON integer only: never a bool, a float (even 1.0) or a string. One beyond 64
/// bits (which Python's json reads, see messages/base/python_json.hpp) over- or underflows.
int_read read_int(const element& e, int64_t& out);

/// Any JSON number (integer or float), never a bool or a string.
bool read_number(const element& e, double& out);

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
                     std::map<std::string, std::string>& out);

/// Tenant ids as an entitlement snapshot bounds them (and the relay's handshake): every
/// action's ids become keys of boxd's state (a cluster's etcd among them), so none may
/// be larger (a boxd extension for grants, revocations and contexts).
inline constexpr size_t max_tenant_id_chars = 256;

/// instance_uuid then workspace_uuid: required, stripped, 1 to 256 characters.
template <class T>
maybe_error read_tenant_ids(const reader& r, T& out) {
  for (auto [key, value] : {std::pair<std::string_view, std::string*>{"instance_uuid", &out.instance_uuid},
                            std::pair<std::string_view, std::string*>{"workspace_uuid", &out.workspace_uuid}}) {
    if (auto err = r.req_id(key, *value))
      return err;
    if (code_points(*value) > max_tenant_id_chars)
      return r.fail(key, "must be between 1 and 256 characters");
  }
  return {};
}

/// posixpath.isabs or ntpath.isabs: "/x", "C:\x", "C:/x", "\\server\share".
bool is_absolute_host_path(std::string_view p) noexcept;

/// Decodes one code point of valid UTF-8 at `i` and advances.
char32_t next_code_point(std::string_view s, size_t& i) noexcept;

/// An approximation of Python's str.isalnum() for one code point: ASCII letters and
/// digits, and non-ASCII code points outside the punctuation, space, symbol and
/// private-use blocks that occur in practice.
bool is_alnum_code_point(char32_t cp) noexcept;

/// skill_name: at most 64 characters; with '-' and '_' removed, non-empty alphanumeric.
bool valid_skill_name(std::string_view name) noexcept;

bool valid_process_id(std::string_view id) noexcept;

/// The raw value as admission must compare it: a stripped string, or the compact JSON
/// of any other non-null value (so a forged non-string never passes as blank).
std::string raw_text(const element& e);

inline constexpr std::pair<std::string_view, network_mode> network_values[] = {
  {"off", network_mode::off}, {"on", network_mode::on}};

inline constexpr std::pair<std::string_view, mount_mode> mount_values[] = {
  {"none", mount_mode::none}, {"ro", mount_mode::ro}, {"rw", mount_mode::rw}};

maybe_error decode_mount(const element& e, size_t index, mount_spec& out);

/// Epoch µs from an aware ISO string or a Unix timestamp in seconds.
maybe_error read_expiry(const reader& r, const element& v, epoch_us& out);

} // namespace boxrt::codec_detail
