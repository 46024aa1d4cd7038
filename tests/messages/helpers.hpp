// Shared checks of the messages suites: parse JSON text, decode, compare errors exactly.
#pragma once

#include <boost/test/unit_test.hpp>

#include <string>
#include <string_view>

#include "messages/codec_text.hpp"

namespace boxrt::test {

/// Requires `r` to be an error of class `code` with exactly `message`.
template <class T>
void check_error(const result<T>& r, ec code, std::string_view message) {
  BOOST_REQUIRE_MESSAGE(!r.ok(), "expected " << wire_class(code) << ": " << message);
  BOOST_CHECK_EQUAL(wire_class(r.error().code), wire_class(code));
  BOOST_CHECK_EQUAL(r.error().message, message);
}

/// Requires `r` to hold a value and returns a copy (callers often pass a temporary).
template <class T>
T check_ok(const result<T>& r) {
  BOOST_REQUIRE_MESSAGE(r.ok(), "unexpected error: " << (r.ok() ? "" : r.error().to_wire()));
  return r.value();
}

inline result<box_spec> spec_from(std::string_view text, bool require_cmd = true) {
  return decode_text(text, [&](const simdjson::dom::element& e) {
    return decode_box_spec(e, require_cmd);
  });
}

inline result<process_spec> process_from(std::string_view text) {
  return decode_text(text, [](const simdjson::dom::element& e) { return decode_process_spec(e); });
}

inline result<action_context> context_from(std::string_view text) {
  return decode_text(text,
                     [](const simdjson::dom::element& e) { return decode_action_context(e); });
}

inline result<admission_grant> grant_from(std::string_view text) {
  return decode_text(text,
                     [](const simdjson::dom::element& e) { return decode_admission_grant(e); });
}

inline result<admission_revocation> revocation_from(std::string_view text) {
  return decode_text(
    text, [](const simdjson::dom::element& e) { return decode_admission_revocation(e); });
}

inline result<entitlement_snapshot> snapshot_from(std::string_view text) {
  return decode_text(
    text, [](const simdjson::dom::element& e) { return decode_entitlement_snapshot(e); });
}

inline result<admission_policy> policy_from(std::string_view text) {
  return decode_text(text,
                     [](const simdjson::dom::element& e) { return decode_admission_policy(e); });
}

inline result<runtime_limits> limits_from(std::string_view text, const runtime_limits& base = {}) {
  return decode_text(
    text, [&](const simdjson::dom::element& e) { return decode_runtime_limits(e, base); });
}

inline result<box_config> config_from(std::string_view text, const box_config& base = {}) {
  return decode_text(text,
                     [&](const simdjson::dom::element& e) { return decode_box_config(e, base); });
}

/// A decoder that never fails, wrapped so decode_text can carry it.
inline payload_facts facts_from(std::string_view text) {
  auto r = decode_text(text, [](const simdjson::dom::element& e) {
    return result<payload_facts>{extract_payload_facts(e)};
  });
  BOOST_REQUIRE(r.ok());
  return r.value();
}

} // namespace boxrt::test
