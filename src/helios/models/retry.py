"""Retries of a model call: exponential backoff with jitter, Retry-After honoured,
capped in attempts and in total time, through tenacity. Waiting never holds a
scheduler slot (tenacity's sleep is `backoff_sleep`)."""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn, TypeVar

from helios.models.errors import ConnectionFailed, ModelError, RateLimitError, RetriesExhausted
from helios.models.limiter import AdaptiveLimiter
from helios.slots import Slot, backoff_sleep

# tenacity is imported by the first call that is retried (`call_with_retries`): a
# batch whose calls all succeed at once, or that makes none, never imports it.
if TYPE_CHECKING:
    from tenacity import RetryCallState

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
    """Run `call` under the limiter; return (result, retries used).

    The loop is tenacity's: what is retried (a retryable `ModelError`; an endpoint
    that cannot be reached only `connection_attempts` times), the wait
    (`RetryPolicy.delay`), the stop (attempts, or a wait that would pass the total
    time) and the sleep, which releases the scheduler slot (`backoff_sleep`)."""

    async def attempt() -> T:
        async with limiter.slot():
            try:
                result = await call()
            except RateLimitError as exc:
                limiter.on_rate_limit(exc.retry_after)
                raise
            limiter.on_success()
            return result

    def retryable(state: RetryCallState) -> bool:
        error = _error(state)
        if not isinstance(error, ModelError) or not error.retryable:
            return False
        unreachable = isinstance(error, ConnectionFailed)
        return not (unreachable and state.attempt_number >= policy.connection_attempts)

    def gave_up(state: RetryCallState) -> NoReturn:
        last = _error(state)
        assert isinstance(last, ModelError)
        raise RetriesExhausted(
            f"gave up after {state.attempt_number} attempts in "
            f"{time.monotonic() - started:.0f}s: {last.kind}: {last}"
        ) from last

    def before_sleep(state: RetryCallState) -> None:
        error = _error(state)
        if on_retry is not None and isinstance(error, ModelError):
            on_retry(error, state.upcoming_sleep, state.attempt_number)

    started = time.monotonic()
    # Most calls succeed at once: the first attempt runs without tenacity's machinery
    # (a third of the engine's CPU per model call), and its failure, if retryable, is
    # handed to the loop as the loop's own first attempt.
    try:
        return await attempt(), 0
    except ModelError as exc:
        if not exc.retryable:
            raise
        first: ModelError | None = exc
    from tenacity import AsyncRetrying, stop_after_attempt, stop_before_delay

    remaining = policy.max_total_seconds - (time.monotonic() - started)
    retrying = AsyncRetrying(
        sleep=lambda seconds: backoff_sleep(slot, seconds),
        stop=stop_after_attempt(policy.max_attempts) | stop_before_delay(remaining),
        wait=lambda state: policy.delay(_error(state), state.attempt_number),  # type: ignore[arg-type]
        retry=retryable,
        before_sleep=before_sleep,
        retry_error_callback=gave_up,
    )
    async for trial in retrying:
        with trial:
            if first is not None:
                error, first = first, None
                raise error
            result = await attempt()
        if not trial.retry_state.outcome or not trial.retry_state.outcome.failed:
            return result, trial.retry_state.attempt_number - 1
    raise AssertionError("unreachable: tenacity returns or raises")  # pragma: no cover


def _error(state: RetryCallState) -> BaseException | None:
    return state.outcome.exception() if state.outcome is not None else None
