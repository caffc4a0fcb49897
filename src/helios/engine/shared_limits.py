"""The run's model-call limits, shared by every process that makes its calls (issue 33).

In one process every trial of a batch shares its model services' adaptive limiter
(`models/limiter.py`): calls in flight per endpoint and key, halved on a 429. When the
trials run in several processes (`--workers N`, `engine/workers.py`; `--executor ray`,
`engine/ray_executor.py`), a limiter per process would let N processes send N times what
the provider allows. So one `LimitsBox` holds the limiter of each of the run's models:
the parent process's (workers ask it over their socket) or a Ray actor on the driver's
node. A process's model services use a `SharedLimiter`, which asks the box for room
before each call and tells it how the call went (through a `LimitsClient`, the
transport):

- a 429 halves the limit for the whole run, and its Retry-After holds every call of the
  run until then (one process's retries wait it out call by call; N processes that did
  so would keep sending from the others);
- from the first 429 on, the calls are paced: started no faster than the rate the
  provider answered in the second before it (less a tenth), a rate that grows again
  slowly while no 429 comes. So the run sends about what the provider allows, not a
  burst each time a hold ends;
- a process that dies while it holds room leaks that room; the box hands it back after
  `LEASE_SECONDS` (no model call lasts that long without an answer), or at once when
  its holder says it died (`release_all` of the worker's leases).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import random
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Protocol

from helios.engine.door import CallsEndpoints
from helios.models.limiter import AdaptiveLimiter

#: how long room taken by a call may be held before the box takes it back
LEASE_SECONDS = 900.0
#: the prefix of a door endpoint's key in the box (a model's is its name)
ENDPOINT = "endpoint:"


class LimitsBox:
    """The run's model-call limiters, one per model, by name (a Ray actor, or an object
    of the parent process of `--workers`)."""

    def __init__(self, limits: dict[str, dict[str, float]]) -> None:
        self.limiters = {key: AdaptiveLimiter(**kw) for key, kw in limits.items()}
        #: no call starts before this (a 429's Retry-After), per model
        self.hold_until: dict[str, float] = {}
        #: calls started per second at most, per model, once a 429 came (None: unpaced);
        #: when the next call may start; when the calls of the last second were answered
        self.rate: dict[str, float] = {}
        self.next_start: dict[str, float] = {}
        self.answered: dict[str, collections.deque[float]] = {}
        self.last_429: dict[str, float] = {}
        #: when each lease was taken, by its number
        self.leases: dict[int, tuple[str, float]] = {}
        # from a random start: a lease of the box's earlier life (a Ray actor restarted
        # after its node died) is released to this one as an unknown lease, never as its own
        self.next_lease = random.getrandbits(48)
        #: what the run did, for the live line and the tests
        self.counts = {"calls": 0, "rate_limited": 0, "peak_in_flight": 0}

    async def acquire(self, key: str) -> int:
        """Wait for room for one call of model `key`; returns the lease to release."""
        limiter = self.limiters[key]
        while True:
            self._expire()
            wait = self.hold_until.get(key, 0.0) - time.monotonic()
            if wait <= 0:
                break
            await asyncio.sleep(wait)
        rate = self.rate.get(key)
        if rate is not None:  # paced: each call takes the next start time, in turn
            now = time.monotonic()
            start = max(now, self.next_start.get(key, 0.0), self.hold_until.get(key, 0.0))
            self.next_start[key] = start + 1.0 / rate
            if start > now:
                await asyncio.sleep(start - now)
        await limiter.acquire()
        self.next_lease += 1
        self.leases[self.next_lease] = (key, time.monotonic())
        self.counts["calls"] += 1
        self.counts["peak_in_flight"] = max(self.counts["peak_in_flight"], limiter.in_flight)
        return self.next_lease

    async def release(self, lease: int, outcome: str, retry_after: float | None = None) -> None:
        """The call of `lease` ended: "ok", "rate_limited" (a 429), or "failed"."""
        taken = self.leases.pop(lease, None)
        if taken is None:
            return  # expired meanwhile
        key = taken[0]
        limiter = self.limiters[key]
        now = time.monotonic()
        answered = self.answered.setdefault(key, collections.deque())
        while answered and answered[0] <= now - 1.0:
            answered.popleft()
        if outcome == "ok":
            limiter.on_success()
            answered.append(now)
            rate = self.rate.get(key)
            if rate is not None and now - self.last_429.get(key, 0.0) > limiter.cooldown:
                self.rate[key] = rate + 0.1  # about +1/s for every 10 answers without a 429
        elif outcome == "rate_limited":
            self.counts["rate_limited"] += 1
            limiter.on_rate_limit()
            self.last_429[key] = now
            allowed = max(len(answered), 1) * 0.9
            self.rate[key] = min(self.rate.get(key, allowed), allowed)
            if retry_after:
                until = now + retry_after
                self.hold_until[key] = max(self.hold_until.get(key, 0.0), until)
        await limiter.release()

    def current(self, key: str) -> int:
        return self.limiters[key].current

    def stats(self) -> dict[str, int]:
        return dict(self.counts)

    def _expire(self) -> None:
        # leases are kept in the order they were taken: the expired ones come first
        old = time.monotonic() - LEASE_SECONDS
        expired = []
        for lease, (key, taken) in self.leases.items():
            if taken >= old:
                break
            expired.append((lease, key))
        for lease, key in expired:
            del self.leases[lease]
            self.limiters[key].forget()


def limits_of(services: Any) -> dict[str, dict[str, float]]:
    """The starting limits of each of the run's models (`ModelServices`), by name."""
    if services is None:
        return {}
    every = {_key(services): services, **{_key(o): o for o in services.others.values()}}
    return {key: _start(s.limiter) for key, s in every.items()}


