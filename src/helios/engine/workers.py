"""Worker processes: a batch's units run on every core, one writer keeps the store.

`BatchService.run` with `workers > 1` forks that many workers once the plan is
made. Each runs its own event loop and its share of the `-n` budget (slots,
tickets, sandbox starts, its own model client and limiter). The parent stays
the only writer: it hands units out one at a time as a worker has room (so the
start order is still the input order), and every result comes back to it to be
written and recorded exactly as with one process (`BatchService._record`):
files first, then the completion mark, then events and callbacks.

Messages are length-prefixed pickles over a socket pair per worker:
- parent → worker: ("unit", index) | ("stop",) no more starts | ("end",) no more units;
- worker → parent: ("event", event) | ("result", index, result, totals) |
  ("unstarted", index) a unit it was sent but did not start after a stop.

A worker that dies (kill -9) has its units in flight recorded as crashed (an
error, re-run by `--retry-errors`); the others go on, and a unit sent to it as it
died goes to another. On an interrupt the parent sends SIGTERM to every worker,
whose trials stop their sandboxes as they would in one process, and keeps
recording what still comes back until they close (bounded), before the
provider's cleanup; the stopped units run again on resume. A worker whose parent
stops reading stops too, quietly.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from helios._proc import run_to_end, within
from helios.engine._wire import receive, send
from helios.engine._worker_side import WorkerBatch, worker_main
from helios.engine.episode import EpisodeContext
from helios.failures import ErrorInfo


class _Budget(Protocol):
    @property
    def n_concurrent(self) -> int: ...

    @property
    def max_starts(self) -> int: ...


class ShardedBatch(WorkerBatch, Protocol):
    """What the parent's side uses of the batch service it runs in workers
    (`batch.BatchService`): its budget to split, whether it stopped, and its one
    writer's recording and events."""

    @property
    def options(self) -> _Budget: ...

    @property
    def aborted(self) -> str | None: ...

    def _emit(self, event: Any) -> None: ...

    async def _record(self, unit: Any, result: Any) -> None: ...

#: how long an interrupted parent waits for its workers to stop their sandboxes
STOP_GRACE = 40.0


def default_workers(n_concurrent: int) -> int:
    """The number of cores, capped by `-n`."""
    return max(1, min(os.cpu_count() or 1, n_concurrent))


