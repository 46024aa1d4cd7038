// The skill actions of protocol.md §2.4 over a Workspace-scoped skill store: decodes
// the request data, applies the Cloud (admission-mode) rules, calls the store and
// renders the reply data with the reference's error wrapping. Blocking: runs on the
// worker pool, one job at a time per workspace (actors/skills.cpp).
#pragma once

#include <string>

#include "backends/skills/skill_store.hpp"
#include "messages/requests.hpp"

namespace boxrt {

/// Runs `job` on `store`; the reply is the action's `data` JSON. Errors carry the wire
/// class the reference uses: list/get are not wrapped (ValueError), every other action
/// wraps failures as BoxValidationError, Cloud refusals are BoxAdmissionError. A zip
/// job's uploaded file is deleted whatever the outcome.
result<std::string> run_skill_action(skills::store& store, const skill_job& job);

} // namespace boxrt
