"""A worker process of `--workers N`: the parent's units, run in its own event loop.

A worker is a fresh interpreter, not a fork (see `workers.py` for why): the parent
starts `python -c workers._BOOT FD PATH...`, which ignores SIGINT, takes the parent's
import path and calls `main(FD)` with the worker's end of its socket pair. Nothing of
the parent's event loop, threads or open files comes with it. Its first message is
its `WorkerSetup` (the door, the batch's context, its copy of the model services, its
share of `-n`); then units, one at a time, each with its index.

It runs what the parent hands it, at most its share of `-n` at once, and sends each
result back; the parent alone records. It stops its trials (and their sandboxes)
on SIGTERM and SIGINT, and at once when its parent stops reading or is gone: no one
would record them. See `workers.py` for the parent's side.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from helios.agents.toolsets.base import Toolset
from helios.agents.toolsets.registry import register_toolset
from helios.engine._wire import frame, receive, send
from helios.engine.budget import BUDGET_STOPPED
from helios.engine.door import Door
from helios.engine.episode import EpisodeContext
from helios.engine.shared_limits import share_limits
from helios.events import Event, TrialStarted
from helios.failures import ErrorInfo
from helios.secrets import register_secret
from helios.settings import HeliosSettings, active
from helios.slots import Slot

if TYPE_CHECKING:
    from helios.models.services import ModelServices


@dataclass
class WorkerSetup:
    """What a worker is given once, pickled, before any unit."""

    #: runs the units (its class is imported here by name: never one of `__main__`)
    door: Door[Any, Any]
    #: the batch's context with this worker's own sandbox-start gate, and neither the
    #: parent's event sink nor its model services
    ctx: EpisodeContext
    #: this worker's copy of the model services: its own limiter and totals, no client
    services: ModelServices | None
    #: whether the parent shows events (else none is sent)
    events: bool
    #: its share of `-n`
    slots: int
    #: the parent's registered secrets (its keys): redacted here as there
    secrets: tuple[str, ...] = ()
    #: the toolsets the parent registered by code (`register_toolset`): a fresh
    #: interpreter has only the built-ins and the entry points
    toolsets: tuple[Toolset, ...] = ()
    #: the run's HELIOS_* snapshot: the worker reads the same as the parent recorded
    settings: HeliosSettings | None = None
    #: its model calls take room in the run's limiter, held by the parent
    #: (`engine/shared_limits.py`), not in a limiter of its own
    shared_limits: bool = False


def main(fd: int) -> None:
    """The worker process: run until the parent says "end" or goes, then exit.

    Never returns. A bug exits 1 with its traceback on stderr (the parent records the
    units in flight as crashed); an interrupt exits 1 quietly (the parent reports it)."""
    os.set_inheritable(fd, False)  # its sandboxes' processes must not hold the link open
    code = 0
    try:
        asyncio.run(_work(socket.socket(fileno=fd)))
    except Exception:
        traceback.print_exc()
        code = 1
    except BaseException:
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        # Not an ordinary exit: a thread stuck in a blocking call must not keep it alive.
        os._exit(code)


async def _work(sock: socket.socket) -> None:
    main = asyncio.current_task()
    assert main is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, main.cancel)
    reader, writer = await asyncio.open_connection(sock=sock)
    try:
        message = await receive(reader)
        if message is None:
            return  # the parent went before it said what to run
        setup: WorkerSetup = message[1]
        for secret in setup.secrets:
            register_secret(secret)
        for toolset in setup.toolsets:
            register_toolset(toolset)
        emit: Callable[[Event], None] | None = None
        if setup.events:

            def emit(event: Event) -> None:
                if not writer.is_closing():  # the parent is gone: nobody to show it to
                    writer.write(frame(("event", event)))

        services = setup.services
        if services is not None:  # also the interrupted trials' count, display or not
            totals_of = services  # the copies the agents make share its totals

            def send_totals() -> None:  # the parent's live line, after each model call
                if not writer.is_closing():
                    writer.write(frame(("usage", totals_of.totals)))

            services.on_call = send_totals
        limits = ParentLimits(writer) if setup.shared_limits else None
        share_limits(services, limits)
        ctx = replace(setup.ctx, emit=emit, services=services)
        try:
            with active(setup.settings or HeliosSettings.read()):
                await Runner(setup.door, ctx, reader, writer, setup.slots, limits).run()
        finally:
            if setup.services is not None:
                await setup.services.close()
    finally:
        writer.close()
        _quiet_signals(loop)


def _quiet_signals(loop: asyncio.AbstractEventLoop) -> None:
    """The worker's signals back to its start (SIGINT ignored, SIGTERM ends it), with
    no wakeup fd, before `asyncio.run` closes the loop. Python 3.11's loop closes its
    self-pipe before it removes its signal handlers: a Ctrl-C in between (the process
    group's, as the batch ends) found the pipe closed and printed a traceback. (One in
    the instant between these two lines is a KeyboardInterrupt: `main` exits quietly.)"""
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.remove_signal_handler(sig)  # the last one also unsets the wakeup fd
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class ParentLimits:
    """The `LimitsClient` of a worker: room for each model call is asked of the run's
    `LimitsBox` in the parent ("acquire"; the parent answers "granted" with a lease),
    and given back with the call's outcome ("release")."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.waiting: dict[int, asyncio.Future[int]] = {}
        self.requests = 0

    async def acquire(self, key: str) -> int:
        self.requests += 1
        request = self.requests
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.waiting[request] = future
        self.writer.write(frame(("acquire", request, key)))
        try:
            return await future
        except asyncio.CancelledError:
            self.waiting.pop(request, None)  # a grant that comes later is given back
            if future.done() and not future.cancelled():
                self.release(future.result(), "failed", None)
            raise

    def granted(self, request: int, lease: int) -> None:
        future = self.waiting.pop(request, None)
        if future is None or future.done():
            self.release(lease, "failed", None)
        else:
            future.set_result(lease)

    def release(self, lease: int, outcome: str, retry_after: float | None) -> None:
        if not self.writer.is_closing():
            self.writer.write(frame(("release", lease, outcome, retry_after)))


