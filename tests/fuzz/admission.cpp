// Entitlement snapshots and grants as one workspace's admission plane sees them: the
// input is a sequence of lines, each an operation byte then JSON (a snapshot, a grant,
// a revocation or an action context). After every accepted change the durable record
// must restore into a fresh plane that writes the same record (contract §4.11), and
// the revision floor must never move back.
#include <simdjson.h>

#include "actors/admission.hpp"
#include "fuzz_common.hpp"
#include "messages/codec.hpp"
#include "messages/codec_text.hpp"

using namespace boxrt;
using element = simdjson::dom::element;

namespace {

constexpr const char* instance = "inst-1";
constexpr const char* workspace = "ws-1";
// A fixed clock inside the seeds' windows: 2026-01-01T00:00:00Z.
constexpr int64_t now_s = 1767225600;

void check_durable(const workspace_admission& ws) {
  workspace_admission again{instance, workspace};
  auto state = ws.durable_state();
  fuzz::require(!again.restore(state), "a durable record restores");
  fuzz::require(again.durable_state() == state, "a restored record writes itself again");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  workspace_admission ws{instance, workspace};
  admission_policy policy;
  policy.required = true;
  box_config config;
  config.admission = policy;
  int64_t clock_us = now_s * 1000000;
  int64_t floor = 0;
  for (auto line : fuzz::split(fuzz::as_text(data, size), '\n', 64)) {
    if (line.empty())
      continue;
    const char op = line.front();
    auto json = line.substr(1);
    bool changed = false;
    switch (op % 6) {
      case 0: {
        auto snap = decode_text(json, [](const element& e) { return decode_entitlement_snapshot(e); });
        if (snap && ws.put_snapshot(snap.value(), clock_us / 1000000))
          changed = true;
        break;
      }
      case 1: {
        auto grant = decode_text(json, [](const element& e) { return decode_admission_grant(e); });
        if (grant && ws.upsert_grant(grant.value(), config, clock_us))
          changed = true;
        break;
      }
      case 2: {
        auto rev = decode_text(json, [](const element& e) { return decode_admission_revocation(e); });
        if (rev && ws.revoke(rev.value(), config))
          changed = true;
        break;
      }
      case 3: {
        auto ctx = decode_text(json, [](const element& e) { return decode_action_context(e); });
        if (ctx) {
          session_effect effect = session_effect::none;
          if (!ws.check_entitlement(ctx.value(), policy, clock_us, effect))
            (void) ws.check_grant(ctx.value(), policy, clock_us);
          ws.observe_generation(ctx.value().placement_generation);
          changed = true;
        }
        break;
      }
      case 4:
        // Time passes: up to ~18 hours per step, then the expiry timer runs.
        clock_us += static_cast<int64_t>(static_cast<unsigned char>(json.empty() ? 0 : json[0])) * 256'000'000;
        (void) ws.on_expiry(clock_us, policy);
        changed = true;
        break;
      default: {
        // Restoring a record of another shape or workspace changes nothing.
        auto before = ws.durable_state();
        if (ws.restore(json))
          fuzz::require(ws.durable_state() == before, "a refused restore changes nothing");
        break;
      }
    }
    if (changed) {
      check_durable(ws);
      fuzz::require(ws.tombstone() >= floor, "the tombstone never moves back");
      floor = ws.tombstone();
    }
  }
  return 0;
}
