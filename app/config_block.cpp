#include "app/config_block.hpp"

#include <charconv>
#include <set>

namespace boxrt::config {

address_fault parse_host_port(std::string_view text, uint16_t min_port, std::string& host,
                              uint16_t& port) {
  auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size())
    return address_fault::shape;
  auto h = text.substr(0, colon);
  if (h.front() == '[') {
    if (h.back() != ']' || h.size() < 3)
      return address_fault::shape;
    h = h.substr(1, h.size() - 2);
  }
  auto p = text.substr(colon + 1);
  if (p.find_first_not_of("0123456789") != std::string_view::npos)
    return address_fault::port_not_number;
  unsigned value = 0;
  auto [end, errc] = std::from_chars(p.data(), p.data() + p.size(), value);
  if (errc != std::errc{} || value < min_port || value > 65535)
    return address_fault::port_range;
  host = std::string{h};
  port = static_cast<uint16_t>(value);
  return address_fault::none;
}

std::optional<element> block::get(const char* key) const {
  element v;
  if (obj_[key].get(v) != simdjson::SUCCESS || v.is_null())
    return std::nullopt;
  return v;
}

box_error block::only_keys(std::initializer_list<std::string_view> keys) const {
  std::set<std::string_view> known{keys};
  for (auto field : obj_)
    if (!known.contains(field.key))
      return fail("unknown key " + path_ + std::string{field.key});
  return {};
}

box_error block::string(const char* key, std::string& out, bool non_empty, presence p) const {
  auto v = get(key);
  if (!v) {
    if (p == presence::required)
      return fail(path_ + key + " is required");
    return {};
  }
  std::string_view s;
  if (v->get_string().get(s) != simdjson::SUCCESS || (non_empty && s.empty()))
    return fail(path_ + key + (non_empty ? " must be a non-empty string" : " must be a string"));
  out = std::string{s};
  return {};
}

box_error block::integer(const char* key, int64_t min, int64_t max, int64_t& out) const {
  auto v = get(key);
  if (!v)
    return {};
  int64_t n = 0;
  if (v->is_bool() || v->get_int64().get(n) != simdjson::SUCCESS)
    return fail(path_ + key + " must be an integer");
  if (n < min || n > max)
    return fail(path_ + key + " must be between " + std::to_string(min) + " and "
                + std::to_string(max));
  out = n;
  return {};
}

box_error block::size(const char* key, size_t min, size_t max, size_t& out) const {
  int64_t n = static_cast<int64_t>(out);
  if (auto e = integer(key, static_cast<int64_t>(min), static_cast<int64_t>(max), n))
    return e;
  out = static_cast<size_t>(n);
  return {};
}

box_error block::boolean(const char* key, bool& out) const {
  auto v = get(key);
  if (v && v->get_bool().get(out) != simdjson::SUCCESS)
    return fail(path_ + key + " must be a boolean");
  return {};
}

} // namespace boxrt::config
