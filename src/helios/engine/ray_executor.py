"""`--executor ray`: a batch's units run as Ray tasks across a cluster; this process
(the driver) plans, holds the run's lock and is the only writer, as with `--workers`.

`BatchService.run` calls `run_on_ray` in place of the scheduler or `run_sharded`, so
every door gets it at once. Ray is an optional extra (`helios-harness[ray]`), imported
only here and only when asked for.

Connecting. `address` None starts a new local Ray instance that declares `-n` trial
slots (never joining a cluster that runs on this machine: that is "auto"); "auto"
attaches to the cluster `ray start` made on this machine; any other address is a
cluster's head (`host:port`; one that nothing answers on is refused at once). A process
that has Ray connected already (a script of an RL stack) is used as it is, and left
connected. A cluster whose nodes declare no `helios_slot` is refused with one line: no
trial could ever start there.

One unit, one Ray task (`_node_run`), with `resources={"helios_slot": 1}`: each node
runs as many at once as it declares (`ray start --resources='{"helios_slot": 8}'`),
and the driver keeps at most `-n` in flight over the whole cluster, submitting them
in input order as one ends. The task runs the door's `run_unit` in its own event
loop on the node, its trial folder in a node-local scratch folder, and streams back
(a Ray generator task) first the result and the model usage (`NodeResult`), then the
trial folder as a tar archive in pieces of `ARCHIVE_CHUNK` bytes, at most
`STREAM_WINDOW` objects ahead of the driver (an archive of one piece at most comes
inside the `NodeResult`). The driver checks the pieces as they
come (`spool_archive`) into an unnamed temporary file in the run folder, unpacks it
there with the host-side checks every sandbox download goes through
(`environments.shell.safe_copy.extract_tar`: no link, no absolute path, no `..`,
bounded), then records through `BatchService._record` (the door's files, then the
completion record, then events and callbacks). Nothing is written
on a shared file system, and none is needed; the nodes need Helios installed and
their sandbox provider (docker or bwrap).

Inputs. A door whose units read host folders (`ReadsFolders`: the task door's task
folders) has each folder packed once by the driver and put in Ray's object store once,
by its content hash; a node fetches it the first time one of its trials needs it,
unpacks it into the run's scratch folder (`inputs/`), and runs the trial on that copy
(records still name the driver's folder). Later trials of the task on that node use
the copy; the sweep at the end removes it with the rest of the run's scratch.

Events. When the batch has a display, the trials' events (phases, turns, retries) go
from the nodes to a small actor on the driver's node (`EventBox`), without waiting; the
driver takes them every `EVENTS_EVERY` seconds and hands them to the display. A node
sends a trial's result once the box holds its events (bounded by `RELAY_GRACE`), so
the last take, after the last result, misses none. A trial is shown as started when
it is handed to the cluster. A run that also shares model-call limits (below, and
`engine/ray_limits.py`) keeps its events in its limits actor (`RunBox`): one actor
process, not two (each imports Ray and Helios, over a second of CPU on its node).

Trust. The driver trusts its nodes: what a task returns is unpickled by Ray (and the
batch's setup, pickled by the driver, is unpickled on the nodes), so a node can run
code in the driver. Join only clusters you control; `--resume` never joins the
cluster a run folder names unless `--ray-address` names it again. The bounds on a
trial's folder (its archive is packed under the bound of any download on the node,
and checked again on the driver as it streams in: the size the node announced, the
running size and each header, piece by piece, before the driver writes a file) keep
a runaway trial folder out of the run folder and out of the driver's memory: the
driver holds a few pieces of an archive at a time (`ARCHIVE_CHUNK` each, at most
`STREAM_WINDOW` ahead), and an archive past a bound is refused at the piece that
crosses it (the trial's `UnsafeDownload` error; its task on the node is cancelled).
They are not a defence against a hostile node.

Failures. A node or worker process that dies mid-task (or while its archive
streams, or whose pieces are lost with it) is a system failure: the driver submits
the unit again, as a new task, elsewhere (`NODE_RETRIES`), and the record says so
(`node_retries`). Ray's own reruns are off: they would resume a stream from a new run
of the trial, spliced onto the pieces of the lost one. A task that still fails is
recorded as crashed (`NodeLost`, an error that `--retry-errors` runs again). A
second result for a trial already recorded is dropped: nothing is counted twice.

Sweeps. Before any unit starts, one small task per alive node (pinned to it with
`NodeAffinitySchedulingStrategy`, needing no slot) checks the sandbox provider there
and removes the sandboxes labelled with this run's id (`cleanup_run`): those a driver
killed with -9 left behind (Ray stops a dead driver's tasks; their sandboxes may stay).
The run's lock is held, so no live driver owns them. A node whose provider is not
usable stops the batch before it starts, with one line naming the node.

Interrupts. Ctrl-C or SIGTERM cancels the tasks in flight (`ray.cancel`: the trial's
loop, or its stream, is cancelled on the node, and the trial stops its sandbox as it
would in one process), records what still comes back (bounded by `STOP_GRACE`), then
sweeps every node for what is left. The stopped units run again on resume.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib
import io
import logging
import shutil
import signal
import socket
import tarfile
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any, BinaryIO

from helios._proc import run_to_end, within
from helios.agents.toolsets.registry import register_toolset, registered_toolsets
from helios.engine._worker_side import WorkerSetup
from helios.engine.budget import BUDGET_STOPPED
from helios.engine.config import ray_missing
from helios.engine.door import ReadsFolders
from helios.engine.episode import EpisodeContext
from helios.engine.ray_limits import (
    LimitsBox,
    NodeStartGate,
    endpoint_limits,
    limits_of,
    share_endpoints,
    share_limits,
)
from helios.engine.workers import STOP_GRACE, ShardedBatch, _worker_services
from helios.environments.shell.safe_copy import Bounds, Spool, UnsafeDownload, extract_tar
from helios.errors import ConfigError
from helios.events import DesktopReady, TrialStarted
from helios.failures import ErrorInfo
from helios.secrets import register_secret, registered
from helios.settings import HeliosSettings, active
from helios.settings import current as helios_settings
from helios.slots import Slot

log = logging.getLogger(__name__)

#: the custom resource a node declares: how many trials it runs at once
SLOT_RESOURCE = "helios_slot"
#: how many times the driver runs a unit again after its node or worker process died
NODE_RETRIES = 3
#: the most bytes of a trial folder's archive in one object of its stream
ARCHIVE_CHUNK = 1 << 20
#: the most objects a node's stream runs ahead of what the driver has taken
STREAM_WINDOW = 4
#: how often the driver takes the trials' events from the nodes (for the live display)
EVENTS_EVERY = 0.5
#: how long the last events may take to reach the driver once the batch is done
RELAY_GRACE = 10.0
#: how long the cluster's head may take to accept a connection
CONNECT_TIMEOUT = 10.0
#: how long the sweep of every node may take (a node that cannot run it is not waited for)
SWEEP_TIMEOUT = 120.0
#: the most a folder a unit reads (a task folder) may hold to be sent to the nodes
MAX_INPUT_BYTES = 1 << 30
#: the name a trial folder has inside its archive
_ARCHIVE_TOP = "trial"
#: how often a trial's loop on a node wakes up, so that a `ray.cancel` (delivered as
#: a pending KeyboardInterrupt, which Python takes only between two bytecodes) is
#: seen at once, not when the loop's next timer fires
_WAKE_EVERY = 0.2
def _ray() -> Any:
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise ray_missing() from None


@dataclass(frozen=True)
class NodeResult:
    """The first object a trial's Ray task streams to the driver; the pieces of its
    folder's archive follow."""

    result: Any
    #: the size of the trial folder's tar archive (its top name `_ARCHIVE_TOP`), which
    #: follows in pieces of at most `ARCHIVE_CHUNK` bytes; None: no folder
    archive: int | None
    #: the model usage of this trial (its own model services' totals)
    totals: Any
    #: the node's address, for messages
    node: str
    #: the archive itself, when it fits in one piece (then no piece follows: a small
    #: trial folder costs one object, as a trial without one does)
    inline: bytes | None = None


