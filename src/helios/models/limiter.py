"""Adaptive per-provider limits on model calls in flight (AIMD).

Starts moderate, grows additively while calls succeed (about +1 per `limit`
successes), halves on a 429 and then holds still for a cooldown, so one burst
of 429s from many concurrent calls shrinks the limit once, not to the floor.
"""

from __future__ import annotations

import asyncio
import collections
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
        #: calls waiting for room, first come first served; a release admits as many
        #: as there is room for (a condition's notify_all woke every waiter per release)
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

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
        if not self._waiters and self.in_flight < self.current:
            self.in_flight += 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter  # the room is taken for us when it is set
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.in_flight -= 1  # admitted, then cancelled: the room goes on
            elif waiter in self._waiters:  # else an admission already dropped it
                self._waiters.remove(waiter)
            self._admit()
            raise

    async def release(self) -> None:
        self.in_flight -= 1
        self._admit()

    def forget(self) -> None:
        """Give back the room of a call whose end will never be told (its holder died)."""
        self.in_flight = max(0, self.in_flight - 1)
        self._admit()

    def _admit(self) -> None:
        while self._waiters and self.in_flight < self.current:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.in_flight += 1
                waiter.set_result(None)

    def on_success(self) -> None:
        if time.monotonic() < self._hold_until:
            return
        self.limit = min(self.maximum, self.limit + 1.0 / max(self.limit, 1.0))
        self._admit()

    def on_rate_limit(self, retry_after: float | None = None) -> None:
        """A 429 (`retry_after`: what the server asked for; a limiter shared by many
        processes holds every call for it, `engine.shared_limits`)."""
        now = time.monotonic()
        if now < self._hold_until:
            return  # same burst: already shrunk
        self.limit = max(self.minimum, self.limit * self.decrease)
        self._hold_until = now + self.cooldown
