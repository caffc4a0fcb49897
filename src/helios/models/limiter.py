"""Adaptive per-provider limits on model calls in flight (AIMD).

Starts moderate, grows additively while calls succeed (about +1 per `limit`
successes), halves on a 429 and then holds still for a cooldown, so one burst
of 429s from many concurrent calls shrinks the limit once, not to the floor.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class AdaptiveLimiter:
    def __init__(
        self,
        *,
        initial: float = 16,
        minimum: float = 1,
        maximum: float = 512,
        decrease: float = 0.5,
        cooldown: float = 5.0,
    ) -> None:
        self.limit = float(initial)
        self.minimum = float(minimum)
        self.maximum = float(maximum)
        self.decrease = decrease
        self.cooldown = cooldown
        self.in_flight = 0
        self._hold_until = 0.0
        self._changed = asyncio.Condition()

    @property
    def current(self) -> int:
        return max(int(self.minimum), int(self.limit))

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        await self.acquire()
        try:
            yield
        finally:
            await self.release()

    async def acquire(self) -> None:
        """Wait for room under the limit and take it (`slot` is acquire, then release)."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.in_flight < self.current)
            self.in_flight += 1

    async def release(self) -> None:
        async with self._changed:
            self.in_flight -= 1
            self._changed.notify_all()

    def on_success(self) -> None:
        if time.monotonic() < self._hold_until:
            return
        self.limit = min(self.maximum, self.limit + 1.0 / max(self.limit, 1.0))

    def on_rate_limit(self, retry_after: float | None = None) -> None:
        """A 429 (`retry_after`: what the server asked for; a limiter shared by many
        processes holds every call for it, `engine.shared_limits`)."""
        now = time.monotonic()
        if now < self._hold_until:
            return  # same burst: already shrunk
        self.limit = max(self.minimum, self.limit * self.decrease)
        self._hold_until = now + self.cooldown