# -- on a node -------------------------------------------------------------------------


def _node_run(payload: bytes, unit: Any, events: Any = None,
              inputs: dict[str, Any] | None = None, limits: Any = None,
              starts: int = 1) -> Iterator[Any]:  # fmt: skip
    """A Ray generator task: run one unit on this node, in a scratch folder of its own;
    yield its `NodeResult`, then its folder's archive in pieces of `ARCHIVE_CHUNK` bytes
    (packed first into a file beside the folder: a node never holds it whole in
    memory either). `payload` is the batch's `WorkerSetup`, pickled once by the driver:
    unpickled per unit, so that each has its own door, context and model services (a
    worker process runs many). `inputs`: the object refs of the folders the unit reads,
    by their key. Closed early (the driver refused the archive, or cancelled the task),
    it removes its scratch folder all the same."""
    ray = _ray()
    setup: WorkerSetup = ray.cloudpickle.loads(payload)
    base = _scratch_base(setup.ctx.run_id)
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    if inputs and isinstance(setup.door, ReadsFolders):
        unit = setup.door.with_inputs(unit, _node_inputs(ray, base, inputs))
    scratch = Path(tempfile.mkdtemp(prefix="trial-", dir=base))
    try:
        forward = _Forward(events) if events is not None else None
        emit = forward.emit if forward is not None else None
        gate = NodeStartGate(base / "starts", starts)  # this node's, across its processes
        result, totals = asyncio.run(_run_here(setup, unit, scratch, emit, limits, gate))
        folder = unit.folder
        # beside the trial folder, never in it (a folder is named by the door)
        archive = scratch / ".helios-archive.tar"
        size = _pack(scratch / folder, archive) if folder is not None else None
        if folder is not None:
            shutil.rmtree(scratch / folder, ignore_errors=True)
        if forward is not None:
            forward.flush(ray)  # the display has them all before the trial's end
        inline = archive.read_bytes() if size is not None and size <= ARCHIVE_CHUNK else None
        yield NodeResult(result=result, archive=size, totals=totals,
                         node=ray.util.get_node_ip_address(), inline=inline)  # fmt: skip
        if size is not None and inline is None:
            with archive.open("rb") as file:
                while chunk := file.read(ARCHIVE_CHUNK):
                    yield chunk
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


