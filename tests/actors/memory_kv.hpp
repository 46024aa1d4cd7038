// An in-memory key-value store with etcd's meaning (revisions, create-if-absent, fenced
// puts, leases whose keys go with them) behind backends/state/kv_store.hpp, so the
// cluster's actors run under the deterministic test coordinator without an etcd.
// Leases never expire by themselves: a test ends one with revoke().
#pragma once

#include <map>
#include <memory>
#include <mutex>

#include "backends/state/kv_store.hpp"

namespace boxrt::test {

class memory_kv {
 public:
  kv::connector connector() {
    return {[self = state_](std::chrono::milliseconds) -> std::unique_ptr<kv::store> {
      return std::make_unique<client>(self);
    }};
  }

  std::optional<kv::key_value> find(const std::string& key) const {
    std::lock_guard lock{state_->mtx};
    auto i = state_->keys.find(key);
    return i == state_->keys.end() ? std::nullopt : std::optional{i->second};
  }

 private:
  struct state {
    mutable std::mutex mtx;
    int64_t revision = 1;
    int64_t next_lease = 100;
    std::map<int64_t, std::chrono::milliseconds> leases;
    std::map<std::string, kv::key_value, std::less<>> keys;

    int64_t put_locked(std::string_view key, std::string_view value, int64_t lease) {
      ++revision;
      auto& kv = keys[std::string{key}];
      if (kv.version == 0) {
        kv.key = std::string{key};
        kv.create_revision = revision;
      }
      kv.value = std::string{value};
      kv.mod_revision = revision;
      ++kv.version;
      kv.lease = lease;
      return revision;
    }
  };

  class client final : public kv::store {
   public:
    explicit client(std::shared_ptr<state> s) : s_(std::move(s)) {}

    result<std::optional<kv::key_value>> get(std::string_view key) override {
      std::lock_guard lock{s_->mtx};
      auto i = s_->keys.find(key);
      return i == s_->keys.end() ? std::nullopt : std::optional{i->second};
    }
    result<std::vector<kv::key_value>> list(std::string_view prefix) override {
      std::lock_guard lock{s_->mtx};
      std::vector<kv::key_value> out;
      for (auto i = s_->keys.lower_bound(prefix); i != s_->keys.end() && i->first.starts_with(prefix); ++i)
        out.push_back(i->second);
      return out;
    }
    result<int64_t> put(std::string_view key, std::string_view value, int64_t lease) override {
      std::lock_guard lock{s_->mtx};
      if (lease != 0 && !s_->leases.contains(lease))
        return box_error{ec::runtime_unavailable, "requested lease not found"};
      return s_->put_locked(key, value, lease);
    }
    result<kv::create_outcome> create(std::string_view key, std::string_view value, int64_t lease) override {
      std::lock_guard lock{s_->mtx};
      kv::create_outcome out;
      if (auto i = s_->keys.find(key); i != s_->keys.end()) {
        out.existing = i->second;
        out.revision = s_->revision;
        return out;
      }
      if (lease != 0 && !s_->leases.contains(lease))
        return box_error{ec::runtime_unavailable, "requested lease not found"};
      out.created = true;
      out.revision = s_->put_locked(key, value, lease);
      return out;
    }
    result<bool> put_fenced(std::string_view guard, int64_t epoch, std::string_view key,
                            std::string_view value) override {
      std::lock_guard lock{s_->mtx};
      auto g = s_->keys.find(guard);
      if (g == s_->keys.end() || g->second.create_revision != epoch)
        return false;
      s_->put_locked(key, value, 0);
      return true;
    }
    result<bool> erase(std::string_view key) override {
      std::lock_guard lock{s_->mtx};
      auto i = s_->keys.find(key);
      if (i == s_->keys.end())
        return false;
      s_->keys.erase(i);
      ++s_->revision;
      return true;
    }
    result<int64_t> grant(std::chrono::milliseconds ttl) override {
      std::lock_guard lock{s_->mtx};
      auto id = s_->next_lease++;
      s_->leases[id] = ttl;
      return id;
    }
    result<std::chrono::milliseconds> keep_alive(int64_t lease) override {
      std::lock_guard lock{s_->mtx};
      auto i = s_->leases.find(lease);
      return i == s_->leases.end() ? std::chrono::milliseconds{0} : i->second;
    }
    box_error revoke(int64_t lease) override {
      std::lock_guard lock{s_->mtx};
      s_->leases.erase(lease);
      std::erase_if(s_->keys, [&](const auto& kv) { return kv.second.lease == lease; });
      ++s_->revision;
      return {};
    }

   private:
    std::shared_ptr<state> s_;
  };

  std::shared_ptr<state> state_ = std::make_shared<state>();
};

} // namespace boxrt::test
