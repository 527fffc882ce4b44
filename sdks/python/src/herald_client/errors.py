"""Herald's error codes and the one exception every failure of this package raises.

The server answers every error as `{"error":{"code","message"}}` (HTTP body or WebSocket `error`
frame); `HeraldError` carries that code and message unchanged, plus the HTTP status and the
`Retry-After` delay when there are some. Failures that happen in the client (the server could
not be reached, or answered something unreadable) use the client-side codes below, which are
never server codes.
"""

from __future__ import annotations

import json
from enum import Enum
from typing import TYPE_CHECKING, Any, Mapping, Optional

if TYPE_CHECKING:
    from .models.probes import Readiness


class ErrorCode(str, Enum):
    """Every error code the server sends (docs/protocol.md, section 7), in the documented order."""

    BAD_REQUEST = "bad_request"
    UNKNOWN_COMMAND = "unknown_command"
    CHANNEL_INVALID = "channel_invalid"
    ALREADY_SUBSCRIBED = "already_subscribed"
    NOT_SUBSCRIBED = "not_subscribed"
    TOO_MANY_SUBSCRIPTIONS = "too_many_subscriptions"
    TAG_INVALID = "tag_invalid"
    TAG_EXPRESSION_INVALID = "tag_expression_invalid"
    DEVICE_INVALID = "device_invalid"
    UNAUTHORIZED = "unauthorized"
    TOKEN_EXPIRED = "token_expired"
    FORBIDDEN = "forbidden"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    TOO_LARGE = "too_large"
    REQUEST_TIMEOUT = "request_timeout"
    LIMIT_EXCEEDED = "limit_exceeded"
    RATE_LIMITED = "rate_limited"
    STORE_FAILED = "store_failed"
    STORE_UNAVAILABLE = "store_unavailable"
    INSUFFICIENT_STORAGE = "insufficient_storage"
    STORE_HALTED = "store_halted"
    INTERNAL = "internal"
    SHUTTING_DOWN = "shutting_down"

    @property
    def status(self) -> int:
        """The HTTP status that carries this code."""
        return _STATUS[self]

    @classmethod
    def parse(cls, code: str) -> Optional["ErrorCode"]:
        """The code named exactly `code`, or None for anything else (never a near match)."""
        try:
            return cls(code)
        except ValueError:
            return None


_STATUS = {
    ErrorCode.BAD_REQUEST: 400,
    ErrorCode.UNKNOWN_COMMAND: 400,
    ErrorCode.CHANNEL_INVALID: 400,
    ErrorCode.ALREADY_SUBSCRIBED: 400,
    ErrorCode.NOT_SUBSCRIBED: 400,
    ErrorCode.TOO_MANY_SUBSCRIPTIONS: 400,
    ErrorCode.TAG_INVALID: 400,
    ErrorCode.TAG_EXPRESSION_INVALID: 400,
    ErrorCode.DEVICE_INVALID: 400,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.TOKEN_EXPIRED: 401,
    ErrorCode.FORBIDDEN: 403,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.CONFLICT: 409,
    ErrorCode.METHOD_NOT_ALLOWED: 405,
    ErrorCode.TOO_LARGE: 413,
    ErrorCode.REQUEST_TIMEOUT: 408,
    ErrorCode.LIMIT_EXCEEDED: 429,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.STORE_FAILED: 500,
    ErrorCode.STORE_UNAVAILABLE: 503,
    ErrorCode.INSUFFICIENT_STORAGE: 507,
    ErrorCode.STORE_HALTED: 503,
    ErrorCode.INTERNAL: 500,
    ErrorCode.SHUTTING_DOWN: 503,
}

#: Client-side code: the server could not be reached, or the connection broke mid-request.
TRANSPORT = "transport"
#: Client-side code: the server answered something this client cannot read.
UNEXPECTED_RESPONSE = "unexpected_response"
#: Client-side code: the client was closed while the call waited.
CLOSED = "closed"
#: The readiness probe answered 503 (`not_ready`, the status word of its body): `NotReadyError`.
NOT_READY = "not_ready"
#: The server ended the connection because access was revoked (a `disconnect` with code
#: `revoked`, WebSocket close code 4003): the subscriber stops and raises this from its iterator.
#: Not a server error code (docs/protocol.md, "Revocation").
REVOKED = "revoked"


class HeraldError(Exception):
    """Any failure: the server's `code` and `message`, the HTTP `status` when the answer was
    HTTP, and `retry_after` (seconds) when the server sent `Retry-After`."""

    def __init__(
        self,
        code: str,
        message: str,
        status: Optional[int] = None,
        retry_after: Optional[float] = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.retry_after = retry_after

    @property
    def error_code(self) -> Optional[ErrorCode]:
        """`code` as a known server code, or None for client-side codes and unknown ones."""
        return ErrorCode.parse(self.code)

    def __repr__(self) -> str:
        return (
            f"HeraldError(code={self.code!r}, message={self.message!r}, "
            f"status={self.status!r}, retry_after={self.retry_after!r})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HeraldError):
            return NotImplemented
        return (self.code, self.message, self.status, self.retry_after) == (
            other.code,
            other.message,
            other.status,
            other.retry_after,
        )

    __hash__ = Exception.__hash__

    @classmethod
    def from_body(cls, body: Any, status: Optional[int] = None) -> "HeraldError":
        """The error an `{"error":{"code","message"}}` object describes (already parsed)."""
        error = body.get("error") if isinstance(body, Mapping) else None
        if isinstance(error, Mapping):
            code, message = error.get("code"), error.get("message")
            if isinstance(code, str) and isinstance(message, str):
                return cls(code, message, status)
        return cls(UNEXPECTED_RESPONSE, f"not a Herald error body: {body!r:.200}", status)

    @classmethod
    def from_http(
        cls, status: int, text: str, retry_after_header: Optional[str] = None
    ) -> "HeraldError":
        """The error an HTTP answer with a non-2xx `status` and body `text` describes."""
        try:
            body = json.loads(text)
        except ValueError:
            body = None
        if body is None:
            error = cls(UNEXPECTED_RESPONSE, f"HTTP {status}: {text[:200]!r}", status)
        else:
            error = cls.from_body(body, status)
        error.retry_after = _parse_retry_after(retry_after_header)
        return error


def _parse_retry_after(value: Optional[str]) -> Optional[float]:
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


class NotReadyError(HeraldError):
    """`GET /readyz` answered `503`: code `not_ready`, status 503, a message naming each failing
    check with its error code and message, `readiness` the whole answer (`readiness.failing()`
    gives each failing check as a `HeraldError`)."""

    def __init__(self, readiness: "Readiness") -> None:
        failing = readiness.failing()
        named = "; ".join(f"{name}: {e.code}: {e.message}" for name, e in failing.items())
        super().__init__(NOT_READY, named or "not ready", 503)
        self.readiness = readiness

    def __repr__(self) -> str:
        return f"NotReadyError(message={self.message!r})"
