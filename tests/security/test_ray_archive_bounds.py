"""`--executor ray`: a trial folder comes back to the driver as a stream of pieces of
its archive. The node packs it under the bound of any download, and the driver checks
each piece as it comes (the announced size, the running size, every header) before
it writes a file, and takes no piece past the one that breaks a bound: a hostile or
runaway archive never sits whole in the driver's memory. (The node is trusted all the
same: Ray unpickles what it sends; see the module's "Trust".) No cluster is needed:
the streams here are fakes that count the pieces the driver takes."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import os
import pickle
import tarfile
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import helios.engine.ray_executor as ray_executor
from helios.environments.shell.safe_copy import Bounds, UnsafeDownload
from helios.failures import ErrorInfo

from ..thin_door import PromptDoor, PromptUnit


class _Door(PromptDoor):
    """The thin door, its crashed records saying why."""

    def crashed(self, unit: PromptUnit, error: ErrorInfo) -> dict[str, Any]:
        return {**super().crashed(unit, error),
                "error": {"type": error.type, "message": error.message}}  # fmt: skip


SMALL = Bounds(max_bytes=1 << 20, max_entries=100)
MiB = 1 << 20


@pytest.fixture
def small_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ray_executor, "Bounds", lambda: SMALL, raising=False)


class _RayError(Exception):
    pass


class _RayTaskError(_RayError):
    cause: BaseException | None = None


class _Cancelled(_RayError):
    pass


class FakeStream:
    """What the driver gets for a unit's task: an async iterator of awaitable "refs",
    the result first, then the archive's pieces, made only as they are taken (and
    counted then). Awaited whole (the protocol of a task that returns one object), it
    takes every piece first, as a one-object result would hold them."""

    def __init__(self, outcome: Any, pieces: Iterator[bytes]) -> None:
        self.outcome, self.pieces = outcome, pieces
        self.started = False
        #: the pieces of the archive the driver took
        self.taken = 0
        self.cancelled = False

    def __aiter__(self) -> FakeStream:
        return self

    async def __anext__(self) -> Any:
        if not self.started:
            self.started = True
            return self._ref(self.outcome, piece=False)
        piece = next(self.pieces, None)
        if piece is None:
            raise StopAsyncIteration
        return self._ref(piece, piece=True)

    async def _ref(self, value: Any, *, piece: bool) -> Any:
        self.taken += piece
        return value

    def __await__(self) -> Any:
        async def whole() -> Any:
            archive = b"".join(self.pieces)
            self.taken += -(-len(archive) // MiB)
            return _node_result(
                result=self.outcome.result, archive=archive, totals=None, node=self.outcome.node
            )

        return whole().__await__()


class FakeRay:
    """What `_RayBatch` asks of Ray, its tasks being the streams given."""

    cloudpickle = pickle
    exceptions = SimpleNamespace(RayError=_RayError, RayTaskError=_RayTaskError,
                                 TaskCancelledError=_Cancelled)  # fmt: skip

    def __init__(self, streams: list[FakeStream]) -> None:
        self.streams = iter(streams)

    def remote(self, **options: Any) -> Any:
        streams = self.streams

        def wrap(function: Any) -> Any:
            return SimpleNamespace(remote=lambda unit, inputs: next(streams))

        return wrap

    @staticmethod
    def cancel(stream: FakeStream, recursive: bool = True) -> None:
        stream.cancelled = True


def _node_result(**values: Any) -> Any:
    """A `NodeResult` with the fields this executor's has (so that the fakes also serve
    an executor whose task returns one object: they show what it takes in)."""
    names = {field.name for field in dataclasses.fields(ray_executor.NodeResult)}
    return ray_executor.NodeResult(**{"attempt": 0, **values} if "attempt" in names else values)


def node_result(archive_size: int | None, node: str = "10.0.0.9") -> Any:
    """The first object of a unit's stream: its result, and the size of its archive."""
    unit = PromptUnit("p good", 0, folder="t0")
    result = {"trial_id": unit.trial_id, "line": 0, "status": "passed"}
    return _node_result(result=result, archive=archive_size, totals=None, node=node)


