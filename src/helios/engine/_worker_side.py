"""A worker process of `--workers N`: the parent's units, run in its own event loop.

It runs what the parent hands it, at most its share of `-n` at once, and sends each
result back; the parent alone records. It stops its trials (and their sandboxes)
on SIGTERM and SIGINT, and at once when its parent stops reading or is gone: no one
would record them. See `workers.py` for the parent's side.
"""

from __future__ import annotations

import asyncio
import signal
import socket
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from helios.engine._wire import frame, receive, send
from helios.engine.door import Door
from helios.engine.episode import EpisodeContext
from helios.events import Event, EventSink, TrialStarted
from helios.failures import ErrorInfo
from helios.slots import Slot

if TYPE_CHECKING:
    from helios.models.services import ModelServices


class WorkerBatch(Protocol):
    """What a worker uses of the parent's batch service (`batch.BatchService`): the
    door that runs its units, the model services it copies, and whether anyone
    listens to events."""

    @property
    def door(self) -> Door[Any, Any]: ...

    @property
    def services(self) -> ModelServices | None: ...

    @property
    def emit(self) -> EventSink | None: ...


def worker_main(service: WorkerBatch, units: Sequence[Any], ctx: EpisodeContext,
                 sock: socket.socket, slots: int, starts: int) -> None:  # fmt: skip
    # Forked from inside the parent's running loop: forget it, and its signal pipe.
    asyncio.events._set_running_loop(None)
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    asyncio.run(_work(service, units, ctx, sock, slots, starts))


async def _work(service: WorkerBatch, units: Sequence[Any], parent_ctx: EpisodeContext,
                sock: socket.socket, slots: int, starts: int) -> None:  # fmt: skip
    reader, writer = await asyncio.open_connection(sock=sock)
    main = asyncio.current_task()
    assert main is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, main.cancel)
    services = _own_services(service)
    emit: Callable[[Event], None] | None = None
    if service.emit is not None:
        def emit(event: Event) -> None:
            if not writer.is_closing():  # the parent is gone: nobody to show it to
                writer.write(frame(("event", event)))

    ctx = replace(parent_ctx, start_gate=asyncio.Semaphore(starts), emit=emit,
                  services=services)  # fmt: skip
    try:
        await Runner(service, units, ctx, reader, writer, slots).run()
    finally:
        if services is not None:
            await services.close()
        writer.close()


def _own_services(service: WorkerBatch) -> Any:
    """A copy of the batch's model services with this worker's own client, limiter
    and totals (the parent's were made in another process's loop)."""
    services = service.services
    if services is None:
        return None
    from helios.models.limiter import AdaptiveLimiter
    from helios.usage import Usage

    limiter = services.limiter
    own = AdaptiveLimiter(initial=limiter.limit, minimum=limiter.minimum,
                          maximum=limiter.maximum, decrease=limiter.decrease,
                          cooldown=limiter.cooldown)  # fmt: skip
    return replace(services, limiter=own, totals=Usage(), _model=None)


class Runner:
    """The worker's scheduler: the parent's units, at most `slots` at once."""

    def __init__(self, service: WorkerBatch, units: Sequence[Any], ctx: EpisodeContext,
                 reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 slots: int) -> None:  # fmt: skip
        self.service, self.units, self.ctx = service, units, ctx
        self.reader, self.writer = reader, writer
        self.semaphore = asyncio.Semaphore(slots)
        self.queue: asyncio.Queue[int | None] = asyncio.Queue()
        self.stopped = False
        self.main: asyncio.Task[Any] | None = None

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
                        await self._reply(("unstarted", index))
                        continue
                    group.create_task(self._one(index, slot))
        finally:
            listener.cancel()

    async def _listen(self) -> None:
        ended = False
        while (message := await receive(self.reader)) is not None:
            if message[0] == "unit":
                await self.queue.put(message[1])
            elif message[0] == "stop":
                self.stopped = True
            elif message[0] == "end" and not ended:
                ended = True
                await self.queue.put(None)
        # The socket closed while this worker still runs (`run` cancels this task when
        # it ends; the parent closes only after it): the parent was killed.
        self._parent_gone()

    async def _one(self, index: int, slot: Slot) -> None:
        service, unit = self.service, self.units[index]
        try:
            try:
                if self.ctx.emit is not None:
                    self.ctx.emit(TrialStarted(unit.trial_id, unit.label))
                result = await service.door.run_unit(unit, self.ctx, slot)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                result = service.door.crashed(unit, ErrorInfo.from_exception(exc, "internal"))
        finally:
            slot.release()
        services = self.ctx.services
        totals = services.totals if services is not None else None
        await self._reply(("result", index, result, totals))
