#include "backends/state/etcd_admission_store.hpp"

#include "messages/base/hex.hpp"

namespace boxrt::cluster {

etcd_admission_store::etcd_admission_store(const kv::connector& store, std::string prefix,
                                           std::function<std::optional<fence>(const std::string&)> fence_of)
  : client_(store()), prefix_(std::move(prefix)), fence_of_(std::move(fence_of)) {
}

std::string etcd_admission_store::record_key(const std::string& key) const {
  // Record keys hold a NUL (instance, workspace): hex keeps etcd keys printable.
  return prefix_ + "/admission/" + hex_of(key);
}

result<std::optional<std::string>> etcd_admission_store::get(const std::string& key) {
  std::lock_guard lock{mtx_};
  auto kv = client_->get(record_key(key));
  if (!kv)
    return kv.error();
  if (!*kv)
    return std::optional<std::string>{};
  return std::optional<std::string>{std::move((*kv)->value)};
}

box_error etcd_admission_store::put(const std::string& key, const std::string& state) {
  auto f = fence_of_(key);
  if (!f || f->epoch <= 0)
    return box_error{ec::runtime_unavailable, "this node does not own the workspace: its admission state is not written"};
  std::lock_guard lock{mtx_};
  auto written = client_->put_fenced(f->owner_key, f->epoch, record_key(key), state);
  if (!written)
    return written.error();
  if (!*written)
    return box_error{ec::runtime_unavailable,
                     "this node lost the workspace (epoch " + std::to_string(f->epoch) + "): its admission state is not written"};
  return {};
}

} // namespace boxrt::cluster