def run_batch(tmp_path: Path, streams: list[FakeStream]) -> tuple[Path, list[dict[str, Any]]]:
    """One unit (folder "t0") through `_RayBatch`, its task's stream being `streams[0]`
    (and `streams[1]`... for its reruns); (the run folder, its records)."""
    import json

    from helios.engine.batch import BatchService
    from helios.engine.episode import EpisodeContext
    from helios.engine.store import RunStore

    store = RunStore.create(tmp_path / "run", {"run_id": "r"})
    service: BatchService[Any, Any] = BatchService(door=_Door(), store=store)
    unit = PromptUnit("p good", 0, folder="t0")

    async def go() -> None:
        ctx = EpisodeContext(run_id="r", run_dir=store.run_dir, start_gate=asyncio.Semaphore(1))
        await ray_executor._RayBatch(FakeRay(streams), service, [unit], ctx).run()

    try:
        asyncio.run(go())
    finally:
        store.close()
    lines = (store.run_dir / "results.jsonl").read_text().splitlines()
    return store.run_dir, [json.loads(line) for line in lines]


def pieces_of(archive: bytes) -> Iterator[bytes]:
    """An archive in the pieces a node sends (`ray_executor.ARCHIVE_CHUNK`: 1 MiB)."""
    return (archive[i : i + MiB] for i in range(0, len(archive), MiB))


