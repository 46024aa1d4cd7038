// Every request decoder of the protocol in one target: the first input byte chooses the
// decoder, the rest is the request's `data` as JSON (read as Python's json reads it).
// Decoded values must survive their own encoding where the protocol encodes them.
#include <simdjson.h>

#include "actors/admission.hpp"
#include "backends/skills/skill_actions.hpp"
#include "fuzz_common.hpp"
#include "messages/codec.hpp"
#include "messages/codec_text.hpp"
#include "messages/tenancy.hpp"

using namespace boxrt;
using element = simdjson::dom::element;

namespace {

skills::store& skill_store() {
  static skills::store store{fuzz::scratch() + "/skills", fuzz::scratch() + "/uploads"};
  return store;
}

/// The skill actions that read only: their field decoding and name checks run against an
/// empty store (the ones that write are covered by tests/backends/skills/skill_store.cpp; a
/// directory scan would read whatever host path the input names).
constexpr const char* read_only_skill_actions[] = {
  "box_list_skills", "box_get_skill", "box_list_skill_files", "box_read_skill_file",
};

void spec_round_trip(const box_spec& spec, bool require_cmd) {
  auto again = decode_text(to_json(spec), [&](const element& e) { return decode_box_spec(e, require_cmd); });
  fuzz::require(again.ok(), "an encoded spec decodes");
  fuzz::require(again.value() == spec, "an encoded spec decodes to itself");
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::scratch();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  const uint8_t which = data[0] % 16;
  auto text = fuzz::as_text(data + 1, size - 1);
  switch (which) {
    case 0:
    case 1: {
      bool require_cmd = which == 0;
      auto r = decode_text(text, [&](const element& e) { return decode_box_spec(e, require_cmd); });
      if (r)
        spec_round_trip(r.value(), require_cmd);
      break;
    }
    case 2: {
      auto facts = decode_text(text, [](const element& e) -> result<payload_facts> {
        return extract_payload_facts(e);
      });
      if (facts)
        (void) workspace_admission::check_forged_fields(facts.value(), "/data/box/tenants/ws-0");
      break;
    }
    case 3:
      (void) decode_text(text, [](const element& e) { return decode_process_spec(e); });
      break;
    case 4:
      (void) decode_text(text, [](const element& e) { return decode_action_context(e); });
      break;
    case 5:
      (void) decode_text(text, [](const element& e) { return decode_admission_grant(e); });
      break;
    case 6:
      (void) decode_text(text, [](const element& e) { return decode_admission_revocation(e); });
      break;
    case 7: {
      auto r = decode_text(text, [](const element& e) { return decode_entitlement_snapshot(e); });
      if (r) {
        auto again = decode_text(to_json(r.value()),
                                 [](const element& e) { return decode_entitlement_snapshot(e); });
        fuzz::require(again.ok(), "an encoded snapshot decodes");
        fuzz::require(canonical_json(again.value()) == canonical_json(r.value()),
                      "an encoded snapshot keeps its fingerprint");
      }
      break;
    }
    case 8: {
      auto r = decode_text(text, [](const element& e) { return decode_admission_policy(e); });
      if (r)
        (void) validate_required_policy(r.value());
      break;
    }
    case 9:
      (void) decode_text(text, [](const element& e) {
        return decode_runtime_limits(e, runtime_limits{});
      });
      break;
    case 10:
      (void) decode_text(text, [](const element& e) { return decode_box_config(e, box_config{}); });
      break;
    case 11: {
      // A logical session id as sent (raw text, not JSON).
      auto r = physical_session_id("inst", "ws", 1, text);
      if (r)
        fuzz::require(!r.value().empty(), "a physical id is not empty");
      break;
    }
    case 12: {
      // Admission-mode normalisation of a decoded spec under a valid Cloud policy.
      auto r = decode_text(text, [](const element& e) { return decode_box_spec(e, true); });
      if (r) {
        admission_policy policy;
        policy.required = true;
        workspace_admission ws{"inst", "ws"};
        (void) ws.normalize(r.value(), policy, "/data/box/tenants/" + ws.box_ns(), false);
      }
      break;
    }
    default: {
      skill_job job;
      job.action = read_only_skill_actions[(which - 13) % std::size(read_only_skill_actions)];
      job.data_json = std::string{text};
      (void) run_skill_action(skill_store(), job);
      break;
    }
  }
  return 0;
}
