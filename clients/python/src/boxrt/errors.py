"""Errors of boxd's replies, one class per wire error class, each carrying the exact
message boxd sent (``str(err)`` is the whole ``Class: text`` line, ``err.text`` the part
after the class)."""

from __future__ import annotations

__all__ = [
    "BoxError",
    "BoxValidationError",
    "BoxAdmissionError",
    "BoxReadinessError",
    "BoxSessionNotFoundError",
    "BoxBackendUnavailableError",
    "BoxRuntimeUnavailableError",
    "BoxCapacityExceededError",
    "EntitlementUnavailableError",
    "PermissionDenied",
    "KeyErrorReply",
    "ValueErrorReply",
    "ConnectionLost",
    "error_from_message",
]


class BoxError(Exception):
    """An error reply of boxd (``code != 0``), or the base of this package's errors.

    ``error_class`` is the wire's class name (``BoxValidationError``, ...), ``text`` the
    message after it; ``str()`` is the message exactly as boxd sent it."""

    error_class = "BoxError"

    def __init__(self, message: str, text: str | None = None, error_class: str | None = None):
        super().__init__(message)
        self.message = message
        self.text = message if text is None else text
        if error_class is not None:
            self.error_class = error_class


class BoxValidationError(BoxError):
    error_class = "BoxValidationError"


class BoxAdmissionError(BoxError):
    error_class = "BoxAdmissionError"


class BoxReadinessError(BoxError):
    error_class = "BoxReadinessError"


class BoxSessionNotFoundError(BoxError):
    error_class = "BoxSessionNotFoundError"


class BoxBackendUnavailableError(BoxError):
    error_class = "BoxBackendUnavailableError"


class BoxRuntimeUnavailableError(BoxError):
    error_class = "BoxRuntimeUnavailableError"


class BoxCapacityExceededError(BoxError):
    error_class = "BoxCapacityExceededError"


class EntitlementUnavailableError(BoxError):
    error_class = "EntitlementUnavailableError"


class PermissionDenied(BoxError):
    """The wire's ``PermissionError`` (a stale placement, an untrusted instance)."""

    error_class = "PermissionError"


class KeyErrorReply(BoxError):
    """The wire's ``KeyError`` (a required field missing)."""

    error_class = "KeyError"


class ValueErrorReply(BoxError):
    """The wire's ``ValueError`` (a bad envelope, an unknown action, a busy connection)."""

    error_class = "ValueError"


class ConnectionLost(BoxError):
    """The connection dropped while a call was in flight: an action that changes state
    (an exec, a write, a host-control change) may or may not have run."""

    error_class = "ConnectionLost"


_BY_CLASS: dict[str, type[BoxError]] = {
    cls.error_class: cls
    for cls in (
        BoxValidationError,
        BoxAdmissionError,
        BoxReadinessError,
        BoxSessionNotFoundError,
        BoxBackendUnavailableError,
        BoxRuntimeUnavailableError,
        BoxCapacityExceededError,
        EntitlementUnavailableError,
        PermissionDenied,
        KeyErrorReply,
        ValueErrorReply,
    )
}


def error_from_message(message: str) -> BoxError:
    """The exception for an error reply's ``message`` (``"Class: text"``)."""
    name, sep, text = message.partition(": ")
    if sep and name in _BY_CLASS:
        return _BY_CLASS[name](message, text)
    if sep and name.isidentifier():
        return BoxError(message, text, name)
    return BoxError(message)