def tar_of(members: list[tuple[str, int]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, size in members:
            info = tarfile.TarInfo(name)
            info.size = size
            tar.addfile(info, io.BytesIO(bytes(size)))
    return buffer.getvalue()


@pytest.mark.usefixtures("small_bounds")
def test_a_node_never_packs_a_folder_past_the_bound(tmp_path: Path) -> None:
    folder = tmp_path / "trial"
    folder.mkdir()
    (folder / "big.bin").write_bytes(os.urandom(3 << 20))
    with pytest.raises(UnsafeDownload, match="not sent to the driver"):
        ray_executor._pack(folder, tmp_path / "archive.tar")


def test_a_node_packs_a_folder_to_a_file_the_driver_reads(tmp_path: Path) -> None:
    folder = tmp_path / "trial"
    (folder / "agent").mkdir(parents=True)
    (folder / "agent" / "log.txt").write_bytes(b"hello")
    size = ray_executor._pack(folder, tmp_path / "archive.tar")
    assert size == (tmp_path / "archive.tar").stat().st_size
    with tarfile.open(tmp_path / "archive.tar") as tar:
        assert "trial/agent/log.txt" in tar.getnames()
    assert ray_executor._pack(tmp_path / "none", tmp_path / "other.tar") is None


@pytest.mark.usefixtures("small_bounds")
def test_the_driver_refuses_an_announced_oversized_archive_before_a_piece(
    tmp_path: Path,
) -> None:
    archive = tar_of([("trial/big.bin", 3 << 20)])
    stream = FakeStream(node_result(len(archive)), pieces_of(archive))
    run_dir, (record,) = run_batch(tmp_path, [stream])
    assert record["status"] == "error"
    assert "over the" in record["error"]["message"] and "10.0.0.9" in record["error"]["message"]
    assert stream.taken <= 1 and stream.cancelled  # its task stopped: the rest never came
    assert not (run_dir / "t0").exists()


def test_a_huge_header_in_the_first_piece_is_refused_at_that_piece(tmp_path: Path) -> None:
    # A GNU long name that says it is 900 MiB (tarfile would read it whole), then 63
    # more pieces: the driver takes the first piece only.
    header = tarfile.TarInfo("././@LongLink")
    header.type, header.size = tarfile.GNUTYPE_LONGNAME, 900 << 20
    first = header.tobuf(format=tarfile.GNU_FORMAT)
    size = 64 * MiB
    pieces = iter([first + bytes(MiB - len(first)), *(bytes(MiB) for _ in range(63))])
    stream = FakeStream(node_result(size), pieces)
    run_dir, (record,) = run_batch(tmp_path, [stream])
    assert record["status"] == "error"
    assert record["error"]["type"] == "UnsafeDownload"
    assert "archive header of" in record["error"]["message"]
    assert stream.taken == 1 and stream.cancelled
    assert not (run_dir / "t0").exists()


def test_a_stream_past_its_announced_size_is_refused_holding_one_piece(tmp_path: Path) -> None:
    # A node that says 1 MiB, then streams 40 MiB of a well-formed archive (forty files
    # of 1 MiB): refused at the piece that passes the size it announced, the driver's
    # memory never holding more than a few pieces.
    archive = tar_of([(f"trial/f{i}.bin", MiB) for i in range(40)])
    stream = FakeStream(node_result(MiB), pieces_of(archive))
    tracemalloc.start()
    try:
        run_dir, (record,) = run_batch(tmp_path, [stream])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del archive
    assert record["status"] == "error"
    assert record["error"]["type"] == "UnsafeDownload"
    assert stream.taken <= 2 and stream.cancelled
    assert peak < 8 * MiB, peak  # the driver's own allocations: a few pieces at most
    assert not (run_dir / "t0").exists() or not any((run_dir / "t0").iterdir())


def test_a_stream_cut_short_is_refused(tmp_path: Path) -> None:
    archive = tar_of([("trial/a.bin", 3 * MiB)])
    stream = FakeStream(node_result(len(archive) + MiB), pieces_of(archive))
    run_dir, (record,) = run_batch(tmp_path, [stream])
    assert record["status"] == "error"
    assert "ended after" in record["error"]["message"]
    assert not (run_dir / "t0").exists()


def test_a_well_formed_stream_is_unpacked_into_the_trial_folder(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        data = os.urandom(3 * MiB + 17)
        info = tarfile.TarInfo("trial/agent/big.bin")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    archive = buffer.getvalue()
    stream = FakeStream(node_result(len(archive)), pieces_of(archive))
    run_dir, (record,) = run_batch(tmp_path, [stream])
    assert record["status"] == "passed"
    assert (run_dir / "t0" / "agent" / "big.bin").read_bytes() == data
    assert stream.taken == 4 and not stream.cancelled


class _Lost:
    """A ref whose node died: awaiting it raises a system failure (not the task's)."""

    def __await__(self) -> Any:
        async def fail() -> Any:
            raise _RayError("the node died")

        return fail().__await__()


class LostStream(FakeStream):
    """A stream whose node dies after its result and one piece."""

    async def __anext__(self) -> Any:
        if self.taken >= 1:
            return _Lost()
        return await super().__anext__()


def test_a_node_lost_mid_stream_runs_the_unit_again_and_records_it_once(
    tmp_path: Path,
) -> None:
    data = os.urandom(2 * MiB)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("trial/out.bin")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    archive = buffer.getvalue()
    lost = LostStream(node_result(len(archive), "10.0.0.8"), pieces_of(archive))
    rerun = FakeStream(node_result(len(archive)), pieces_of(archive))
    run_dir, records = run_batch(tmp_path, [lost, rerun])
    (record,) = records  # once
    assert record["status"] == "passed" and record["node_retries"] == 1
    assert lost.cancelled  # the stream left unread was let go
    assert (run_dir / "t0" / "out.bin").read_bytes() == data  # the rerun's, whole


def test_a_small_folder_comes_inside_the_result_as_one_object(tmp_path: Path) -> None:
    archive = tar_of([("trial/agent/log.txt", 5)])
    outcome = dataclasses.replace(node_result(len(archive)), inline=archive)
    stream = FakeStream(outcome, iter([]))
    run_dir, (record,) = run_batch(tmp_path, [stream])
    assert record["status"] == "passed"
    assert (run_dir / "t0" / "agent" / "log.txt").read_bytes() == bytes(5)
    assert stream.taken == 0 and not stream.cancelled  # nothing else was asked of the stream


def test_an_inline_archive_past_its_announced_size_is_refused(tmp_path: Path) -> None:
    archive = tar_of([("trial/big.bin", 3 * MiB)])
    outcome = dataclasses.replace(node_result(1024), inline=archive)
    run_dir, (record,) = run_batch(tmp_path, [FakeStream(outcome, iter([]))])
    assert record["status"] == "error" and record["error"]["type"] == "UnsafeDownload"
    assert not (run_dir / "t0").exists()
