#include "messages/base/log.hpp"

#include <atomic>
#include <chrono>
#include <ctime>
#include <memory>

#include <spdlog/formatter.h>
#include <spdlog/spdlog.h>

#include "messages/base/json.hpp"

namespace boxrt::logs {

namespace {

std::atomic<bool> json_on{false};

/// Marks a payload that is already JSON members (an event), not a message.
constexpr char members_mark = '\x1e';

const char* level_name(spdlog::level::level_enum lv) {
  switch (lv) {
    case spdlog::level::trace: return "trace";
    case spdlog::level::debug: return "debug";
    case spdlog::level::info: return "info";
    case spdlog::level::warn: return "warning";
    case spdlog::level::err: return "error";
    case spdlog::level::critical: return "critical";
    default: return "info";
  }
}

class json_formatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    using namespace std::chrono;
    auto t = system_clock::to_time_t(msg.time);
    auto ms = duration_cast<milliseconds>(msg.time.time_since_epoch()).count() % 1000;
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char stamp[40];
    std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
    std::string line = "{\"time\":\"";
    line += stamp;
    line += "\",\"level\":\"";
    line += level_name(msg.level);
    line += "\",";
    std::string_view payload{msg.payload.data(), msg.payload.size()};
    if (!payload.empty() && payload.front() == members_mark) {
      line += payload.substr(1);
    } else {
      line += "\"msg\":";
      json::append_quoted(line, payload);
    }
    line += "}\n";
    dest.append(line.data(), line.data() + line.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<json_formatter>(); }
};

bool plain(std::string_view v) {
  if (v.empty())
    return false;
  for (char c : v)
    if (c <= ' ' || c == '"' || c == '=' || c == '\\' || static_cast<unsigned char>(c) >= 0x7f)
      return false;
  return true;
}

} // namespace

void use_json(bool on) {
  json_on = on;
  if (on)
    spdlog::set_formatter(std::make_unique<json_formatter>());
  else
    spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
}

std::string text_payload(std::string_view name, std::initializer_list<field> fields) {
  std::string out{name};
  for (const auto& f : fields) {
    out += ' ';
    out += f.key;
    out += '=';
    if (f.is_number)
      out += std::to_string(f.number);
    else if (plain(f.text))
      out += f.text;
    else
      json::append_quoted(out, f.text);
  }
  return out;
}

std::string json_members(std::string_view name, std::initializer_list<field> fields) {
  std::string out = "\"event\":";
  json::append_quoted(out, name);
  for (const auto& f : fields) {
    out += ',';
    json::append_quoted(out, f.key);
    out += ':';
    if (f.is_number)
      out += std::to_string(f.number);
    else
      json::append_quoted(out, f.text);
  }
  return out;
}

void event(level lv, std::string_view name, std::initializer_list<field> fields) {
  auto spd = lv == level::warn ? spdlog::level::warn : spdlog::level::info;
  if (!spdlog::default_logger_raw()->should_log(spd))
    return;
  if (json_on)
    spdlog::log(spd, "{}{}", members_mark, json_members(name, fields));
  else
    spdlog::log(spd, "{}", text_payload(name, fields));
}

} // namespace boxrt::logs
