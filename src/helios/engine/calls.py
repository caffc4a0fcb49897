"""Calls a unit makes to an endpoint that is not one of Helios's model clients: a
tool-call agent under test, a speech synthesizer.

`ModelServices` (models/services.py) gives model calls their adaptive limiter and
Helios's retries; `EndpointCalls` gives the same to any other endpoint, for one
batch: one adaptive limiter per endpoint (it starts at the batch's bound and shrinks
only when that endpoint answers 429), a timeout per attempt, and the retries of
`models/retry.py` (backoff with jitter, Retry-After honoured, the unit's scheduler
slot given back while it waits). A failure that is not a typed `ModelError` yet is
typed by `classify` (the endpoint's transport knows its own exceptions), so that
only the transient ones (timeouts, 429, 5xx, dropped connections) are retried.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from helios.models.errors import ModelError, TransientError
from helios.models.limiter import AdaptiveLimiter
from helios.models.retry import OnRetry, RetryPolicy, call_with_retries
from helios.slots import Slot

T = TypeVar("T")

#: a failure as a typed error, or None when it is not one the endpoint's calls know
Classify = Callable[[BaseException], ModelError | None]


def _untyped(exc: BaseException) -> ModelError | None:
    return None


@dataclass
class EndpointCalls:
    """One endpoint's calls in a batch."""

    policy: RetryPolicy
    #: calls in flight at most: the batch's bound, until the endpoint answers 429
    limit: int
    #: seconds one attempt may take before it counts as a transient timeout (None: no limit)
    timeout: float | None
    classify: Classify = _untyped
    limiter: AdaptiveLimiter = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.limiter = AdaptiveLimiter(initial=self.limit, maximum=self.limit)

    async def call(
        self,
        make: Callable[[], Awaitable[T]],
        *,
        slot: Slot | None = None,
        on_retry: OnRetry | None = None,
    ) -> tuple[T, int]:
        """`make()` awaited under the limiter, each attempt timed out and typed, the
        transient failures retried; (its value, the retries it took). The last
        failure is raised: a non-retryable one at once, else `RetriesExhausted`."""
        timeout, classify = self.timeout, self.classify

        async def attempt() -> T:
            try:
                async with asyncio.timeout(timeout):
                    return await make()
            except ModelError:
                raise
            except TimeoutError as exc:
                raise classify(exc) or TransientError("timed out") from exc
            except Exception as exc:
                mapped = classify(exc)
                if mapped is None:
                    raise
                raise mapped from exc

        return await call_with_retries(
            attempt, limiter=self.limiter, policy=self.policy, slot=slot, on_retry=on_retry
        )
