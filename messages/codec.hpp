// JSON codecs of the protocol models: strict simdjson decoders with the reference's
// exact validation messages, and encoders that render the reference's shapes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "messages/error.hpp"
#include "messages/base/json.hpp"
#include "messages/models.hpp"

namespace simdjson::dom {
class element;
} // namespace simdjson::dom

namespace boxrt {

// -- decoders (input: the request's `data` value; errors carry class + exact text) ---

/// BoxSpec (§3.2): unknown keys ignored, strict types. With `require_cmd` an empty
/// cmd fails with "cmd must not be empty" (box_exec); box_create_session allows it.
result<box_spec> decode_box_spec(const simdjson::dom::element& data, bool require_cmd);

/// What the admission forged-field rules need from the raw payload (never fails).
payload_facts extract_payload_facts(const simdjson::dom::element& data);

/// BoxManagedProcessSpec (§3.6).
result<process_spec> decode_process_spec(const simdjson::dom::element& data);

/// ActionContext (§3.11): extra keys forbidden; installation_uuid dropped;
/// optional boxrt `entitlement_revision` (integer >= 0).
result<action_context> decode_action_context(const simdjson::dom::element& ctx);

/// SandboxAdmissionGrant (§3.8).
result<admission_grant> decode_admission_grant(const simdjson::dom::element& data);

/// SandboxAdmissionRevocation (§3.9).
result<admission_revocation> decode_admission_revocation(const simdjson::dom::element& data);

/// Entitlement snapshot (admission.md §2.1), strict: no bool as int, no string numbers.
result<entitlement_snapshot> decode_entitlement_snapshot(const simdjson::dom::element& data);

/// SandboxAdmissionPolicy (§3.10) with boxrt's required_backend values (bwrap, nsjail).
result<admission_policy> decode_admission_policy(const simdjson::dom::element& data);

/// `box.limits` over `base` (§3.12): atomic, "box.limits.<name> must be ..." messages.
result<runtime_limits> decode_runtime_limits(const simdjson::dom::element& data,
                                             const runtime_limits& base);

/// The whole box config merged over `base` (each top-level key replaces the old one).
/// A malformed `admission` section does not fail: it sets `admission_error` and a
/// required policy, so admission fails closed (§4.9.1).
result<box_config> decode_box_config(const simdjson::dom::element& data, const box_config& base);
/// The keys of a `box` block that boxd does not use (LangBot's shape carries keys for
/// other runtimes), as dotted paths ("box.limits.max_sesions"); admission keys are
/// never ignored (an unknown one is an error of the policy).
std::vector<std::string> ignored_box_keys(const simdjson::dom::element& data);

/// The integer limits within the ranges decode_runtime_limits enforces (a config built
/// in code: app/runtime.hpp).
box_error check_runtime_limits(const runtime_limits& limits);

/// `name` is a `box.backend` value boxrt knows ("", auto, local, bwrap, nsjail, process,
/// scripted).
bool known_backend(std::string_view name);

// decode_text(text, decoder) in messages/codec_text.hpp parses then decodes.

// -- encoders ------------------------------------------------------------------------

void encode(json::writer& w, const session_info& x);
void encode(json::writer& w, const exec_result& x);
void encode(json::writer& w, const process_info& x);
void encode(json::writer& w, const grant_receipt& x);
void encode(json::writer& w, const revocation_receipt& x);
void encode(json::writer& w, const entitlement_receipt& x);
void encode(json::writer& w, const box_spec& x);
void encode(json::writer& w, const entitlement_snapshot& x);
/// Every box.limits key with its value (boxd --check-config).
void encode(json::writer& w, const runtime_limits& x);
/// box.network_policy, box.network_profiles and box.network_egress, as keys of the box
/// object being written (docs/network.md).
void encode(json::writer& w, const network_settings& x);

/// Canonical JSON (sorted keys, no spaces) of a snapshot: its fingerprint.
std::string canonical_json(const entitlement_snapshot& x);

template <class T>
std::string to_json(const T& x) {
  json::writer w;
  encode(w, x);
  return w.take();
}

} // namespace boxrt
