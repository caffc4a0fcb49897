"""A job's claim on one unit of the concurrency budget, and the backoff that gives
it back while it waits.

The engine's scheduler hands each job a `Slot` (`helios.engine.scheduler`); the
layers below it (a model client's retries, an agent's turns) only hold one and
let it go while they sleep, so waiting never blocks other work.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class Slot:
    """A job's claim on one unit of the concurrency budget."""

    def __init__(self, semaphore: asyncio.Semaphore) -> None:
        self._semaphore = semaphore
        self._held = False

    async def acquire(self) -> None:
        await self._semaphore.acquire()
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._semaphore.release()

    @asynccontextmanager
    async def released(self) -> AsyncIterator[None]:
        """Give the slot back for the duration of the block (e.g. a backoff sleep)."""
        was_held = self._held
        self.release()
        try:
            yield
        finally:
            if was_held:
                await self.acquire()


async def backoff_sleep(slot: Slot | None, seconds: float) -> None:
    """Sleep without holding a scheduler slot."""
    if slot is None:
        await asyncio.sleep(seconds)
        return
    async with slot.released():
        await asyncio.sleep(seconds)
