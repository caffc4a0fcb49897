"""Helios's own retries: exponential backoff with jitter, Retry-After honoured,
capped in attempts and in total time. Waiting never holds a scheduler slot."""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from helios.models.errors import ConnectionFailed, ModelError, RateLimitError, RetriesExhausted
from helios.models.limiter import AdaptiveLimiter
from helios.slots import Slot, backoff_sleep

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 10
    max_total_seconds: float = 900.0
    base_delay: float = 1.0
    max_delay: float = 60.0
    #: attempts at an endpoint that cannot be reached at all: fail fast, it is
    #: not going to answer (the batch stops after a few such units in a row)
    connection_attempts: int = 3

    def delay(self, error: ModelError, attempt: int) -> float:
        if isinstance(error, RateLimitError) and error.retry_after is not None:
            # At least what the server asked for, plus a little spread.
            return error.retry_after * (1.0 + 0.2 * random.random())
        ceiling = min(self.max_delay, self.base_delay * 2.0 ** (attempt - 1))
        return ceiling * (0.5 + 0.5 * random.random())


OnRetry = Callable[[ModelError, float, int], None]


async def call_with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    limiter: AdaptiveLimiter,
    policy: RetryPolicy,
    slot: Slot | None = None,
    on_retry: OnRetry | None = None,
) -> tuple[T, int]:
    """Run `call` under the limiter; return (result, retries used)."""
    started = time.monotonic()
    attempt = 0
    while True:
        attempt += 1
        async with limiter.slot():
            try:
                result = await call()
            except ModelError as error:
                if isinstance(error, RateLimitError):
                    limiter.on_rate_limit()
                if not error.retryable:
                    raise
                last = error
            else:
                limiter.on_success()
                return result, attempt - 1
        if isinstance(last, ConnectionFailed) and attempt >= policy.connection_attempts:
            raise last
        delay = policy.delay(last, attempt)
        elapsed = time.monotonic() - started
        if attempt >= policy.max_attempts or elapsed + delay > policy.max_total_seconds:
            raise RetriesExhausted(
                f"gave up after {attempt} attempts in {elapsed:.0f}s: {last.kind}: {last}"
            ) from last
        if on_retry is not None:
            on_retry(last, delay, attempt)
        await backoff_sleep(slot, delay)