class Runner:
    """The worker's scheduler: the parent's units, at most `slots` at once."""

    def __init__(self, door: Door[Any, Any], ctx: EpisodeContext,
                 reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 slots: int, limits: ParentLimits | None = None) -> None:  # fmt: skip
        self.door, self.ctx = door, ctx
        self.reader, self.writer = reader, writer
        self.limits = limits
        #: the units handed to this worker and not yet answered, by index
        self.units: dict[int, Any] = {}
        self.semaphore = asyncio.Semaphore(slots)
        self.queue: asyncio.Queue[int | None] = asyncio.Queue()
        self.stopped = False
        self.main: asyncio.Task[Any] | None = None
        #: the trials running now: a hard budget stops them (`budget_stop`)
        self.running: set[asyncio.Future[Any]] = set()
        #: why a hard budget stopped the trials in flight (the parent's words)
        self.budget_stopped: str | None = None

    async def _reply(self, message: tuple[Any, ...]) -> None:
        try:
            await send(self.writer, message)
        except ConnectionError:
            self._parent_gone()  # it stopped reading: interrupted, or gone

    def _parent_gone(self) -> None:
        """Stop as on SIGTERM (trials stop their sandboxes), quietly: no one would
        record what runs here, it is not a bug, and a resume runs it again."""
        if self.main is not None:
            self.main.cancel()

    async def run(self) -> None:
        self.main = asyncio.current_task()
        listener = asyncio.create_task(self._listen())
        try:
            async with asyncio.TaskGroup() as group:
                while (index := await self.queue.get()) is not None:
                    slot = Slot(self.semaphore)
                    await slot.acquire()
                    if self.stopped:
                        slot.release()
                        del self.units[index]
                        await self._reply(("unstarted", index))
                        continue
                    group.create_task(self._one(index, slot))
        finally:
            listener.cancel()

    async def _listen(self) -> None:
        ended = False
        while (message := await receive(self.reader)) is not None:
            if message[0] == "unit":
                self.units[message[1]] = message[2]
                await self.queue.put(message[1])
            elif message[0] == "granted" and self.limits is not None:
                self.limits.granted(message[1], message[2])
            elif message[0] == "stop":
                self.stopped = True
            elif message[0] == "budget_stop":
                self.stopped = True
                self.budget_stopped = message[1]
                for running in list(self.running):
                    running.cancel()
            elif message[0] == "end" and not ended:
                ended = True
                await self.queue.put(None)
        # The socket closed while this worker still runs (`run` cancels this task when
        # it ends; the parent closes only after it): the parent was killed.
        self._parent_gone()

    async def _one(self, index: int, slot: Slot) -> None:
        door, unit = self.door, self.units.pop(index)
        if self.budget_stopped is not None:  # stopped before it began
            slot.release()
            await self._reply(("unstarted", index))
            return
        inner = asyncio.ensure_future(door.run_unit(unit, self.ctx, slot))
        self.running.add(inner)
        try:
            try:
                if self.ctx.emit is not None:
                    self.ctx.emit(TrialStarted(unit.trial_id, unit.label))
                result = await inner
            except asyncio.CancelledError:
                me = asyncio.current_task()
                if self.budget_stopped is None or (me is not None and me.cancelling()):
                    raise
                # A hard budget stopped it (its sandbox stops as after an interrupt).
                error = ErrorInfo(type=BUDGET_STOPPED, message=self.budget_stopped,
                                  phase="internal", infrastructure=True)  # fmt: skip
                result = door.crashed(unit, error)
            except Exception as exc:
                result = door.crashed(unit, ErrorInfo.from_exception(exc, "internal"))
        finally:
            self.running.discard(inner)
            slot.release()
        services = self.ctx.services
        totals = services.totals if services is not None else None
        await self._reply(("result", index, result, totals))
