#include "messages/error.hpp"

namespace boxrt {

std::string_view wire_class(ec code) noexcept {
  switch (code) {
    case ec::none: return "";
    case ec::validation: return "BoxValidationError";
    case ec::admission: return "BoxAdmissionError";
    case ec::readiness: return "BoxReadinessError";
    case ec::session_not_found: return "BoxSessionNotFoundError";
    case ec::session_conflict: return "BoxSessionConflictError";
    case ec::process_not_found: return "BoxManagedProcessNotFoundError";
    case ec::process_conflict: return "BoxManagedProcessConflictError";
    case ec::backend_unavailable: return "BoxBackendUnavailableError";
    case ec::capacity_exceeded: return "BoxCapacityExceededError";
    case ec::runtime_unavailable: return "BoxRuntimeUnavailableError";
    case ec::box_error: return "BoxError";
    case ec::entitlement_unavailable: return "EntitlementUnavailableError";
    case ec::permission: return "PermissionError";
    case ec::value: return "ValueError";
    case ec::key: return "KeyError";
    case ec::envelope: return "ValidationError";
    case ec::runtime: return "RuntimeError";
    case ec::busy: return "";
  }
  return "RuntimeError";
}

std::string box_error::to_wire() const {
  constexpr size_t max_text = 4096;
  std::string text = message;
  if (text.size() > max_text) {
    // Cut on a UTF-8 boundary so the reply stays valid text.
    size_t cut = max_text;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
      --cut;
    text.resize(cut);
    text += "... [protocol error truncated]";
  }
  auto cls = wire_class(code);
  if (cls.empty())
    return text;
  std::string out;
  out.reserve(cls.size() + 2 + text.size());
  out.append(cls).append(": ").append(text);
  return out;
}

} // namespace boxrt
