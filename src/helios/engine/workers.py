"""Worker processes: a batch's units run on every core, one writer keeps the store.

`BatchService.run` with `workers > 1` starts that many workers once the plan is
made. Each runs its own event loop and its share of the `-n` budget (slots,
tickets, sandbox starts, its own model client). The run's model-call limits are
the parent's, one `LimitsBox` for every worker (`engine/shared_limits.py`): N
workers send what one process would, and a 429 holds them all. The parent stays
the only writer: it hands units out one at a time as a worker has room (so the
start order is still the input order), and every result comes back to it to be
written and recorded exactly as with one process (`BatchService._record`):
files first, then the completion mark, then events and callbacks.

How a worker starts, and why. Each is a fresh interpreter, `sys.executable -c
_BOOT` started by `subprocess.Popen`, never a fork of this process: the parent is
inside a running event loop, and may have threads (the signal watch of
`engine/interrupts.py`, `asyncio.to_thread`'s pool, aiohttp's resolver) and open
sockets and files (the run's lock, model connections). A fork copies all of that,
mid-flight, into a child that has only the forking thread, and a new loop there
needs a private asyncio API. The new interpreter gets only its end of its socket
pair (`pass_fds`: every other descriptor is close-on-exec), the standard streams,
the environment, the working folder and the parent's import path (`sys.path`, on
its command line). What it runs comes pickled over the socket: first its
`WorkerSetup` (the door, the batch's context, a copy of the model services, the
registered secrets, so it redacts as the parent does, and the toolsets registered
by code, `register_toolset`), then each unit with the
message that hands it out, so a unit is pickled once, and only when it is handed
out (a lazy sequence stays lazy). A worker imports the door's and the units'
classes by name: one defined in the script being run (`__main__`) is refused
before any worker starts (`ConfigError`). What the caller set up in its own
process by code alone, such as a logging handler, a worker does not have (entry
points and registered toolsets it has); the Python API runs one process unless asked.

Not `multiprocessing`'s spawn or forkserver: both run the caller's `__main__` again
in every worker (a script without a main guard would start its batch again there)
and add a resource-tracker process, and forkserver's workers are not this process's
children. The price of a fresh interpreter is its imports, about 0.35 s of CPU per
worker, paid by the workers in parallel: on 2 cores a worker starts its first unit
about 0.2 s after the batch starts, and that unit loads its sandbox's and agent's
modules (about 0.25 s more); its later units start as fast.

Forked before the loop (`preforked`). A command that knows it will run workers (the
CLI's `helios batch`) forks them before its event loop starts, while the process has
one thread, no loop, no run lock and no connection: a fork then copies nothing that is
in flight, and the workers have the parent's modules for free (2 workers: 0.7 s of CPU
less per batch). Each waits for its setup as a spawned worker does, and `run_sharded`
takes them before it spawns any. A forked worker holds, besides the standard streams,
its own end of its link (the ends of the workers forked before it are closed in it).
One that is not used (a resume with less left to run) is told nothing: it reads the
end of its link and exits. Where there is a loop or a thread already (the Python API
in a caller's loop), `preforked` forks nothing and workers are spawned.

Messages are length-prefixed pickles over a socket pair per worker (`_wire.py`):
- parent → worker: ("setup", WorkerSetup) first; then ("unit", index, unit) |
  ("stop",) no more starts | ("budget_stop", why) a hard budget stops the trials in
  flight (each comes back as a `BudgetStopped` result) | ("end",) no more units |
  ("granted", request, lease) room for a model call;
- worker → parent: ("event", event) | ("usage", totals) after each model call (the
  live line's figures, the budget's spend and the spend ledger's) |
  ("result", index, result, totals) | ("unstarted", index) a unit it was sent but did
  not start after a stop | ("acquire", request, model) room for a model call, asked
  of the run's limiter | ("release", lease, outcome, retry_after) the call ended.
  The room a worker held when it died is given back when its socket closes.

A worker that dies (kill -9) has its units in flight recorded as crashed (an
error, re-run by `--retry-errors`); the others go on, and a unit sent to it as it
died goes to another. On an interrupt the parent sends SIGTERM to every worker,
whose trials stop their sandboxes as they would in one process, and keeps
recording what still comes back until they close (bounded), before the
provider's cleanup; the stopped units run again on resume. A worker whose parent
stops reading, or is gone (the end of its socket: no other process holds the
parent's end), stops too, quietly.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import io
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from helios._proc import run_to_end, within
from helios.agents.toolsets.registry import registered_toolsets
from helios.engine._wire import frame, receive, send
from helios.engine._worker_side import WorkerSetup
from helios.engine.door import Door
from helios.engine.episode import EpisodeContext
from helios.engine.interrupts import SignalWatch
from helios.engine.shared_limits import LimitsBox, limits_of
from helios.errors import ConfigError
from helios.events import EventSink
from helios.failures import ErrorInfo
from helios.secrets import registered
from helios.settings import current as helios_settings

if TYPE_CHECKING:
    from helios.engine.config import ConcurrencyConfig
    from helios.models.services import ModelServices


class ShardedBatch(Protocol):
    """What the parent's side uses of the batch service it runs in workers
    (`batch.BatchService`): the door and model services it sends them, its budget to
    split, whether it stopped, and its one writer's recording and events."""

    @property
    def door(self) -> Door[Any, Any]: ...

    @property
    def services(self) -> ModelServices | None: ...

    @property
    def emit(self) -> EventSink | None: ...

    @property
    def concurrency(self) -> ConcurrencyConfig: ...

    @property
    def aborted(self) -> str | None: ...

    #: units handed out to start (the budget's count of trials in flight)
    started_units: int
    #: set by an executor that can stop its trials in flight under a hard budget
    on_hard_stop: Callable[[], None] | None

    def halted(self, in_flight: int | None = None) -> bool: ...

    def note_spend(self) -> None: ...

    def _emit(self, event: Any) -> None: ...

    async def _record(
        self, unit: Any, result: Any, extra: Mapping[str, Any] | None = None
    ) -> None: ...


