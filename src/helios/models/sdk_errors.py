"""Map exceptions of the official SDKs (both Stainless-generated, same shapes) to ours."""

from __future__ import annotations

import email.utils
import errno
import json
import math
import socket
import time
from types import ModuleType
from typing import Any

from helios.models.errors import (
    AuthError,
    BadRequestError,
    ConnectionFailed,
    ContextWindowError,
    ModelError,
    RateLimitError,
    TransientError,
)

_CONTEXT_MARKERS = (
    "context_length_exceeded",
    "maximum context length",
    "context window",
    "prompt is too long",
    "too many tokens",
    "input is too long",
    # Gemini: "The input token count (N) exceeds the maximum number of tokens allowed (M)."
    "exceeds the maximum number of tokens",
)


def retry_after_seconds(headers: Any) -> float | None:
    """Seconds from `retry-after-ms` or `retry-after` (seconds or an HTTP date)."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            seconds = float(millis) / 1000
        except (TypeError, ValueError):
            seconds = math.nan
        if math.isfinite(seconds):
            return max(0.0, seconds)
    value = headers.get("retry-after")
    if not value:
        return None
    # Anything unparseable counts as absent: a duplicated header arrives as "1, 1".
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        try:
            parsed = email.utils.parsedate_to_datetime(str(value))
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        seconds = parsed.timestamp() - time.time()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _message(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return str(exc)


def _chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    link: BaseException | None = exc
    while link is not None and len(chain) < 8:
        chain.append(link)
        link = link.__cause__ or link.__context__
    return chain


def unreachable_reason(exc: BaseException) -> str | None:
    """Why the endpoint could not be reached at all, or None if it was reached.

    The SDKs report a refused connection over aiohttp as a *timeout*; the cause
    chain tells the truth."""
    chain = _chain(exc)
    if any(isinstance(e, socket.gaierror) for e in chain):
        return "host name not found"
    if any(getattr(e, "errno", None) == errno.ECONNREFUSED for e in chain):
        return "connection refused"
    text = " ".join(str(e) for e in chain).lower()
    if "name or service not known" in text or "nodename nor servname" in text:
        return "host name not found"
    if "refused" in text or "connect call failed" in text:
        return "connection refused"
    if "cannot connect to host" in text or "unsupported protocol" in text:
        return " ".join(str(chain[-1]).split())[:200]
    return None


def _endpoint(exc: BaseException) -> str:
    url = getattr(getattr(exc, "request", None), "url", None)
    if url is None:
        return "the endpoint"
    return f"{url.scheme}://{url.netloc.decode()}"


def is_context_overflow(code: object, message: str) -> bool:
    text = f"{code or ''} {message}".lower()
    return any(marker in text for marker in _CONTEXT_MARKERS)


def status_error(status: int, message: str, headers: Any, code: object = None) -> ModelError:
    """Our typed error for an HTTP error status (the same mapping for every transport)."""
    if status == 429:
        return RateLimitError(message, retry_after=retry_after_seconds(headers))
    if status in (401, 403):
        return AuthError(f"authentication failed ({status}): {message}", status=status)
    if status in (400, 413, 422) and is_context_overflow(code, message):
        return ContextWindowError(message, status=status)
    if status == 408 or status == 409 or status >= 500:
        return TransientError(f"server error {status}: {message}", status=status)
    return BadRequestError(f"request rejected ({status}): {message}", status=status)


def map_sdk_error(exc: Exception, sdk: ModuleType) -> ModelError | None:
    """Our typed error for an SDK exception, or None if it is not a model error."""
    message = " ".join(_message(exc).split())[:400]
    if isinstance(exc, sdk.APIConnectionError):  # APITimeoutError is one too
        reason = unreachable_reason(exc)
        if reason is not None:
            return ConnectionFailed(f"cannot connect to {_endpoint(exc)}: {reason}")
        if isinstance(exc, sdk.APITimeoutError):
            return TransientError(f"request timed out: {message}")
        return TransientError(f"connection failed: {message}")
    if isinstance(exc, sdk.APIStatusError):
        headers = getattr(exc.response, "headers", None)
        return status_error(int(exc.status_code), message, headers, getattr(exc, "code", None))
    if isinstance(exc, json.JSONDecodeError | ValueError):
        # A 200 with an unparseable body: the SDKs raise plain ValueError.
        return TransientError(f"malformed response: {message[:200]}")
    return None
