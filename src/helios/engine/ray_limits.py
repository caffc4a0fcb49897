"""Limits a run shares across a Ray cluster (`--executor ray`, issue 33).

- **Model calls**: one `LimitsBox` (`engine/shared_limits.py`), as a Ray actor on the
  driver's node made by the driver for the run, holds the limiter of each of the run's
  models; a trial's services ask it through `RayLimits`, the actor's handle. A cluster of
  N nodes so sends about what the provider allows, not N times that. An actor whose node
  dies is made again on another node, with the starting limits, and the calls waiting
  for room ask it again (`max_restarts`, `max_task_retries`).
- **Other endpoints**: a door's own endpoints (`CallsEndpoints`: the tool-call door's
  agent under test and synthesizer, whose calls go through `EndpointCalls`) get the
  same, one limiter each in the actor (`endpoint_limits`, `share_endpoints`).
- **Budgets** need nothing here: the driver decides every start (`BatchService.halted`)
  and adds each trial's usage as its result comes.
- **Sandbox starts**: at most the run's `sandbox_starts` at once on each node, by
  file locks in the node's scratch folder of the run (`NodeStartGate`): the trials
  of a node run in several worker processes, which share no memory, but share the
  node's file system. A lock dies with its process.

Ray is imported by the caller (`engine/ray_executor.py`); this module needs it not.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
from pathlib import Path
from typing import Any, Literal

from helios.engine.shared_limits import LimitsBox, endpoint_limits, limits_of
from helios.engine.shared_limits import share_endpoints as _share_endpoints
from helios.engine.shared_limits import share_limits as _share

__all__ = ["LimitsBox", "NodeStartGate", "RayLimits", "endpoint_limits", "limits_of",
           "share_endpoints", "share_limits"]  # fmt: skip

#: how often a trial waiting for a node's start lock tries again
START_POLL = 0.05


class RayLimits:
    """The `LimitsClient` of a trial on a node: the `LimitsBox` actor's handle."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    async def acquire(self, key: str) -> int:
        lease: int = await self.handle.acquire.remote(key)
        return lease

    def release(self, lease: int, outcome: str, retry_after: float | None) -> None:
        self.handle.release.remote(lease, outcome, retry_after)


def share_limits(services: Any, box: Any) -> None:
    """Make a trial's model services (and the run's other models') ask the actor `box`."""
    _share(services, RayLimits(box) if box is not None else None)


def share_endpoints(door: Any, box: Any) -> None:
    """Make a trial's copy of the door's endpoints (`CallsEndpoints`) ask the actor `box`."""
    _share_endpoints(door, RayLimits(box) if box is not None else None)


class NodeStartGate(asyncio.Semaphore):
    """At most `slots` sandbox starts at once on this node, across its processes: one
    of `slots` file locks in `folder` is held for each start."""

    def __init__(self, folder: Path, slots: int) -> None:
        super().__init__(slots)
        self.folder, self.slots = folder, max(1, slots)
        self._held: list[int] = []

    async def acquire(self) -> Literal[True]:
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        while True:
            for index in range(self.slots):
                fd = os.open(self.folder / f"start-{index}.lock", os.O_CREAT | os.O_RDWR, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                self._held.append(fd)
                return True
            await asyncio.sleep(START_POLL)

    def release(self) -> None:
        if self._held:
            fd = self._held.pop()
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def locked(self) -> bool:
        return False
