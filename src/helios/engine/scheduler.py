"""The bounded scheduler: the only place that decides how much runs at once.

Invariants:
- at most `n_concurrent` jobs hold a slot at any instant;
- jobs acquire slots in submission order (asyncio.Semaphore is FIFO), so the
  caller's order (attempts interleaved across tasks) is the start order;
- a job may give its slot back while it waits (a retry backoff) and queue again
  for one afterwards, so waiting never blocks other work;
- all the same, at most `max_in_flight` jobs exist at once (running or waiting),
  so live sandboxes and memory stay bounded; a job keeps its ticket from start
  to finish, and waits for a slot only while holding one, so this cannot deadlock;
- once `stop_when()` is true no further item starts; items in flight finish;
- a job's exception never escapes `run`: the job is expected to turn failures
  into data, and anything that slips through is passed to `on_crash`.

A job's `Slot` and `backoff_sleep` are defined in `helios.slots` (the layers below
the engine hold slots too) and named here as well.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Generic, TypeVar

from helios.slots import Slot, backoff_sleep

__all__ = ["Scheduler", "Slot", "backoff_sleep"]

T = TypeVar("T")
R = TypeVar("R")


class Scheduler(Generic[T, R]):
    """Runs `job(item, slot)` for each item with at most `n_concurrent` in flight."""

    def __init__(
        self,
        job: Callable[[T, Slot], Awaitable[R]],
        *,
        n_concurrent: int,
        on_result: Callable[[T, R], Awaitable[None] | None] | None = None,
        on_crash: Callable[[T, BaseException], R] | None = None,
        stop_when: Callable[[], bool] | None = None,
        max_in_flight: int | None = None,
        keep_results: bool = True,
    ) -> None:
        if n_concurrent < 1:
            raise ValueError("n_concurrent must be at least 1")
        self._job = job
        self._n = n_concurrent
        #: jobs that exist at once, waiting ones included (default 2 × n)
        self._max_in_flight = max(n_concurrent, max_in_flight or 2 * n_concurrent)
        self._on_result = on_result
        self._on_crash = on_crash
        self._stop_when = stop_when
        #: collect results for `run` to return; off, memory stays flat in the input size
        self._keep = keep_results

    async def run(self, items: Iterable[T]) -> list[R]:
        """Run every item; return results in completion order (none if not `keep_results`)."""
        semaphore = asyncio.Semaphore(self._n)
        tickets = asyncio.Semaphore(self._max_in_flight)
        results: list[R] = []
        async with asyncio.TaskGroup() as group:
            for item in items:
                slot = Slot(semaphore)
                # Acquire before creating the task: bounds memory for huge inputs
                # and keeps the start order equal to the input order.
                await tickets.acquire()
                await slot.acquire()
                if self._stop_when is not None and self._stop_when():
                    # A fatal condition (e.g. a rejected API key): start nothing
                    # more; trials in flight finish and are recorded.
                    slot.release()
                    tickets.release()
                    break
                group.create_task(self._run_ticketed(item, slot, results, tickets))
        return results

    async def _run_ticketed(
        self, item: T, slot: Slot, results: list[R], tickets: asyncio.Semaphore
    ) -> None:
        try:
            await self._run_one(item, slot, results)
        finally:
            tickets.release()

    async def _run_one(self, item: T, slot: Slot, results: list[R]) -> None:
        try:
            try:
                result = await self._job(item, slot)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self._on_crash is None:
                    raise
                result = self._on_crash(item, exc)
        finally:
            slot.release()
        if self._keep:
            results.append(result)
        if self._on_result is not None:
            maybe = self._on_result(item, result)
            if maybe is not None:
                await maybe
