// The one reader of boxd's own config file blocks (`server`, `cluster` and its
// sub-blocks; app/boxd_config.cpp, app/cluster_config.cpp): typed fields named by their
// dotted path, each refusal with its key's text. The `box` block is the wire's own
// BoxConfig codec (messages/codec/config.cpp), shared with box_init. Each block keeps
// its error class (server: ValueError, cluster: BoxValidationError) and its rule for
// unknown keys (server: ignored, cluster: refused).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <simdjson.h>

#include "messages/error.hpp"

namespace boxrt::config {

using simdjson::dom::element;
using simdjson::dom::object;

/// "HOST:PORT" or "[v6]:PORT" with a port from `min_port` to 65535; what is wrong with
/// it, else none (and `host`, `port` set).
enum class address_fault { none, shape, port_not_number, port_range };
address_fault parse_host_port(std::string_view text, uint16_t min_port, std::string& host,
                              uint16_t& port);

class block {
 public:
  /// `path` names the block with its dot ("server.", "cluster.etcd.").
  block(object obj, std::string path, ec code) : obj_(obj), path_(std::move(path)), code_(code) {}

  const object& obj() const { return obj_; }
  const std::string& path() const { return path_; }

  box_error fail(std::string text) const { return box_error{code_, std::move(text)}; }

  /// The value when present and not null.
  std::optional<element> get(const char* key) const;

  /// Refuses a key not in `keys`: "unknown key <path><key>".
  box_error only_keys(std::initializer_list<std::string_view> keys) const;

  enum class presence { optional, required };
  /// A string; absent or null keeps `out`. With `non_empty` an empty one is refused too
  /// ("must be a non-empty string"), else "must be a string"; a required one that is
  /// absent: "is required".
  box_error string(const char* key, std::string& out, bool non_empty = false,
                   presence p = presence::optional) const;
  /// An integer (never a bool or a float) from `min` to `max`: "must be an integer",
  /// "must be between MIN and MAX".
  box_error integer(const char* key, int64_t min, int64_t max, int64_t& out) const;
  box_error size(const char* key, size_t min, size_t max, size_t& out) const;
  /// "must be a boolean".
  box_error boolean(const char* key, bool& out) const;

 private:
  object obj_;
  std::string path_;
  ec code_;
};

} // namespace boxrt::config