def split(total: int, parts: int, index: int) -> int:
    """Worker `index`'s share of `total` (at least 1)."""
    return max(1, total // parts + (1 if index < total % parts else 0))


@dataclass
class _Worker:
    index: int
    pid: int
    slots: int
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    #: units sent and not yet answered, by index
    in_flight: set[int] = field(default_factory=set)
    totals: Any = None

    @property
    def room(self) -> int:
        # its tickets: twice its slots, as the scheduler's (see invariants.md)
        return 2 * self.slots - len(self.in_flight)


async def run_sharded(service: ShardedBatch, units: Sequence[Any],
                      ctx: EpisodeContext, workers: int) -> None:  # fmt: skip
    """Run `units` over `workers` forked processes; record in this one."""
    n = service.options.n_concurrent
    pool: list[_Worker] = []
    for i in range(workers):
        pool.append(await _fork(service, units, ctx, i, workers, split(n, workers, i), pool))
    feeder = _Feeder(service, units, pool)
    listeners = [asyncio.create_task(feeder.listen(worker)) for worker in pool]
    feeding = asyncio.create_task(feeder.feed())
    try:
        done, _ = await asyncio.wait([feeding, *listeners], return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()  # the first error, if any, ends the batch
    except BaseException:
        feeding.cancel()
        feeder.stopping = True
        await _terminate(pool)
        # The workers stop their trials and close their sockets. A result already on
        # its way still comes back and is recorded (bounded by the grace).
        with contextlib.suppress(Exception):
            await run_to_end(within(STOP_GRACE, asyncio.gather(*listeners)))
        raise
    finally:
        for task in listeners:
            task.cancel()
        for worker in pool:
            worker.writer.close()
        await run_to_end(_reap(pool))


class _Feeder:
    def __init__(self, service: ShardedBatch, units: Sequence[Any],
                 pool: list[_Worker]) -> None:  # fmt: skip
        self.service, self.units, self.pool = service, units, pool
        self.room = asyncio.Event()
        self.stopped = False
        #: interrupted: a worker's units in flight are stopped, not crashed
        self.stopping = False

    async def feed(self) -> None:
        for index in range(len(self.units)):
            if not await self._hand_out(index):
                break
        if self.service.aborted is not None:
            await self._tell_all(("stop",))
        await self._tell_all(("end",))

    async def _hand_out(self, index: int) -> bool:
        """Send unit `index` to the worker with most room; False when none is left or
        the batch is stopping. A worker found dead by the send is passed over: its
        socket is then closing, and the unit goes to another."""
        while (worker := await self._worker_with_room()) is not None:
            if self.service.aborted is not None:
                return False
            worker.in_flight.add(index)
            try:
                await send(worker.writer, ("unit", index))
                return True
            except ConnectionError:
                worker.in_flight.discard(index)
                worker.writer.close()
        return False

    async def _tell_all(self, message: tuple[Any, ...]) -> None:
        for worker in self.pool:
            with contextlib.suppress(ConnectionError, RuntimeError):
                await send(worker.writer, message)

    async def _worker_with_room(self) -> _Worker | None:
        while True:
            alive = [w for w in self.pool if not w.writer.is_closing()]
            if not alive:
                return None
            best = max(alive, key=lambda w: w.room)
            if best.room > 0:
                return best
            self.room.clear()
            await self.room.wait()

    async def listen(self, worker: _Worker) -> None:
        service = self.service
        while (message := await receive(worker.reader)) is not None:
            kind = message[0]
            if kind == "event":
                service._emit(message[1])
                continue
            index = message[1]
            worker.in_flight.discard(index)
            self.room.set()
            if kind == "result":
                worker.totals = message[3]
                self._add_totals()
                await service._record(self.units[index], message[2])
                if service.aborted is not None and not self.stopped:
                    self.stopped = True
                    await self._tell_all(("stop",))
        # The worker is gone: what it had in flight will never come back. After an
        # interrupt that is its trials being stopped: they run again on resume.
        worker.writer.close()
        self.room.set()
        for index in sorted(worker.in_flight) if not self.stopping else ():
            unit = self.units[index]
            error = ErrorInfo(type="WorkerDied", message=f"worker process {worker.pid} died",
                              phase="internal")  # fmt: skip
            await service._record(unit, service.door.crashed(unit, error))
        worker.in_flight.clear()

    def _add_totals(self) -> None:
        services = self.service.services
        if services is None:
            return
        from helios.usage import Usage

        total = Usage()
        for worker in self.pool:
            if worker.totals is not None:
                total.add(worker.totals)
        services.totals = total


async def _fork(service: ShardedBatch, units: Sequence[Any], ctx: EpisodeContext,
                index: int, count: int, slots: int, earlier: list[_Worker]) -> _Worker:  # fmt: skip
    parent_sock, child_sock = socket.socketpair()
    starts = split(service.options.max_starts, count, index)
    pid = os.fork()
    if pid == 0:  # the worker: never returns
        parent_sock.close()
        # The parent's ends of the earlier workers' sockets too: held open here, they
        # would hide the parent's death from those workers (no end of file).
        for sibling in earlier:
            with contextlib.suppress(OSError):
                os.close(sibling.writer.get_extra_info("socket").fileno())
        code = 0
        try:
            worker_main(service, units, ctx, child_sock, slots, starts)
        except Exception:
            # A bug, not a stop: its units in flight are recorded as crashed by the
            # parent; say why here.
            traceback.print_exc()
            code = 1
        except BaseException:  # an interrupt: the parent reports it, quietly
            code = 1
        finally:
            os._exit(code)
    child_sock.close()
    reader, writer = await asyncio.open_connection(sock=parent_sock)
    return _Worker(index, pid, slots, reader, writer)


async def _terminate(pool: list[_Worker]) -> None:
    for worker in pool:
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.pid, signal.SIGTERM)


async def _reap(pool: list[_Worker]) -> None:
    await asyncio.to_thread(_wait_all, [worker.pid for worker in pool], STOP_GRACE)


def _wait_all(pids: list[int], seconds: float) -> None:
    """Reap the workers; one still there after `seconds` is killed."""
    deadline = time.monotonic() + seconds
    for pid in pids:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(pid, os.WNOHANG)[0] == 0:
                if time.monotonic() > deadline:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    break
                time.sleep(0.01)
