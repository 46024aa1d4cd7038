#include "backends/cluster/ownership.hpp"

#include "backends/cluster/membership.hpp"

#include <simdjson.h>

#include "messages/base/json.hpp"
#include "messages/tenancy.hpp"

namespace boxrt::cluster {

namespace {

std::string encode_owner(const std::string& node_id, const std::string& address) {
  json::writer w;
  w.begin_object().key("node_id").value(node_id).key("address").value(address).end_object();
  return w.take();
}

result<owner> decode_owner(const kv::key_value& kv) {
  simdjson::dom::parser parser;
  simdjson::dom::object obj;
  std::string_view node_id, address;
  if (parser.parse(kv.value).get_object().get(obj) != simdjson::SUCCESS
      || obj["node_id"].get_string().get(node_id) != simdjson::SUCCESS
      || obj["address"].get_string().get(address) != simdjson::SUCCESS)
    return box_error{ec::runtime_unavailable, "the owner key " + kv.key + " does not name a node"};
  return owner{std::string{node_id}, std::string{address}, kv.create_revision, kv.lease};
}

} // namespace

std::string preferred_owner(std::string_view ns, const std::vector<std::string>& members) {
  std::string best, best_weight;
  for (const auto& m : members) {
    // Hex digests of one length compare as the numbers they spell.
    auto weight = sha256_hex(std::string{ns} + '\n' + m);
    if (best.empty() || weight > best_weight || (weight == best_weight && m < best)) {
      best = m;
      best_weight = std::move(weight);
    }
  }
  return best;
}

ownership::ownership(const kv::connector& store, std::string prefix)
  : client_(store()), prefix_(std::move(prefix)) {
}

result<std::optional<owner>> ownership::owner_of(std::string_view ns) {
  auto kv = client_->get(owner_key(ns));
  if (!kv)
    return kv.error();
  if (!*kv)
    return std::optional<owner>{};
  auto o = decode_owner(**kv);
  if (!o)
    return o.error();
  return std::optional<owner>{std::move(o.value())};
}

result<owner> ownership::claim(std::string_view ns, const std::string& node_id, const std::string& address,
                               int64_t lease) {
  if (lease == 0)
    return box_error{ec::runtime_unavailable, "node " + node_id + " holds no lease to own a workspace with"};
  auto made = client_->create(owner_key(ns), encode_owner(node_id, address), lease);
  if (!made)
    return made.error();
  if (made->created)
    return owner{node_id, address, made->revision, lease};
  if (!made->existing) // the owner left between the two halves of the transaction's read
    return box_error{ec::runtime_unavailable, "the owner of " + std::string{ns} + " changed during the claim"};
  auto held = decode_owner(*made->existing);
  if (!held)
    return held.error();
  if (held->node_id == node_id && held->lease != lease)
    return box_error{ec::runtime_unavailable, "node " + node_id + " holds " + std::string{ns}
                                                + " under an earlier lease; it can be claimed again when that lease ends"};
  return held;
}

result<std::map<std::string, std::string>> ownership::members() {
  auto listed = client_->list(prefix_ + "/members/");
  if (!listed)
    return listed.error();
  std::map<std::string, std::string> out;
  const auto skip = prefix_.size() + 9; // "/members/"
  for (auto& kv : *listed)
    if (kv.key.size() > skip)
      out[kv.key.substr(skip)] = member_address(kv.value);
  return out;
}

} // namespace boxrt::cluster