#: what a worker's interpreter runs (argv: its socket's descriptor, then the parent's
#: import path). A Ctrl-C reaches the whole process group, and a worker still starting
#: must not die of it with a traceback: the parent stops it with SIGTERM. So SIGINT is
#: blocked from its start (`_start`), then ignored (one pending meanwhile is dropped)
#: until its loop handles it.
_BOOT = """\
import signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
sys.path[:] = sys.argv[2:]
from helios.engine._worker_side import main
main(int(sys.argv[1]))
"""


class _Process(Protocol):
    """What the parent does with a worker's process: `subprocess.Popen`, or `_Forked`."""

    @property
    def pid(self) -> int: ...

    def send_signal(self, sig: int) -> None: ...

    def kill(self) -> None: ...

    def wait(self, timeout: float | None = None) -> int: ...


_Processes = list[_Process]

#: how long an interrupted parent waits for its workers to stop their sandboxes
STOP_GRACE = 40.0


class _Forked:
    """A worker forked by `preforked`: a child of this process, reaped by `wait`. It is
    signalled only until reaped, so its pid cannot have gone to another process."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid != 0:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.0005
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0.0)
            time.sleep(delay)  # as `subprocess.Popen.wait` with a timeout does
            delay = min(delay * 2, 0.05)
        return code


@dataclass
class _Spare:
    process: _Forked
    link: socket.socket


#: the workers forked before the loop, waiting to be taken by `run_sharded`
_spares: contextvars.ContextVar[list[_Spare] | None] = contextvars.ContextVar(
    "helios_spare_workers", default=None
)


def _can_fork() -> bool:
    """One thread and no running loop: a fork then copies nothing in flight. Threads
    are counted by the kernel too: a C library's own threads are not in `threading`."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        return False
    if threading.active_count() != 1:
        return False
    # A thread just joined (the signal watch's, `SignalWatch.paused`) has released its
    # lock but may not have left the kernel yet: a moment for it.
    deadline = time.monotonic() + 0.5
    while True:
        try:
            if len(os.listdir("/proc/self/task")) == 1:
                return True
        except OSError:
            return False
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.001)


