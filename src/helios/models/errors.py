"""Typed model errors. Only RateLimit and Transient are retried."""

from __future__ import annotations

from helios.errors import HeliosError


class ModelError(HeliosError):
    kind = "ModelError"
    retryable = False

    def __init__(self, message: str, *, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)


class RateLimitError(ModelError):
    kind = "RateLimitError"
    retryable = True
    retry_after: float | None

    def __init__(
        self, message: str, *, retry_after: float | None = None, status: int | None = 429
    ) -> None:
        self.retry_after = retry_after
        super().__init__(message, status=status)


class TransientError(ModelError):
    """408, 5xx, dropped connections, timeouts, unparseable replies."""

    kind = "TransientError"
    retryable = True


class ConnectionFailed(TransientError):
    """The endpoint could not be reached at all (refused, DNS, bad address).

    Retried only briefly: an unreachable endpoint is an infrastructure error, and
    the batch stops starting trials after a few of them in a row."""

    kind = "ConnectionError"
    #: the endpoint failed, not the agent: the unit is an error, re-run on request
    infrastructure = True


class AuthError(ModelError):
    kind = "AuthError"


class ContextWindowError(ModelError):
    kind = "ContextWindowError"


class BadRequestError(ModelError):
    kind = "BadRequestError"


class RetriesExhausted(ModelError):
    """The last retryable error, after the attempt or time cap was reached."""

    kind = "RetriesExhausted"
