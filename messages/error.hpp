// The runtime's one error enum and the error value that travels on the wire as
// "<ClassName>: <text>". Every failure is built where its reason is known.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace boxrt {

/// Every error the runtime can report. Each value maps to exactly one wire class name.
enum class ec : uint8_t {
  none = 0,
  /// A request or model failed validation (BoxValidationError).
  validation,
  /// Admission refused the call: grant, forged fields, caps (BoxAdmissionError).
  admission,
  /// Isolation is not ready for admission mode (BoxReadinessError).
  readiness,
  /// Unknown session (BoxSessionNotFoundError).
  session_not_found,
  /// A session exists with incompatible settings (BoxSessionConflictError).
  session_conflict,
  /// Unknown managed process (BoxManagedProcessNotFoundError).
  process_not_found,
  /// Managed process in the wrong state (BoxManagedProcessConflictError).
  process_conflict,
  /// No usable backend (BoxBackendUnavailableError).
  backend_unavailable,
  /// A configured cap is full (BoxCapacityExceededError).
  capacity_exceeded,
  /// The runtime cannot serve: shutting down, internal actor loss (BoxRuntimeUnavailableError).
  runtime_unavailable,
  /// Generic runtime failure of a box operation (BoxError).
  box_error,
  /// Entitlement refused or missing (EntitlementUnavailableError).
  entitlement_unavailable,
  /// Trust or fence failure (PermissionError).
  permission,
  /// Bad value outside the models, e.g. unknown action, config limits (ValueError).
  value,
  /// A required request key is missing (KeyError).
  key,
  /// The request envelope itself is malformed (ValidationError).
  envelope,
  /// Internal failure that should not happen (RuntimeError).
  runtime,
  /// A cap or a holder is busy: the per-connection in-flight cap, or a relay that waited
  /// for another to let go of its process. The wire text carries no class prefix.
  busy,
};

/// Returns the wire class name of `code` ("" for `ec::busy` and `ec::none`).
std::string_view wire_class(ec code) noexcept;

/// An error value: class and the exact message text.
/// The error text of a request the runtime refuses or abandons because it is shutting
/// down (BoxRuntimeUnavailableError, protocol.md §4.10.3). The WebSocket close reason
/// of shutdown is a different text (net::shutdown_close_reason).
inline constexpr const char* shutting_down_text = "Box runtime is shutting down";

/// The fence refused an older placement generation (PermissionError); also the relay's
/// close reason when a fence advance retires its session.
inline constexpr const char* stale_generation_text = "Stale Box placement generation";

struct box_error {
  ec code = ec::none;
  std::string message;

  explicit operator bool() const noexcept { return code != ec::none; }

  /// Renders "<ClassName>: <text>", the text cut at 4096 characters as the reference does.
  std::string to_wire() const;

  friend bool operator==(const box_error&, const box_error&) = default;
};

inline box_error make_box_error(ec code, std::string message) {
  return box_error{code, std::move(message)};
}

/// A mount source the host refuses (BoxValidationError, the reference's text):
/// "<field> <path> is blocked for security".
inline box_error blocked_for_security(std::string_view field, std::string_view path) {
  std::string text{field};
  text.append(" ").append(path).append(" is blocked for security");
  return make_box_error(ec::validation, std::move(text));
}

/// Either a value or a box_error (std::expected is C++23).
template <class T>
class result {
 public:
  result(T value) : data_(std::move(value)) {}
  result(box_error err) : data_(std::move(err)) {}

  bool ok() const noexcept { return data_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }
  T& value() & { return std::get<0>(data_); }
  const T& value() const& { return std::get<0>(data_); }
  T&& value() && { return std::get<0>(std::move(data_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const box_error& error() const { return std::get<1>(data_); }

 private:
  std::variant<T, box_error> data_;
};

} // namespace boxrt
