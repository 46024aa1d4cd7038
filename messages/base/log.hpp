// Structured log lines for operators: one event per line with named fields. Text by
// default (`session_start ws=ws-… session=s backend=bwrap duration_ms=12`), or one JSON
// object per line (server.log_format "json"), in which every other line of the log
// becomes {"time","level","msg"} too. Field values are never tenant secrets.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace boxrt::logs {

struct field {
  field(std::string_view k, std::string_view v) : key(k), text(v) {}
  field(std::string_view k, const std::string& v) : key(k), text(v) {}
  field(std::string_view k, const char* v) : key(k), text(v) {}
  field(std::string_view k, int64_t v) : key(k), number(v), is_number(true) {}
  field(std::string_view k, int v) : key(k), number(v), is_number(true) {}
  field(std::string_view k, uint64_t v) : key(k), number(static_cast<int64_t>(v)), is_number(true) {}

  std::string_view key;
  std::string text;
  int64_t number = 0;
  bool is_number = false;
};

enum class level { info, warn };

/// Every line of the default logger as a JSON object (true), or as text with the
/// default pattern (false). Call before other threads log.
void use_json(bool on);

/// Logs event `name` with `fields`, in the format in use.
void event(level lv, std::string_view name, std::initializer_list<field> fields);

/// The payload of one event line in each format (what `event` logs; for tests).
std::string text_payload(std::string_view name, std::initializer_list<field> fields);
std::string json_members(std::string_view name, std::initializer_list<field> fields);

} // namespace boxrt::logs
