#include "messages/network_policy.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "messages/base/json.hpp"

namespace boxrt {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

// -- cidr ----------------------------------------------------------------------------

std::optional<cidr> cidr::parse(std::string_view text) {
  if (text.empty() || text.size() > 64)
    return std::nullopt;
  std::string addr{text};
  int prefix = -1;
  if (auto slash = addr.find('/'); slash != std::string::npos) {
    auto digits = addr.substr(slash + 1);
    addr.resize(slash);
    if (digits.empty() || digits.size() > 3
        || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return std::nullopt;
    prefix = std::stoi(digits);
  }
  cidr out;
  if (::inet_pton(AF_INET, addr.c_str(), out.bytes.data()) == 1) {
    out.family = 4;
    out.prefix = prefix < 0 ? 32 : prefix;
    if (out.prefix > 32)
      return std::nullopt;
  } else if (::inet_pton(AF_INET6, addr.c_str(), out.bytes.data()) == 1) {
    out.family = 6;
    out.prefix = prefix < 0 ? 128 : prefix;
    if (out.prefix > 128)
      return std::nullopt;
  } else {
    return std::nullopt;
  }
  // Host bits cleared: "10.1.2.3/8" is 10.0.0.0/8.
  const int total = out.family == 4 ? 4 : 16;
  for (int i = 0; i < total; ++i) {
    int keep = std::clamp(out.prefix - i * 8, 0, 8);
    out.bytes[i] &= static_cast<uint8_t>(keep == 0 ? 0 : 0xFF << (8 - keep));
  }
  return out;
}

std::string cidr::text() const {
  char buf[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(family == 4 ? AF_INET : AF_INET6, bytes.data(), buf, sizeof buf);
  return std::string{buf} + "/" + std::to_string(prefix);
}

bool cidr::contains(int fam, const uint8_t* address) const {
  if (fam != family)
    return false;
  for (int i = 0, bits = prefix; bits > 0; ++i, bits -= 8) {
    auto mask = static_cast<uint8_t>(bits >= 8 ? 0xFF : 0xFF << (8 - bits));
    if ((address[i] & mask) != bytes[i])
      return false;
  }
  return true;
}

std::vector<std::string> without_covered(const std::vector<std::string>& cidrs) {
  std::vector<cidr> all;
  for (const auto& x : cidrs)
    if (auto c = cidr::parse(x); c && std::find(all.begin(), all.end(), *c) == all.end())
      all.push_back(*c);
  std::vector<std::string> out;
  for (const auto& a : all) {
    bool covered = std::any_of(all.begin(), all.end(), [&](const cidr& b) {
      return !(b == a) && b.prefix <= a.prefix && b.contains(a.family, a.bytes.data());
    });
    if (!covered)
      out.push_back(a.text());
  }
  return out;
}

// -- names ---------------------------------------------------------------------------

std::optional<std::string> normalize_dns_name(std::string_view name) {
  if (!name.empty() && name.back() == '.')
    name.remove_suffix(1);
  if (name.empty() || name.size() > 253)
    return std::nullopt;
  std::string out;
  out.reserve(name.size());
  size_t label = 0;
  for (char c : name) {
    if (c == '.') {
      if (label == 0)
        return std::nullopt;
      label = 0;
      out += c;
      continue;
    }
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    if (!ok || ++label > 63)
      return std::nullopt;
    out += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  if (label == 0)
    return std::nullopt;
  return out;
}

bool domain_allowed(const network_policy& p, std::string_view name) {
  for (const auto& d : p.allow_domains) {
    if (d.starts_with("*.")) {
      std::string_view suffix{d};
      suffix.remove_prefix(1);  // ".suffix"
      if (name.size() > suffix.size() && name.ends_with(suffix))
        return true;
    } else if (name == d) {
      return true;
    }
  }
  return false;
}

// -- JSON ----------------------------------------------------------------------------

namespace {

box_error bad(ec code, std::string_view path, std::string what) {
  return box_error{code, std::string{path} + ": " + std::move(what)};
}

template <class T>
void sort_unique(std::vector<T>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

result<std::vector<std::string>> read_strings(const element& v, const std::string& path, size_t max, ec code) {
  array arr;
  if (v.get_array().get(arr) != simdjson::SUCCESS)
    return bad(code, path, "must be a list of strings");
  if (arr.size() > max)
    return bad(code, path, "may hold at most " + std::to_string(max) + " entries");
  std::vector<std::string> out;
  size_t i = 0;
  for (auto item : arr) {
    std::string_view s;
    if (item.get_string().get(s) != simdjson::SUCCESS)
      return bad(code, path + "[" + std::to_string(i) + "]", "must be a string");
    out.emplace_back(s);
    ++i;
  }
  return out;
}

} // namespace

result<network_policy> decode_network_policy(const element& v, std::string_view path_view, ec code) {
  const std::string path{path_view};
  object obj;
  if (v.get_object().get(obj) != simdjson::SUCCESS)
    return bad(code, path, "must be an object");
  network_policy out;
  for (auto field : obj) {
    const std::string key{field.key};
    const std::string at = path + "." + key;
    if (key == "allow_domains") {
      auto list = read_strings(field.value, at, max_policy_domains, code);
      if (!list)
        return list.error();
      for (size_t i = 0; i < list->size(); ++i) {
        std::string_view raw = (*list)[i];
        bool wildcard = raw.starts_with("*.");
        auto name = normalize_dns_name(wildcard ? raw.substr(2) : raw);
        if (!name)
          return bad(code, at + "[" + std::to_string(i) + "]",
                     "must be a DNS name or *.suffix (got " + json::quote(raw) + ")");
        out.allow_domains.push_back(wildcard ? "*." + *name : *name);
      }
    } else if (key == "allow_cidrs" || key == "deny_cidrs") {
      auto list = read_strings(field.value, at, max_policy_cidrs, code);
      if (!list)
        return list.error();
      auto& dest = key == "allow_cidrs" ? out.allow_cidrs : out.deny_cidrs;
      for (size_t i = 0; i < list->size(); ++i) {
        auto c = cidr::parse((*list)[i]);
        if (!c)
          return bad(code, at + "[" + std::to_string(i) + "]",
                     "must be an IPv4 or IPv6 address or CIDR (got " + json::quote((*list)[i]) + ")");
        dest.push_back(c->text());
      }
    } else if (key == "allow_ports") {
      array arr;
      if (field.value.get_array().get(arr) != simdjson::SUCCESS)
        return bad(code, at, "must be a list of port numbers");
      if (arr.size() > max_policy_ports)
        return bad(code, at, "may hold at most " + std::to_string(max_policy_ports) + " entries");
      out.allow_ports.clear();
      size_t i = 0;
      for (auto item : arr) {
        int64_t port = 0;
        if (!item.is_int64() || item.get_int64().get(port) != simdjson::SUCCESS || port < 1 || port > 65535)
          return bad(code, at + "[" + std::to_string(i) + "]", "must be an integer between 1 and 65535");
        // 53 is boxd's resolver's, never a filtered TCP port.
        if (port == 53)
          return bad(code, at + "[" + std::to_string(i) + "]", "53 is DNS, which goes to boxd's resolver only");
        out.allow_ports.push_back(static_cast<int32_t>(port));
        ++i;
      }
    } else if (key == "dns") {
      std::string_view s;
      if (field.value.get_string().get(s) != simdjson::SUCCESS || s != "boxd")
        return bad(code, at, "must be \"boxd\" (DNS goes to boxd's resolver only)");
    } else if (key == "profile") {
      std::string_view s;
      if (field.value.get_string().get(s) != simdjson::SUCCESS || s.size() > 128)
        return bad(code, at, "must be a string of at most 128 characters");
      out.profile = std::string{s};
    } else {
      return bad(code, at, "is not a network policy key (allow_domains, allow_cidrs, deny_cidrs, allow_ports, dns)");
    }
  }
  sort_unique(out.allow_domains);
  out.allow_cidrs = without_covered(out.allow_cidrs);
  out.deny_cidrs = without_covered(out.deny_cidrs);
  sort_unique(out.allow_cidrs);
  sort_unique(out.deny_cidrs);
  sort_unique(out.allow_ports);
  return out;
}

result<network_policy> parse_network_policy(std::string_view text, std::string_view path, ec code) {
  simdjson::dom::parser parser;
  element root;
  if (parser.parse(text.data(), text.size()).get(root) != simdjson::SUCCESS)
    return bad(code, path, "is not JSON");
  return decode_network_policy(root, path, code);
}

std::string encode_network_policy(const network_policy& p) {
  json::writer w;
  w.begin_object();
  auto strings = [&](const char* key, const std::vector<std::string>& xs) {
    w.key(key).begin_array();
    for (const auto& x : xs)
      w.value(x);
    w.end_array();
  };
  strings("allow_domains", p.allow_domains);
  strings("allow_cidrs", p.allow_cidrs);
  strings("deny_cidrs", p.deny_cidrs);
  w.key("allow_ports").begin_array();
  for (auto port : p.allow_ports)
    w.value(static_cast<int64_t>(port));
  w.end_array();
  w.key("dns").value(p.dns);
  if (!p.profile.empty())
    w.key("profile").value(p.profile);
  w.end_object();
  return w.take();
}

} // namespace boxrt
