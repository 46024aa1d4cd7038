#include "backends/cluster/node.hpp"

#include <charconv>

#include <spdlog/spdlog.h>

#include "messages/base/json.hpp"
#include "messages/tenancy.hpp"

namespace boxrt::cluster {

namespace {

/// At most this many refused links are remembered for GET /cluster (the newest).
constexpr size_t max_refusals = 32;

/// What a uid's etcd key holds for the allocator's `key`: a session's names this node,
/// since session ids are unique neither across nodes nor across runs of one.
std::string uid_value(const std::string& node_id, const std::string& key) {
  return key.starts_with("session:") ? "session:" + node_id + ":" + key.substr(8) : key;
}

} // namespace

node::node(node_options o) : opts_(std::move(o)) {
}

void node::start(std::function<void(int64_t)> on_deadline) {
  membership::options m;
  m.store = opts_.store;
  m.prefix = opts_.prefix;
  m.node_id = opts_.node_id;
  m.address = opts_.address;
  m.lease = opts_.lease;
  m.on_deadline = std::move(on_deadline);
  membership_ = std::make_unique<membership>(std::move(m));
  membership_->start();
}

void node::stop() {
  membership_.reset();
  forget_owned();
}

bool node::serving() const {
  return membership_ && membership_->serving();
}

bool node::wait_serving(std::chrono::milliseconds timeout) const {
  return membership_ && membership_->wait_serving(true, timeout);
}

std::string node::reason() const {
  return membership_ ? membership_->reason() : std::string{"it has not started"};
}

int64_t node::lease() const {
  return membership_ ? membership_->lease_id() : 0;
}

std::string node::not_serving_text() const {
  return "Box cluster node " + opts_.node_id + " is not serving: " + reason();
}

std::optional<int64_t> node::owned(const std::string& ns) const {
  auto current = lease();
  std::lock_guard lock{mtx_};
  auto i = owned_.find(ns);
  if (i == owned_.end() || current == 0 || i->second.lease != current)
    return std::nullopt;
  return i->second.epoch;
}

void node::set_owned(const std::string& ns, int64_t epoch, int64_t lease) {
  std::lock_guard lock{mtx_};
  owned_[ns] = held{epoch, lease};
}

void node::forget_owned() {
  std::lock_guard lock{mtx_};
  owned_.clear();
}

std::optional<fence> node::fence_of(const std::string& record_key) const {
  auto ids = split_workspace_key(record_key);
  if (!ids)
    return std::nullopt;
  auto ns = box_namespace(ids->first, ids->second);
  auto epoch = owned(ns);
  if (!epoch)
    return std::nullopt;
  return fence{owner_key(ns), *epoch};
}

void node::set_registered(std::map<std::string, std::string> members, bool etcd_up) {
  std::lock_guard lock{mtx_};
  etcd_up_ = etcd_up;
  if (etcd_up)
    registered_ = std::move(members);
}

void node::set_link(const std::string& node_id, bool alive, std::string error) {
  std::lock_guard lock{mtx_};
  links_[node_id] = {alive, std::move(error)};
}

std::vector<std::string> node::alive_peers() const {
  std::lock_guard lock{mtx_};
  std::vector<std::string> out;
  for (auto& [id, address] : registered_)
    if (auto i = links_.find(id); id != opts_.node_id && i != links_.end() && i->second.first)
      out.push_back(id);
  return out;
}

std::map<std::string, std::string> node::registered() const {
  std::lock_guard lock{mtx_};
  return registered_;
}

void node::add_refusal(refusal r) {
  std::lock_guard lock{mtx_};
  if (refusals_.size() >= max_refusals)
    refusals_.erase(refusals_.begin());
  refusals_.push_back(std::move(r));
}

std::string node::status_json() const {
  bool is_serving = serving();
  auto why = is_serving ? std::string{} : reason();
  std::lock_guard lock{mtx_};
  json::writer w;
  w.begin_object();
  w.key("node_id").value(opts_.node_id);
  w.key("serving").value(is_serving);
  if (!is_serving)
    w.key("reason").value(why);
  w.key("etcd").value(etcd_up_ ? "up" : "down");
  w.key("members").begin_array();
  auto members = registered_;
  members.emplace(opts_.node_id, opts_.address); // itself, also while etcd is down
  for (auto& [id, address] : members) {
    bool self = id == opts_.node_id;
    auto link = links_.find(id);
    w.begin_object();
    w.key("node_id").value(id);
    w.key("address").value(address);
    w.key("alive").value(self ? is_serving : (link != links_.end() && link->second.first));
    w.key("self").value(self);
    if (!self && link != links_.end() && !link->second.first && !link->second.second.empty())
      w.key("link_error").value(link->second.second);
    w.end_object();
  }
  w.end_array();
  w.key("refused").begin_array();
  for (auto& r : refusals_) {
    w.begin_object();
    w.key("node_id").value(r.node_id);
    w.key("address").value(r.address);
    w.key("reason").value(r.reason);
    w.end_object();
  }
  w.end_array();
  w.end_object();
  return w.take();
}

result<std::string> node::owner_json(const std::string& instance, const std::string& workspace) const {
  auto ns = box_namespace(instance, workspace);
  ownership o{opts_.store, opts_.prefix};
  auto current = o.owner_of(ns);
  if (!current)
    return current.error();
  json::writer w;
  w.begin_object();
  w.key("workspace_namespace").value(ns);
  if (*current) {
    w.key("owner").value((*current)->node_id);
    w.key("epoch").value((*current)->epoch);
  } else {
    w.key("owner").null();
    w.key("epoch").null();
  }
  w.end_object();
  return w.take();
}

int node::reserve_uid(uint32_t uid, const std::string& key, bool session) {
  // No lease on the key: a session's tree outlives the lease, and so must its uid's
  // reservation. A node that is not a member starts no session.
  if (session && lease() == 0)
    return -1;
  auto store = opts_.store();
  auto& c = *store;
  auto value = uid_value(opts_.node_id, key);
  auto made = c.create(opts_.prefix + "/uids/" + std::to_string(uid), value);
  if (!made)
    return -1;
  return made->created || (made->existing && made->existing->value == value) ? 1 : 0;
}

void node::release_uid(uint32_t uid, const std::string& key) {
  auto store = opts_.store();
  auto& c = *store;
  auto path = opts_.prefix + "/uids/" + std::to_string(uid);
  if (auto kv = c.get(path); kv && *kv && (*kv)->value == uid_value(opts_.node_id, key))
    (void)c.erase(path);
}

void node::reconcile_uids(const std::map<uint32_t, std::string>& held) {
  auto store = opts_.store();
  auto& c = *store;
  const auto dir = opts_.prefix + "/uids/";
  auto listed = c.list(dir);
  if (!listed) {
    spdlog::warn("cluster: uid reservations not checked: {}", listed.error().message);
    return;
  }
  const auto mine = "session:" + opts_.node_id + ":";
  std::map<uint32_t, std::string> reserved;
  for (auto& kv : *listed) {
    uint32_t uid = 0;
    auto digits = std::string_view{kv.key}.substr(dir.size());
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), uid);
    if (ec != std::errc{} || end != digits.data() + digits.size())
      continue;
    auto h = held.find(uid);
    if (kv.value.starts_with(mine) && (h == held.end() || uid_value(opts_.node_id, h->second) != kv.value)) {
      if (auto gone = c.erase(kv.key); !gone)
        spdlog::warn("cluster: uid {} stays reserved: {}", uid, gone.error().message);
      continue;
    }
    reserved[uid] = kv.value;
  }
  for (auto& [uid, key] : held) {
    if (key.empty())
      continue;
    auto want = uid_value(opts_.node_id, key);
    if (auto r = reserved.find(uid); r != reserved.end()) {
      if (r->second != want)
        spdlog::error("cluster: uid {} is held here for {} but reserved for {}", uid, key, r->second);
      continue;
    }
    if (auto made = c.create(dir + std::to_string(uid), want); !made || !made->created)
      spdlog::error("cluster: uid {} held here for {} cannot be reserved cluster-wide{}", uid, key,
                    made ? " (reserved meanwhile by another holder)" : ": " + made.error().message);
  }
}

result<std::string> node::pin_instance(std::string_view id) {
  {
    std::lock_guard lock{mtx_};
    if (!pinned_.empty())
      return pinned_;
  }
  auto store = opts_.store();
  auto& c = *store;
  auto made = c.create(opts_.prefix + "/trusted-instance", id);
  if (!made)
    return made.error();
  std::string winner = made->created ? std::string{id} : made->existing ? made->existing->value : std::string{};
  if (winner.empty())
    return box_error{ec::runtime_unavailable, "the cluster's trusted instance changed during the pin"};
  std::lock_guard lock{mtx_};
  pinned_ = winner;
  return winner;
}

std::optional<std::string> node::pinned_instance() {
  {
    std::lock_guard lock{mtx_};
    if (!pinned_.empty())
      return pinned_;
  }
  auto store = opts_.store();
  auto& c = *store;
  auto kv = c.get(opts_.prefix + "/trusted-instance");
  if (!kv)
    return std::nullopt;
  if (!*kv)
    return std::string{};
  std::lock_guard lock{mtx_};
  pinned_ = (*kv)->value;
  return pinned_;
}

} // namespace boxrt::cluster