def endpoint_limits(door: Any) -> dict[str, dict[str, float]]:
    """The starting limits of each endpoint of a door (`CallsEndpoints`), by key."""
    if not isinstance(door, CallsEndpoints):
        return {}
    return {ENDPOINT + name: _start(calls.limiter) for name, calls in door.endpoints().items()}


def _start(limiter: AdaptiveLimiter) -> dict[str, float]:
    return {"initial": limiter.limit, "minimum": limiter.minimum, "maximum": limiter.maximum,
            "decrease": limiter.decrease, "cooldown": limiter.cooldown}  # fmt: skip


def _key(services: Any) -> str:
    return str(services.name or services.spec.qualified)


class LimitsClient(Protocol):
    """How a process reaches the run's `LimitsBox`: a Ray actor's handle
    (`ray_limits.RayLimits`), or its socket to the parent (`_worker_side`)."""

    async def acquire(self, key: str) -> int: ...

    def release(self, lease: int, outcome: str, retry_after: float | None) -> None: ...


def share_limits(services: Any, box: LimitsClient | None) -> None:
    """Make a process's model services (and the run's other models') ask `box`."""
    if services is None or box is None:
        return
    for one in (services, *services.others.values()):
        one.limiter = SharedLimiter(box, _key(one), one.limiter)


def share_endpoints(door: Any, box: LimitsClient | None) -> None:
    """Make a process's copy of the door's endpoints (`CallsEndpoints`) ask `box`."""
    if box is None or not isinstance(door, CallsEndpoints):
        return
    for name, calls in door.endpoints().items():
        calls.limiter = SharedLimiter(box, ENDPOINT + name, calls.limiter)


class SharedLimiter(AdaptiveLimiter):
    """A process's view of the run's limiter of one model, held by the `LimitsBox`.
    The call's outcome reaches the box with the release (`slot`): `on_success` and
    `on_rate_limit` only note it."""

    def __init__(self, box: LimitsClient, key: str, like: AdaptiveLimiter) -> None:
        super().__init__(initial=like.limit, minimum=like.minimum, maximum=like.maximum,
                         decrease=like.decrease, cooldown=like.cooldown)  # fmt: skip
        self.box, self.key = box, key
        #: each call's outcome, by the task that makes it (a trial may make several)
        self._outcomes: dict[object, tuple[str, float | None]] = {}

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        lease = await self.box.acquire(self.key)
        me = asyncio.current_task()
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1
            outcome, retry_after = self._outcomes.pop(me, ("failed", None))
            with contextlib.suppress(Exception):  # the box gone: the run is ending
                self.box.release(lease, outcome, retry_after)

    def on_success(self) -> None:
        self._outcomes[asyncio.current_task()] = ("ok", None)

    def on_rate_limit(self, retry_after: float | None = None) -> None:
        self._outcomes[asyncio.current_task()] = ("rate_limited", retry_after)