async def _run_here(setup: WorkerSetup, unit: Any, scratch: Path, emit: Any,
                    limits: Any = None, gate: asyncio.Semaphore | None = None,
                    ) -> tuple[Any, Any]:  # fmt: skip
    for secret in setup.secrets:
        register_secret(secret)
    for toolset in setup.toolsets:
        register_toolset(toolset)
    waker = _Waker()
    waker.start()
    services = setup.services
    share_limits(services, limits)  # the run's limiters, one for the whole cluster
    share_endpoints(setup.door, limits)  # and the door's own endpoints' (per unit: its copy)
    ctx = replace(setup.ctx, run_dir=scratch, start_gate=gate or asyncio.Semaphore(1),
                  emit=emit, services=services)  # fmt: skip
    door = setup.door
    slot = Slot(asyncio.Semaphore(1))
    await slot.acquire()
    try:
        with active(setup.settings or HeliosSettings.read()):
            try:
                result = await door.run_unit(unit, ctx, slot)
            except Exception as exc:
                result = door.crashed(unit, ErrorInfo.from_exception(exc, "internal"))
    finally:
        slot.release()
        waker.stop()
        if services is not None:
            await services.close()
    return result, services.totals if services is not None else None


class _Forward:
    """A trial's events, sent to the driver's events actor as they come (fire and
    forget: a trial never waits for the display). A desktop's URL is the node's own,
    so `DesktopReady` stays here. `flush` waits (bounded) until the actor holds them
    all: the trial's result streams to the driver as soon as it is yielded, and may
    otherwise overtake its last events."""

    def __init__(self, events: Any) -> None:
        self.events = events
        self.sent: list[Any] = []

    def emit(self, event: Any) -> None:
        if not isinstance(event, DesktopReady):
            self.sent.append(self.events.put.remote(event))

    def flush(self, ray: Any) -> None:
        if not self.sent:
            return
        with contextlib.suppress(Exception):  # the display's events never fail a trial
            ray.wait(self.sent, num_returns=len(self.sent), timeout=RELAY_GRACE)
        self.sent.clear()


