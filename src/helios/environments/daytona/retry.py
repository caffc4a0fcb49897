"""Which Daytona errors are worth another try, and the tries (tenacity).

- A quota error ("Sandbox resource limit reached", "Total CPU limit exceeded"):
  the organization has too many sandboxes at once. The trial is not at fault:
  wait (backing off, up to `QUOTA_PATIENCE`) until other sandboxes are gone.
- A transient error (429, 5xx, a dropped or timed-out connection): a few more
  tries, backing off.
- An API that cannot be reached at all (refused, unknown host): no retry, one
  clear line naming the URL (`unreachable`).
Anything else (a bad request, a key refused, a per-sandbox maximum passed) fails
at once, with Daytona's own message.
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tenacity import AsyncRetrying, RetryCallState, stop_after_attempt, stop_before_delay

from helios.errors import EnvironmentUnavailable

T = TypeVar("T")
log = logging.getLogger(__name__)

#: how long a create waits out a quota error before the trial fails
QUOTA_PATIENCE = 1800.0
QUOTA_BASE_DELAY = 2.0
QUOTA_MAX_DELAY = 60.0
#: tries of a call that failed for a transient reason
TRANSIENT_ATTEMPTS = 5
TRANSIENT_BASE_DELAY = 0.5
TRANSIENT_MAX_DELAY = 10.0

_QUOTA = re.compile(r"resource limit reached|limit exceeded|quota", re.IGNORECASE)
#: a per-sandbox bound ("Disk request 20GB exceeds maximum allowed per sandbox"):
#: waiting never helps
_PER_SANDBOX = re.compile(r"per sandbox", re.IGNORECASE)
_TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


def _status(error: BaseException) -> int | None:
    status = getattr(error, "status_code", None)
    return status if isinstance(status, int) else None


def _is_sdk_error(error: BaseException) -> bool:
    return any(cls.__name__ == "DaytonaError" for cls in type(error).__mro__)


def is_quota(error: BaseException) -> bool:
    if not _is_sdk_error(error):
        return False
    text = str(error)
    return bool(_QUOTA.search(text)) and not _PER_SANDBOX.search(text)


def is_unreachable(error: BaseException) -> bool:
    """The API did not answer at all: a refused connection, a host that does not
    resolve (the SDK's DaytonaConnectionError, short of a timeout)."""
    names = {cls.__name__ for cls in type(error).__mro__}
    return "DaytonaConnectionError" in names and "DaytonaTimeoutError" not in names


def is_transient(error: BaseException) -> bool:
    if not _is_sdk_error(error) or is_unreachable(error):
        return False
    names = {cls.__name__ for cls in type(error).__mro__}
    if "DaytonaConnectionError" in names or "DaytonaTimeoutError" in names:
        return True
    return _status(error) in _TRANSIENT_STATUS


def unreachable(url: str, error: BaseException) -> EnvironmentUnavailable:
    reason = str(error).strip().splitlines()[0][:200] if str(error).strip() else "no answer"
    return EnvironmentUnavailable(
        f"Daytona API not reachable at {url} ({reason}): check DAYTONA_API_URL"
    )


def _delay(error: BaseException | None, attempt: int) -> float:
    if error is not None and is_quota(error):
        ceiling = min(QUOTA_MAX_DELAY, QUOTA_BASE_DELAY * 2.0 ** (attempt - 1))
    else:
        ceiling = min(TRANSIENT_MAX_DELAY, TRANSIENT_BASE_DELAY * 2.0 ** (attempt - 1))
    return ceiling * (0.5 + 0.5 * random.random())


async def with_retries(call: Callable[[], Awaitable[T]], what: str, url: str,
                       *, quota_patience: float = QUOTA_PATIENCE,
                       given_up: Callable[[], bool] | None = None) -> T:  # fmt: skip
    """`call`, tried again on a transient error (a few times) or a quota error
    (until `quota_patience` seconds have passed); an unreachable API raises
    `EnvironmentUnavailable` at once. Once `given_up()` holds (its caller was
    cancelled while a try was in flight), a failed try is not tried again."""
    transient_tries = 0

    def retryable(state: RetryCallState) -> bool:
        nonlocal transient_tries
        error = _error(state)
        if error is None or (given_up is not None and given_up()):
            return False
        if is_quota(error):
            return True
        if is_transient(error):
            transient_tries += 1
            return transient_tries < TRANSIENT_ATTEMPTS
        return False

    def before_sleep(state: RetryCallState) -> None:
        error = _error(state)
        kind = "quota" if error is not None and is_quota(error) else "transient error"
        log.warning("daytona: %s: %s (%s); again in %.1fs", what, kind, error,
                    state.upcoming_sleep)  # fmt: skip

    retrying = AsyncRetrying(
        stop=stop_before_delay(quota_patience) | stop_after_attempt(10_000),
        wait=lambda state: _delay(_error(state), state.attempt_number),
        retry=retryable,
        before_sleep=before_sleep,
        reraise=True,
    )
    try:
        async for attempt in retrying:
            with attempt:
                return await call()
    except Exception as exc:
        if is_unreachable(exc):
            raise unreachable(url, exc) from None
        raise
    raise AssertionError("unreachable: tenacity returns or raises")  # pragma: no cover


def _error(state: RetryCallState) -> BaseException | None:
    return state.outcome.exception() if state.outcome is not None else None