def _fork_worker(earlier: list[_Spare]) -> _Spare:
    parent_end, child_end = socket.socketpair()
    sys.stdout.flush()
    sys.stderr.flush()
    # As for a spawned worker: SIGINT is ignored until the worker's loop handles it,
    # and blocked across the fork so that one arriving meanwhile cannot kill it half made.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    pid = os.fork()  # helios: pre-loop fork (see the module's docstring)
    if pid == 0:  # the worker
        code = 1
        try:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            SignalWatch.forget()
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            parent_end.close()
            for spare in earlier:  # the parent's ends of the workers forked before
                spare.link.close()
            # Nothing else of the parent's, as for a spawned worker (`close_fds`): what
            # this process inherited from its own parent (a shell's descriptors) included.
            link = child_end.detach()
            os.closerange(3, link)
            os.closerange(link + 1, _max_fd())
            from helios.engine._worker_side import main

            main(link)  # never returns
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    child_end.close()
    return _Spare(_Forked(pid), parent_end)


def _max_fd() -> int:
    try:
        return max(int(name) for name in os.listdir("/proc/self/fd")) + 1
    except (OSError, ValueError):
        return os.sysconf("SC_OPEN_MAX")


@contextlib.contextmanager
def preforked(count: int) -> Iterator[None]:
    """Fork `count` workers now, before the event loop starts (when there is none and
    one thread; otherwise nothing), for the batch run inside this block to take. Those
    it did not take are closed and reaped when the block ends."""
    spares: list[_Spare] = []
    if count > 1:
        # The signal watch's thread is stopped across the forks (a signal meanwhile
        # waits in its pipe): a fork must find this process with one thread.
        with SignalWatch.paused():
            if _can_fork():
                for _ in range(count):
                    spares.append(_fork_worker(spares))
    token = _spares.set(spares)
    try:
        yield
    finally:
        _spares.reset(token)
        for spare in spares:
            spare.link.close()
        _wait_all([spare.process for spare in spares], STOP_GRACE)


def _take_spare() -> _Spare | None:
    spares = _spares.get()
    while spares:
        spare = spares.pop(0)
        if spare.process.poll() is None:
            return spare
        spare.link.close()
    return None


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
    #: the room for model calls it holds in the run's limiter (`LimitsBox` leases)
    leases: set[int] = field(default_factory=set)
    #: its requests for room waiting in the run's limiter
    asking: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def room(self) -> int:
        # its tickets: twice its slots, as the scheduler's (see invariants.md)
        return 2 * self.slots - len(self.in_flight)