class EventBox:
    """A Ray actor on the driver's node: the trials' events, until the driver takes them."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def put(self, event: Any) -> None:
        self.events.append(event)

    def take(self) -> list[Any]:
        taken, self.events = self.events, []
        return taken


class RunBox(LimitsBox, EventBox):
    """The run's limiters (`LimitsBox`) and the trials' events (`EventBox`) in one Ray
    actor, for a run that has both: one worker process on the driver's node, not two.
    Made again elsewhere if its node dies, as the limits are: the events it held then
    are lost (a display line not updated, never a record)."""

    def __init__(self, limits: dict[str, dict[str, float]]) -> None:
        LimitsBox.__init__(self, limits)
        EventBox.__init__(self)


class _Waker:
    """Wakes the loop every `_WAKE_EVERY` seconds until stopped."""

    def __init__(self) -> None:
        self.handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self.handle = asyncio.get_running_loop().call_later(_WAKE_EVERY, self.start)

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.cancel()


def _node_inputs(ray: Any, base: Path, inputs: dict[str, Any]) -> dict[str, Path]:
    """This node's copy of each input folder, fetched and unpacked the first time a
    trial here needs it. Two worker processes that race on one both unpack; the first
    rename wins and the other copy is dropped."""
    root = base / "inputs"
    root.mkdir(mode=0o700, exist_ok=True)
    copies: dict[str, Path] = {}
    for key, ref in inputs.items():
        target = root / hashlib.sha256(key.encode()).hexdigest()[:32]
        if not target.is_dir():
            _unpack_input(ray.get(ref), target)
        copies[key] = target
    return copies


def _unpack_input(archive: bytes, target: Path) -> None:
    staging = Path(tempfile.mkdtemp(prefix=".unpacking-", dir=target.parent))
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
            # The driver made it from the user's own folder (it also sends the code
            # a node runs); the data filter still refuses links out and odd members.
            tar.extractall(staging / "copy", filter="data")
        try:
            (staging / "copy").rename(target)
        except OSError:
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


class InputTooLarge(ValueError):
    """A folder a unit reads that is past what the driver sends through Ray."""


def pack_input(root: Path, max_bytes: int = MAX_INPUT_BYTES) -> bytes:
    """A folder a unit reads, as the tar archive a node unpacks: the entries
    `tree_checksum` hashes (links inside the folder followed, as the checksum follows
    them), with their modes, in sorted order. A link that leads out of the folder is
    left out (loading the task refused those already: one made since is not sent)."""
    top = root.resolve()
    entries = []
    size = 0
    for path in sorted(root.rglob("*")):
        if path.is_symlink() and not path.resolve().is_relative_to(top):
            log.warning("%s: a link out of the folder, not sent to the Ray nodes", path)
            continue
        if path.is_file():
            size += path.stat().st_size
        elif not path.is_dir():
            continue
        if size > max_bytes:
            raise InputTooLarge(
                f"{root} holds over {max_bytes >> 20} MiB: too large to send to the Ray "
                "nodes (the driver sends a task folder whole)"
            )
        entries.append(path)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", dereference=True) as tar:
        for path in entries:
            tar.add(path, arcname=path.relative_to(root).as_posix(), recursive=False)
    return buffer.getvalue()


class _BoundedWriter:
    """A trial folder's archive as the node writes it, refused past the bound of any
    download (`Bounds.archive_limit`): a folder too large to send is the trial's
    error on the node, before a byte of it leaves."""

    def __init__(self, file: IO[bytes], limit: int) -> None:
        self.file, self.limit = file, limit
        self.size = 0

    def write(self, data: Any) -> int:
        if self.size + len(data) > self.limit:
            raise UnsafeDownload(f"the trial folder is larger than {self.limit} bytes as an "
                                 "archive: not sent to the driver")  # fmt: skip
        self.size += len(data)
        return self.file.write(data)


def _pack(folder: Path, target: Path) -> int | None:
    """The trial folder as a tar written to `target` (links stored as links: the driver
    skips them); its size, or None when there is no folder."""
    if not folder.is_dir():
        return None
    with target.open("wb") as file:
        writer = _BoundedWriter(file, Bounds().archive_limit)
        with tarfile.open(fileobj=writer, mode="w|") as archive:  # type: ignore[call-overload]
            archive.add(str(folder), arcname=_ARCHIVE_TOP, recursive=True)
    return writer.size


async def _inline(archive: bytes) -> AsyncIterator[Any]:
    """An archive that came inside its `NodeResult`, as a stream of one piece."""

    async def piece() -> bytes:
        return archive

    yield piece()


async def spool_archive(pieces: AsyncIterator[Any], file: IO[bytes], size: int,
                        bounds: Bounds, what: str) -> None:  # fmt: skip
    """The pieces of a trial folder's archive as they stream from its node (each an
    awaitable: a Ray object ref), written to `file` once checked. The size the node
    announced is checked first, then each piece as it comes: its own size, the running
    size, every header (`Spool`, `HeaderScan`). The first piece past a bound refuses
    the archive (`UnsafeDownload`) and no further piece is taken: the driver holds
    one piece at a time, however large the archive."""
    if size > bounds.archive_limit:
        raise UnsafeDownload(f"{what}: an archive of {size} bytes, over the "
                             f"{bounds.archive_limit}-byte bound, refused")  # fmt: skip
    spool = Spool(file, bounds, what)
    async for ref in pieces:
        piece = await ref
        if not isinstance(piece, bytes) or len(piece) > ARCHIVE_CHUNK:
            raise UnsafeDownload(f"{what}: a piece of its archive that is not bytes of at "
                                 f"most {ARCHIVE_CHUNK}, refused")  # fmt: skip
        spool.add(piece)
        if spool.size > size:
            raise UnsafeDownload(f"{what}: more than the {size} bytes its node announced, "
                                 "refused")  # fmt: skip
        del piece, ref
    if spool.size != size:
        raise UnsafeDownload(f"{what}: its archive ended after {spool.size} of the {size} "
                             "bytes its node announced, refused")  # fmt: skip


def _scratch_base(run_id: str) -> Path:
    """Where a node keeps the trial folders of one run while they run: removed whole
    by the sweeps, so a trial whose process was killed leaves nothing for long."""
    name = "".join(c if c.isalnum() or c in "-_" else "_" for c in run_id) or "_"
    return Path(tempfile.gettempdir()) / "helios-ray" / name


def _node_sweep(provider: str | None, run_id: str, settings: HeliosSettings | None,
                check: bool) -> tuple[str | None, int]:  # fmt: skip
    """A Ray task pinned to one node: remove this run's scratch folder there, check its
    sandbox provider (`check`), then remove this run's sandboxes there. Returns (what is
    wrong with the provider, or None; how many sandboxes went)."""
    from helios.environments.registry import provider_class

    shutil.rmtree(_scratch_base(run_id), ignore_errors=True)

    async def sweep() -> tuple[str | None, int]:
        if provider is None:
            return None, 0
        with active(settings or HeliosSettings.read()):
            cls = provider_class(provider)
            problem = None
            if check:
                try:
                    await cls.preflight()
                except Exception as exc:
                    problem = str(exc) or type(exc).__name__
            removed = await cls.cleanup_run(run_id)
            return problem, len(removed)

    return asyncio.run(sweep())


# -- the driver ------------------------------------------------------------------------


@contextlib.contextmanager
def connected(address: str | None, slots: int) -> Iterator[Any]:
    """Ray, connected to `address` (see the module's docstring) for the block; a
    connection made here is closed after it."""
    ray = _ray()
    if ray.is_initialized():
        yield ray
        return
    if address is not None:
        _reachable(address)
    # ray.init sets its own SIGTERM handler (exit at once): Helios's signal watch
    # (`engine/interrupts.py`) must keep both signals, to stop the trials first.
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    options: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING,
                               "configure_logging": False}  # fmt: skip
    if address is None:
        # "local": a new instance, even when this machine runs a cluster (which Ray would
        # otherwise join: that is `--ray-address auto`)
        options.update(address="local", include_dashboard=False,
                       resources={SLOT_RESOURCE: slots})  # fmt: skip
    else:
        options["address"] = address
    try:
        ray.init(**options)
    except ConnectionError as exc:
        raise ConfigError(f"cannot reach the Ray cluster at {address}: {exc}",
                          field="--ray-address") from None  # fmt: skip
    finally:
        for sig, handler in handlers.items():
            if handler is not None:
                signal.signal(sig, handler)
    try:
        if not ray.cluster_resources().get(SLOT_RESOURCE):
            raise ConfigError(
                f"the Ray cluster at {address} declares no {SLOT_RESOURCE}, so no trial could "
                f"start: start each node with ray start --resources='{{\"{SLOT_RESOURCE}\": N}}'",
                field="--ray-address",
            )
        yield ray
    finally:
        ray.shutdown()


def _reachable(address: str) -> None:
    """Refuse a `host:port` that nothing answers on, at once: `ray.init` would wait for
    it for minutes, in a call that no signal interrupts."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or "://" in address:
        return  # "auto", or a form Ray resolves itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT).close()
    except OSError as exc:
        raise ConfigError(f"cannot reach the Ray cluster at {address}: "
                          f"{exc.strerror or exc}", field="--ray-address") from None  # fmt: skip


async def run_on_ray(service: ShardedBatch, units: Sequence[Any], ctx: EpisodeContext,
                     address: str | None, provider: str | None) -> None:  # fmt: skip
    """Run `units` as Ray tasks; record them here, as they come back. `provider`: the
    sandbox provider whose sandboxes of this run the sweeps remove (None: none)."""
    with connected(address, service.concurrency.in_flight) as ray:
        await _sweep(ray, provider, ctx.run_id, "left by an earlier invocation", check=True)
        batch = _RayBatch(ray, service, units, ctx)
        try:
            await batch.run()
            await _sweep(ray, provider, ctx.run_id, "at the end")
        except BaseException:
            # To their end, even if cancelled again meanwhile (a second signal exits).
            await run_to_end(batch.stop())
            await run_to_end(_sweep(ray, provider, ctx.run_id, "after an interrupt"))
            raise


async def _sweep(ray: Any, provider: str | None, run_id: str, why: str,
                 check: bool = False) -> None:  # fmt: skip
    """Remove this run's scratch folders and sandboxes on every alive node (and, with
    `check`, refuse a node whose provider is not usable)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    sweep = ray.remote(num_cpus=0, max_retries=0)(_node_sweep)
    nodes = [node for node in ray.nodes() if node.get("Alive")]
    settings = helios_settings()
    refs = []
    for node in nodes:
        pinned = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
        refs.append(sweep.options(scheduling_strategy=pinned).remote(provider, run_id, settings,
                                                                     check))  # fmt: skip
    try:
        outcomes = await within(SWEEP_TIMEOUT, asyncio.gather(*refs, return_exceptions=True))
    except TimeoutError:
        log.info("the sweep of run %s's sandboxes (%s) took over %g s: not waited for",
                 run_id, why, SWEEP_TIMEOUT)  # fmt: skip
        return
    for node, outcome in zip(nodes, outcomes, strict=True):
        where = node.get("NodeManagerAddress", node["NodeID"])
        if isinstance(outcome, BaseException):
            log.info("could not sweep node %s (%s): %s", where, why, outcome)
            continue
        problem, removed = outcome
        if problem is not None:
            raise ConfigError(f"the sandbox provider {provider!r} is not usable on Ray node "
                              f"{where}: {problem}", field="--provider")  # fmt: skip
        if removed:
            log.info("removed %d sandbox(es) of run %s on node %s %s", removed, run_id, where, why)


class _RayBatch:
    """The driver's side of one batch: submit, collect, record."""

    def __init__(self, ray: Any, service: ShardedBatch, units: Sequence[Any],
                 ctx: EpisodeContext) -> None:  # fmt: skip
        self.ray, self.service, self.units = ray, service, units
        self.run_dir = ctx.run_dir
        setup = WorkerSetup(
            door=service.door,
            ctx=replace(
                ctx, start_gate=asyncio.Semaphore(1), emit=None, services=None, run_dir=None
            ),
            services=_worker_services(service.services),
            events=False,
            slots=1,
            secrets=registered(),
            toolsets=registered_toolsets(),
            settings=helios_settings(),
        )
        # The setup travels inside the task's function, which Ray exports once and each
        # worker process imports once: a unit's task carries the unit alone.
        payload = ray.cloudpickle.dumps(setup)
        #: the run's model-call limiters, shared by every trial on every node
        limits = limits_of(service.services) | endpoint_limits(service.door)
        shown = service.emit is not None
        # Restarted (its limits afresh) if its node dies: the driver's node may be any
        # node of a machine that runs several, and the run's calls must go on. With a
        # display, the same actor holds the trials' events (`RunBox`).
        self.limits = (self._on_driver_node(RunBox if shown else LimitsBox,
                                            restart=True).remote(limits)
                       if limits else None)  # fmt: skip
        #: where the nodes send the trials' events (the live display's), if it is shown
        self.events = (self.limits if self.limits is not None else self._event_box()
                       ) if shown else None  # fmt: skip
        boxed, starts = self.limits, service.concurrency.starts_at_once
        #: set once no more results are awaited: the relay takes the last events and ends
        self.done = asyncio.Event()
        events = self.events

        def run_unit(unit: Any, inputs: dict[str, Any]) -> Iterator[Any]:
            yield from _node_run(payload, unit, events, inputs, boxed, starts)

        # No rerun by Ray (max_retries=0): it would splice a rerun's stream onto the
        # pieces already taken from the lost run. The driver runs the unit again.
        self.remote = ray.remote(
            num_cpus=0, resources={SLOT_RESOURCE: 1}, num_returns="streaming",
            max_retries=0, retry_exceptions=False, scheduling_strategy="SPREAD",
            _generator_backpressure_num_objects=STREAM_WINDOW,
        )(run_unit)  # fmt: skip
        #: the stream (a Ray `ObjectRefGenerator`) of each unit in flight, by trial id
        self.in_flight: dict[str, Any] = {}
        self.collectors: set[asyncio.Task[None]] = set()
        self.room = asyncio.Event()
        self.recorded: set[str] = set()
        self.stopping = False
        #: the object ref of each input folder put in the object store, by its key
        self.inputs: dict[str, Any] = {}
        #: a hard budget stopped the trials in flight: each is recorded as BudgetStopped
        self.budget_stopped = False
        service.on_hard_stop = self._stop_for_budget

    def _stop_for_budget(self) -> None:
        self.budget_stopped = True
        for stream in list(self.in_flight.values()):
            with contextlib.suppress(Exception):
                self.ray.cancel(stream, recursive=True)

    def _event_box(self) -> Any:
        return self._on_driver_node(EventBox).remote()

    def _on_driver_node(self, cls: type, restart: bool = False) -> Any:
        """`cls` as a Ray actor class, placed on the driver's node; with `restart`, made
        again elsewhere if that node dies, and the calls it had not answered sent again."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = NodeAffinitySchedulingStrategy(self.ray.get_runtime_context().get_node_id(),
                                              soft=True)  # fmt: skip
        again = {"max_restarts": -1, "max_task_retries": -1} if restart else {}
        return self.ray.remote(num_cpus=0, scheduling_strategy=here, **again)(cls)

    async def _relay(self) -> None:
        """Hand the nodes' events to the display, every `EVENTS_EVERY` seconds, and the
        last ones once the batch is done. Never cancelled in a take: the box has given
        those events away already."""
        while not self.done.is_set():
            await self._relay_once()
            with contextlib.suppress(TimeoutError):
                await within(EVENTS_EVERY, self.done.wait())
        await self._relay_once()

    async def _relay_once(self) -> None:
        if self.events is None:
            return
        with contextlib.suppress(Exception):  # the display's events are never the batch's end
            for event in await self.events.take.remote():
                self.service._emit(event)

    async def run(self) -> None:
        relay = asyncio.create_task(self._relay()) if self.events is not None else None
        try:
            await self._run()
        finally:
            self.done.set()
            if relay is not None:
                with contextlib.suppress(Exception):
                    await within(RELAY_GRACE, relay)
            shared = self.events is self.limits  # one RunBox
            for actor in (None if shared else self.events, self.limits):
                if actor is not None:
                    with contextlib.suppress(Exception):
                        self.ray.kill(actor)

    async def _run(self) -> None:
        limit = self.service.concurrency.in_flight
        for unit in self.units:
            while len(self.in_flight) >= limit:
                self.room.clear()
                await self.room.wait()
            if self.service.halted(len(self.in_flight)):
                break
            try:
                inputs = await self._inputs(unit)
            except (OSError, InputTooLarge) as exc:  # unreadable, or too large to send
                error = ErrorInfo.from_exception(exc, "setup")
                await self._record(unit, self.service.door.crashed(unit, error), {})
                continue
            self.service._emit(TrialStarted(unit.trial_id, unit.label))
            # inside a dict, the refs are not fetched with the task: a node fetches
            # one only if it has no copy yet
            stream = self._submit(unit, inputs)
            self.service.started_units += 1
            task = asyncio.create_task(self._collect(unit, inputs, stream))
            self.collectors.add(task)
            task.add_done_callback(self.collectors.discard)
        while self.collectors:
            await asyncio.wait(set(self.collectors))

    async def _inputs(self, unit: Any) -> dict[str, Any]:
        """The refs of the folders `unit` reads; each put in the object store once."""
        door = self.service.door
        if not isinstance(door, ReadsFolders):
            return {}
        wanted = door.inputs(unit)
        for key, folder in wanted.items():
            if key not in self.inputs:
                self.inputs[key] = await asyncio.to_thread(self._put, folder)
        return {key: self.inputs[key] for key in wanted}

    def _put(self, folder: Path) -> Any:
        return self.ray.put(pack_input(folder, MAX_INPUT_BYTES))

    def _submit(self, unit: Any, inputs: dict[str, Any]) -> Any:
        stream = self.remote.remote(unit, inputs)
        self.in_flight[unit.trial_id] = stream
        return stream

    async def _collect(self, unit: Any, inputs: dict[str, Any], stream: Any) -> None:
        """Take a unit's stream; run the unit again (a new task) while its node is lost,
        up to `NODE_RETRIES` times; record it once."""
        try:
            for attempt in range(NODE_RETRIES + 1):
                if attempt:
                    stream = self._submit(unit, inputs)
                try:
                    lost = await self._receive(unit, stream, attempt)
                except Exception as exc:  # a bug: the unit is still recorded, the batch goes on
                    log.error("trial %s: its result could not be recorded: %s: %s",
                              unit.label, type(exc).__name__, exc)  # fmt: skip
                    error = ErrorInfo.from_exception(exc, "record")
                    await self._record(unit, self.service.door.crashed(unit, error), {})
                    return
                if lost is None or self.stopping:
                    return  # recorded; or stopped by the interrupt: it runs again on resume
                if attempt < NODE_RETRIES:
                    log.info("trial %s: its node was lost (%s): run again", unit.label,
                             type(lost).__name__)  # fmt: skip
                    continue
                await self._record(unit, self._lost(unit, lost), {"node_retries": attempt})
        finally:
            self.in_flight.pop(unit.trial_id, None)
            self.room.set()

    def _system(self, exc: BaseException) -> bool:
        """Whether `exc` says the task's node or worker process was lost (not that the
        task raised, nor that it was cancelled)."""
        errors = self.ray.exceptions
        return isinstance(exc, errors.RayError) and not isinstance(
            exc, (errors.RayTaskError, errors.TaskCancelledError)
        )

    async def _receive(self, unit: Any, stream: Any, attempt: int) -> BaseException | None:
        """One run of a unit: its `NodeResult`, then its archive, checked as it streams
        and unpacked; then the record. Returns the system failure that lost the run (it
        is to run again), or None: recorded, or stopped. A stream left unread (its
        archive refused, the batch stopped) has its task cancelled."""
        ended = False
        try:
            try:
                first = await anext(stream, None)
                if first is None:
                    raise RuntimeError("the trial's task ended without its result")
                outcome = await first
                if not isinstance(outcome, NodeResult):
                    raise TypeError(f"the trial's task sent a {type(outcome).__name__} first")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self.stopping or self._system(exc):
                    return exc
                await self._record(unit, self._lost(unit, exc), {})
                return None
            if unit.trial_id in self.recorded:
                log.info("dropped a second result for trial %s (from node %s)",
                         unit.trial_id, outcome.node)  # fmt: skip
                return None
            result = outcome.result
            # nothing follows the result (no folder, or it came inline): the task ends by
            # itself, and the stream is let go without waiting for its end
            ended = outcome.archive is None or outcome.inline is not None
            if outcome.archive is not None and self.run_dir is not None and unit.folder is not None:
                what = f"the files of trial {unit.label} from node {outcome.node}"
                pieces = stream if outcome.inline is None else _inline(outcome.inline)
                try:
                    skipped = await self._unpack(unit, pieces, outcome.archive, what)
                    ended = True
                except (OSError, UnsafeDownload) as exc:  # a full disk; an archive refused
                    error = ErrorInfo.from_exception(exc, "record")
                    result = self.service.door.crashed(unit, error)
                except self.ray.exceptions.RayError as exc:
                    failure: BaseException = exc
                    if self.stopping or self._system(failure):
                        return failure
                    result = self._lost(unit, failure)
                else:
                    if skipped:
                        log.info("trial %s: %d entries of its folder not copied from node %s: "
                                 "%s", unit.label, len(skipped), outcome.node,
                                 ", ".join(skipped[:5]))  # fmt: skip
            self._add_totals(outcome.totals)
            await self._record(unit, result, {"node_retries": attempt} if attempt else {})
            return None
        finally:
            if not ended:
                with contextlib.suppress(Exception):
                    self.ray.cancel(stream, recursive=True)

    def _lost(self, unit: Any, exc: BaseException) -> Any:
        """The crashed result of a unit whose task failed: its node or process was lost
        past Ray's reruns (`NodeLost`), or the task itself raised (its error's type)."""
        if self.budget_stopped:
            budget = getattr(self.service, "budget", None)
            why = budget.stop_reason() if budget is not None else "stopped by a budget"
            error = ErrorInfo(type=BUDGET_STOPPED, message=why, phase="internal",
                              infrastructure=True)  # fmt: skip
            return self.service.door.crashed(unit, error)
        if isinstance(exc, self.ray.exceptions.RayTaskError):
            cause = exc.cause if isinstance(exc.cause, BaseException) else exc
            kind, note = type(cause).__name__, ""
        else:
            cause, kind, note = exc, "NodeLost", f" (after up to {NODE_RETRIES} reruns)"
        text = str(cause).strip()
        message = (text.splitlines()[0] if text else kind)[:300] + note
        error = ErrorInfo(type=kind, message=message, phase="internal")
        return self.service.door.crashed(unit, error)

    async def _unpack(self, unit: Any, pieces: AsyncIterator[Any], size: int,
                      what: str) -> list[str]:  # fmt: skip
        """The trial folder from its node, checked before a file is written: as it streams
        in (`spool_archive`: its size, then every header, piece by piece), into an unnamed
        file in the run folder (in memory: an archive announced as one piece at most, and
        refused at the first byte past that), then by `extract_tar`. The node is trusted
        (`--executor ray` unpickles what it sends); these bounds keep a runaway trial
        folder out of the run folder and out of the driver's memory."""
        assert self.run_dir is not None
        bounds = Bounds()
        with contextlib.ExitStack() as stack:
            file: BinaryIO = io.BytesIO()
            if size > ARCHIVE_CHUNK:
                file = stack.enter_context(tempfile.TemporaryFile(dir=self.run_dir))
            await spool_archive(pieces, file, size, bounds, what)
            file.seek(0)
            return await asyncio.to_thread(extract_tar, file, self.run_dir / unit.folder,
                                           what=what, bounds=bounds)  # fmt: skip

    async def _record(self, unit: Any, result: Any, extra: dict[str, Any]) -> None:
        if unit.trial_id in self.recorded:
            return
        self.recorded.add(unit.trial_id)
        await self.service._record(unit, result, extra or None)

    def _add_totals(self, totals: Any) -> None:
        services = self.service.services
        if services is not None and totals is not None:
            services.totals.add(totals)

    async def stop(self) -> None:
        """Cancel the tasks in flight; record what still comes back (bounded)."""
        self.stopping = True
        for stream in list(self.in_flight.values()):
            with contextlib.suppress(Exception):
                self.ray.cancel(stream, recursive=True)
        deadline = time.monotonic() + STOP_GRACE
        while self.collectors and time.monotonic() < deadline:
            await asyncio.wait(set(self.collectors), timeout=deadline - time.monotonic())
        for task in self.collectors:
            task.cancel()
