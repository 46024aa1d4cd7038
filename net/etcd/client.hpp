// A small synchronous etcd v3 client over etcd's JSON gateway (POST /v3/...), for the
// cluster (docs/cluster.md): keys, create-if-absent and fenced puts (transactions), and
// leases. Debian ships no C++ etcd client; the gateway is etcd's own HTTP face of its
// gRPC API. Every call, the name lookup included, is bounded by the options' timeout. It
// starts with the endpoint that answered last and moves on only while no member has seen
// the request: after it was written, a failure is reported (its outcome unknown), never
// retried elsewhere, so nothing is applied twice. Beast stays inside client.cpp. Not thread-safe: one per thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/state/kv_store.hpp"
#include "messages/error.hpp"

namespace boxrt::net::etcd {

struct parsed_reply;

/// A client certificate, its key and the CA that signed etcd's server certificates.
struct tls_files {
  std::string certificate;
  std::string key;
  std::string ca_file;
};

struct options {
  /// http://HOST:PORT or https://HOST:PORT of each etcd member (https needs `tls`).
  std::vector<std::string> endpoints;
  /// TLS with a client certificate (etcd's --client-cert-auth); the server's certificate
  /// must be signed by `ca_file` and name the endpoint's host.
  std::optional<tls_files> tls;
  /// Per call, over all endpoints.
  std::chrono::milliseconds timeout{2000};
};

using kv::create_outcome;
using kv::key_value;

class client final : public kv::store {
 public:
  explicit client(options o);

  result<std::optional<key_value>> get(std::string_view key) override;
  /// Every key that starts with `prefix`, in key order.
  result<std::vector<key_value>> list(std::string_view prefix) override;
  /// Returns the store's revision after the put. `lease` 0 = none.
  result<int64_t> put(std::string_view key, std::string_view value, int64_t lease = 0) override;
  /// Puts `key` only when it does not exist (one transaction).
  result<create_outcome> create(std::string_view key, std::string_view value, int64_t lease = 0) override;
  /// Puts `key` only while `guard` exists with create revision `epoch` (a fenced write:
  /// an owner whose key was replaced writes nothing). False when the guard did not hold.
  result<bool> put_fenced(std::string_view guard, int64_t epoch, std::string_view key, std::string_view value) override;
  /// True when the key existed.
  result<bool> erase(std::string_view key) override;

  /// A new lease of `ttl` (whole seconds, at least 1); returns its id.
  result<int64_t> grant(std::chrono::milliseconds ttl) override;
  /// Renews the lease once; returns its remaining TTL, 0 when the lease is gone.
  result<std::chrono::milliseconds> keep_alive(int64_t lease) override;
  /// Ends the lease and deletes its keys. A lease that is gone already is no error.
  box_error revoke(int64_t lease) override;

 private:
  /// POSTs `body` to `path` on the first endpoint that answers; the response body.
  result<std::string> post(std::string_view path, const std::string& body);
  /// post, then the reply parsed as a JSON object.
  result<std::unique_ptr<parsed_reply>> call(std::string_view path, const std::string& body);

  options opts_;
  /// The endpoint that answered last: tried first next time.
  size_t preferred_ = 0;
  /// Built from opts_.tls once (null without it); "" or why it could not be.
  std::shared_ptr<void> tls_context_;
  std::string tls_error_;
};

/// A connector for the cluster's state (backends/state/kv_store.hpp): each call opens a
/// new client with `o`.
kv::connector connector(options o);

} // namespace boxrt::net::etcd