async def run_sharded(service: ShardedBatch, units: Sequence[Any],
                      ctx: EpisodeContext, workers: int) -> None:  # fmt: skip
    """Run `units` over `workers` worker processes; record in this one."""
    _check_importable("the batch's door", service.door)
    if units:
        _check_importable("its units", units[0])
    for toolset in registered_toolsets():
        _check_importable(f"the registered toolset {toolset.name!r}", toolset)
    processes: _Processes = []
    pool: list[_Worker] = []
    feeder = _Feeder(service, units, pool, _limits_box(service.services))
    listeners: list[asyncio.Task[None]] = []
    feeding: asyncio.Task[None] | None = None
    service.on_hard_stop = feeder.hard_stop
    try:
        await _start(service, ctx, workers, processes, pool)
        listeners = [asyncio.create_task(feeder.listen(worker)) for worker in pool]
        feeding = asyncio.create_task(feeder.feed())
        done, _ = await asyncio.wait([feeding, *listeners], return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()  # the first error, if any, ends the batch
    except BaseException:
        if feeding is not None:
            feeding.cancel()
        feeder.stopping = True
        _terminate(processes)
        # The workers stop their trials and close their sockets. A result already on
        # its way still comes back and is recorded (bounded by the grace).
        with contextlib.suppress(Exception):
            await run_to_end(within(STOP_GRACE, asyncio.gather(*listeners)))
        raise
    finally:
        service.on_hard_stop = None
        for task in listeners:
            task.cancel()
        for worker in pool:
            worker.writer.close()
            _forget_asking(worker)
        await run_to_end(_reap(processes))


def _limits_box(services: ModelServices | None) -> LimitsBox | None:
    """The run's model-call limiters, held here for every worker (`shared_limits`). They
    are the parent's services' own limiters: the live line shows the run's limit."""
    if services is None:
        return None
    box = LimitsBox(limits_of(services))
    for one in (services, *services.others.values()):
        box.limiters[str(one.name or one.spec.qualified)] = one.limiter
    return box


def _forget_asking(worker: _Worker) -> None:
    for task in worker.asking:
        task.cancel()


class _Feeder:
    def __init__(self, service: ShardedBatch, units: Sequence[Any],
                 pool: list[_Worker], box: LimitsBox | None = None) -> None:  # fmt: skip
        self.service, self.units, self.pool = service, units, pool
        self.room = asyncio.Event()
        self.stopped = False
        #: interrupted: a worker's units in flight are stopped, not crashed
        self.stopping = False
        #: the run's model-call limiters, one for every worker
        self.box = box
        #: telling the workers that a hard budget stops their trials
        self.hard_stopping: asyncio.Task[None] | None = None

    def hard_stop(self) -> None:
        """A hard budget is reached (`BatchService._watch_budget`): every worker stops
        its trials in flight, each recorded as `BudgetStopped` when it comes back."""
        if self.hard_stopping is not None:
            return
        budget = getattr(self.service, "budget", None)
        why = budget.stop_reason() if budget is not None else "stopped by a budget"
        self.stopped = True

        async def tell() -> None:
            await self._tell_all(("stop",))
            await self._tell_all(("budget_stop", why))

        self.hard_stopping = asyncio.create_task(tell())

    async def feed(self) -> None:
        for index in range(len(self.units)):
            if not await self._hand_out(index):
                break
        if self.service.halted():
            await self._tell_all(("stop",))
        await self._tell_all(("end",))

    async def _hand_out(self, index: int) -> bool:
        """Send unit `index` to the worker with most room; False when none is left or
        the batch is stopping. A worker found dead by the send is passed over: its
        socket is then closing, and the unit goes to another."""
        while (worker := await self._worker_with_room()) is not None:
            if self.service.halted():
                return False
            worker.in_flight.add(index)
            try:
                await send(worker.writer, ("unit", index, self.units[index]))
                self.service.started_units += 1
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
            if kind == "usage":  # the worker's totals after a model call: the live line
                worker.totals = message[1]
                self._add_totals()
                continue
            if kind == "acquire":  # room for a model call, from the run's limiter
                asking = asyncio.create_task(self._grant(worker, message[1], message[2]))
                worker.asking.add(asking)
                asking.add_done_callback(worker.asking.discard)
                continue
            if kind == "release":
                await self._release(worker, *message[1:])
                continue
            index = message[1]
            worker.in_flight.discard(index)
            self.room.set()
            if kind == "result":
                worker.totals = message[3]
                self._add_totals()
                await service._record(self.units[index], message[2])
                if not self.stopped and service.halted():
                    self.stopped = True
                    await self._tell_all(("stop",))
        # The worker is gone: what it had in flight will never come back. After an
        # interrupt that is its trials being stopped: they run again on resume.
        worker.writer.close()
        self.room.set()
        _forget_asking(worker)
        for lease in list(worker.leases):  # the room its calls held: theirs no more
            await self._release(worker, lease, "failed", None)
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
        total = services.empty_usage()
        for worker in self.pool:
            if worker.totals is not None:
                total.add(worker.totals)
        services.totals = total
        self.service.note_spend()

    async def _grant(self, worker: _Worker, request: int, key: str) -> None:
        """Wait for room for one model call of `worker` in the run's limiter of `key`,
        and tell it. A worker gone meanwhile gives the room back at once."""
        assert self.box is not None
        lease = await self.box.acquire(key)
        if worker.writer.is_closing():
            await self.box.release(lease, "failed")
            return
        worker.leases.add(lease)
        worker.writer.write(frame(("granted", request, lease)))

    async def _release(self, worker: _Worker, lease: int, outcome: str,
                       retry_after: float | None) -> None:  # fmt: skip
        if self.box is not None and lease in worker.leases:
            worker.leases.discard(lease)
            await self.box.release(lease, outcome, retry_after)


async def _start(service: ShardedBatch, ctx: EpisodeContext, count: int,
                 processes: _Processes, pool: list[_Worker]) -> None:  # fmt: skip
    """Start `count` workers and send each its setup; each goes into `processes` as
    soon as it runs (to be stopped and reaped whatever happens next) and into `pool`
    once connected. They import in parallel: nothing here waits for one. Workers
    forked before the loop (`preforked`) are taken first."""
    path = [entry for entry in sys.path if isinstance(entry, str)]
    for index in range(count):
        spare = _take_spare()
        if spare is not None:
            processes.append(spare.process)
            await _connect(service, ctx, count, index, spare.process.pid, spare.link, pool)
            continue
        parent_end, child_end = socket.socketpair()
        with child_end:
            fd = child_end.fileno()
            # The worker starts with SIGINT blocked: a signal mask is inherited through
            # exec. Here it is blocked in this thread alone, for the start; one that
            # comes meanwhile goes to another thread, or waits for the unblock.
            mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            try:
                # Blocking, for milliseconds: unlike asyncio's, a start that a cancel
                # cannot cut short, leaving a worker that nobody stops (CPython gh-103847).
                process = subprocess.Popen(  # noqa: ASYNC220
                    [sys.executable, "-c", _BOOT, str(fd), *path], pass_fds=(fd,)
                )
            except BaseException:
                parent_end.close()
                raise
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        processes.append(process)
        await _connect(service, ctx, count, index, process.pid, parent_end, pool)


async def _connect(service: ShardedBatch, ctx: EpisodeContext, count: int, index: int,
                   pid: int, link: socket.socket, pool: list[_Worker]) -> None:  # fmt: skip
    """Join worker `index` of `count` to the pool and send it its setup."""
    n, max_starts = service.concurrency.in_flight, service.concurrency.starts_at_once
    reader, writer = await asyncio.open_connection(sock=link)
    slots = split(n, count, index)
    pool.append(_Worker(index, pid, slots, reader, writer))
    # Its own start gate: an asyncio primitive binds to a loop only once waited on.
    gate = asyncio.Semaphore(split(max_starts, count, index))
    setup = WorkerSetup(
        door=service.door,
        ctx=replace(ctx, start_gate=gate, emit=None, services=None),
        services=_worker_services(service.services),
        events=service.emit is not None,
        slots=slots,
        shared_limits=service.services is not None,
        secrets=registered(),
        toolsets=registered_toolsets(),
        settings=helios_settings(),
    )
    # A worker that died at once is found by its listener (end of file).
    with contextlib.suppress(ConnectionError):
        await send(writer, ("setup", setup))


def _worker_services(services: ModelServices | None) -> ModelServices | None:
    """A worker's copy of the batch's model services (`ModelServices.detached`)."""
    return services.detached() if services is not None else None


class _Importable(pickle.Pickler):
    """Pickles as the wire does, but refuses a class or function of `__main__`: a
    worker's `__main__` is its boot code, so it could not import them."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, type | types.FunctionType) and obj.__module__ == "__main__":
            raise pickle.PicklingError(f"{obj.__qualname__} is defined in __main__")
        return NotImplemented


def _check_importable(what: str, value: Any) -> None:
    """Refuse, before any worker starts, what a worker could not be sent."""
    try:
        _Importable(io.BytesIO(), protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    except Exception as exc:
        raise ConfigError(
            f"{what} cannot be sent to a worker process ({exc}): define its classes in a "
            "module, not in the script being run, or use one worker (workers=1)"
        ) from exc


def _terminate(processes: _Processes) -> None:
    for process in processes:
        process.send_signal(signal.SIGTERM)  # a no-op once it has been reaped


async def _reap(processes: _Processes) -> None:
    await asyncio.to_thread(_wait_all, processes, STOP_GRACE)


def _wait_all(processes: _Processes, seconds: float) -> None:
    """Reap the workers; one still there after `seconds` is killed."""
    deadline = time.monotonic() + seconds
    for process in processes:
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
