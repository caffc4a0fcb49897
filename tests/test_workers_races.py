"""`--workers`: the races between the parent and its workers at an interrupt or a
death. A socket that closes under a send is a stop, never a traceback; a unit
sent to a worker that just died goes to another; a result that arrives after an
interrupt is still recorded, and an interrupted unit is not recorded as an error."""

from __future__ import annotations

import asyncio
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from helios.engine._wire import frame, receive
from helios.engine._worker_side import Runner
from helios.engine.batch import BatchService
from helios.engine.config import ConcurrencyConfig
from helios.engine.episode import EpisodeContext
from helios.engine.scheduler import Slot
from helios.engine.store import RunStore
from helios.engine.workers import _Feeder, _Worker
from helios.events import Event, TrialStarted

from .sandbox_helpers import until
from .thin_door import PromptDoor, PromptUnit


def _service(tmp_path: Path, door: Any, workers: int = 2) -> BatchService[Any, Any]:
    store = RunStore.create(tmp_path / "run", {"run_id": "races"})
    return BatchService(door=door, store=store,
                        concurrency=ConcurrencyConfig(in_flight=4, processes=workers))  # fmt: skip


async def _connected() -> tuple[socket.socket, asyncio.StreamReader, asyncio.StreamWriter]:
    """The far end as a plain socket, and this end as asyncio streams."""
    far, near = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=near)
    return far, reader, writer


def _runner(service: BatchService[Any, Any],
            reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Runner:  # fmt: skip
    ctx = EpisodeContext(run_id="races", run_dir=None, start_gate=asyncio.Semaphore(2))
    return Runner(service.door, ctx, reader, writer, 2)


@dataclass
class _HeldDoor(PromptDoor):
    """A PromptDoor whose units say they have started, then wait for `release`
    before they run."""

    started: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def run_unit(self, unit: PromptUnit, ctx: EpisodeContext, slot: Slot) -> dict[str, Any]:
        self.started.set()
        await self.release.wait()
        return await super().run_unit(unit, ctx, slot)


class _EndQueue(asyncio.Queue[int | None]):
    """A runner's queue of units that tells when the parent's "end" came out of it."""

    ended = False

    async def get(self) -> int | None:
        index = await super().get()
        self.ended = self.ended or index is None
        return index


def test_a_worker_whose_parent_went_away_stops_quietly(tmp_path: Path) -> None:
    """The parent stops reading while a unit is finishing (it was interrupted): the
    worker's send of the result fails. It must cancel its run (its trials stop their
    sandboxes) and not end in an ExceptionGroup, which the worker prints as a bug."""
    units = [PromptUnit("slow good", 0)]
    door = _HeldDoor()
    service = _service(tmp_path, door)

    async def go() -> None:
        far, reader, writer = await _connected()
        far.sendall(frame(("unit", 0, units[0])) + frame(("end",)))
        runner = _runner(service, reader, writer)
        runner.queue = queue = _EndQueue()
        running = asyncio.create_task(runner.run())

        async def started_and_ended() -> bool:
            return door.started.is_set() and queue.ended

        await until(started_and_ended, 'the unit started and the worker read the "end"')
        far.shutdown(socket.SHUT_RD)  # the parent stops reading before the result is sent
        door.release.set()  # the unit finishes: its result's send fails
        with pytest.raises(asyncio.CancelledError):
            await running
        far.close()

    try:
        asyncio.run(go())
    finally:
        assert service.store is not None
        service.store.close()


def test_a_worker_whose_parent_was_killed_stops_its_trials_at_once(tmp_path: Path) -> None:
    """The socket closes without an "end": nobody would record the trials, so the
    worker stops them now rather than after their 30 s."""
    units = [PromptUnit("slow good", 0)]
    door = _HeldDoor(delay=30)
    door.release.set()
    service = _service(tmp_path, door)

    async def go() -> float:
        far, reader, writer = await _connected()
        far.sendall(frame(("unit", 0, units[0])))
        running = asyncio.create_task(_runner(service, reader, writer).run())

        async def unit_started() -> bool:
            return door.started.is_set()

        await until(unit_started, "the worker started the unit")
        started = time.monotonic()
        far.close()
        with pytest.raises(asyncio.CancelledError):
            await running
        return time.monotonic() - started

    try:
        assert asyncio.run(go()) < 10
    finally:
        assert service.store is not None
        service.store.close()


def test_a_unit_sent_to_a_worker_that_just_died_goes_to_another(tmp_path: Path) -> None:
    units = [PromptUnit("a good", 0), PromptUnit("b good", 1)]
    service = _service(tmp_path, PromptDoor())

    async def go() -> list[tuple[Any, ...]]:
        dead_far, dead_reader, dead_writer = await _connected()
        dead_far.close()  # died; its socket's end is not yet read by the parent
        live_far, live_reader, live_writer = await _connected()
        pool = [_Worker(0, 0, 2, dead_reader, dead_writer),
                _Worker(1, 0, 2, live_reader, live_writer)]  # fmt: skip
        await _Feeder(service, units, pool).feed()
        live_writer.close()
        far_reader, _ = await asyncio.open_connection(sock=live_far)
        got = []
        while (message := await receive(far_reader)) is not None:
            got.append(message)
        assert pool[0].in_flight == set()  # nothing is waited for from the dead one
        return got

    try:
        got = asyncio.run(go())
    finally:
        assert service.store is not None
        service.store.close()
    assert got == [("unit", 0, units[0]), ("unit", 1, units[1]), ("end",)]


class _FinishesOnCancel(PromptDoor):
    """A unit that, told to stop, still returns a result (what a trial finishing
    just as the interrupt lands looks like to the parent)."""

    async def run_unit(self, unit: PromptUnit, ctx: EpisodeContext, slot: Slot) -> dict[str, Any]:
        if "late" not in unit.prompt:
            return await super().run_unit(unit, ctx, slot)
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            await asyncio.sleep(0.3)  # still on its way back when the worker is stopped
        return {"trial_id": unit.trial_id, "line": unit.line, "status": "passed"}


def test_an_interrupt_records_late_results_and_no_interrupted_unit(tmp_path: Path) -> None:
    units = [PromptUnit("late good", 0)] + [PromptUnit(f"slow {i} good", i) for i in range(1, 12)]
    service = _service(tmp_path, _FinishesOnCancel(delay=5))
    assert service.store is not None
    started: set[str] = set()  # the trials the workers said they started

    def seen(event: Event) -> None:
        if isinstance(event, TrialStarted):
            started.add(event.trial_id)

    service.emit = seen

    async def go() -> None:
        running = asyncio.create_task(service.run(service.plan(units)))

        async def all_slots_busy() -> bool:  # n_concurrent=4, the late unit among them
            return units[0].trial_id in started and len(started) >= 4

        await until(all_slots_busy, "the workers started four units, the late one among them")
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running

    try:
        asyncio.run(go())
        records = service.store.load_records()
    finally:
        service.store.close()
    # The late unit's result came back after the interrupt and is kept; the units
    # that were stopped are not in the store (they run again on resume), and none
    # is recorded as a crash of its worker.
    assert [r["line"] for r in records.values()] == [0]
    assert [r["status"] for r in records.values()] == ["passed"]
