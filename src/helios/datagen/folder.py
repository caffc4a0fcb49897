"""The run folder `<output_dir>/<run_name>/` and the batch files inside it.

Layout (Hermes's files first, then Helios's):

    batch_<n>.jsonl      one Hermes row per prompt, appended and fsynced
    trajectories.jsonl   the merge of every recorded row (rewritten at the end)
    checkpoint.json      Hermes's checkpoint (atomic)
    statistics.json      Hermes's statistics plus Helios's counts (atomic)
    tombstones.jsonl     prompts discarded (no reasoning, or dropped by the merge)
    failures.jsonl       prompts that failed, with the error; retried by --resume
    .helios/             the engine's store: run.json and results.jsonl (the
                         completion records, which say where each row is)

A row is written and fsynced before its completion record is appended, and only
rows that a record points at are merged, so a kill -9 at any instant leaves at
worst an orphan row that nothing counts. New rows never go into a batch file
that existed when the invocation started.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

STORE_DIR = ".helios"
TRAJECTORIES = "trajectories.jsonl"
CHECKPOINT = "checkpoint.json"
STATISTICS = "statistics.json"
TOMBSTONES = "tombstones.jsonl"
FAILURES = "failures.jsonl"
_BATCH = re.compile(r"^batch_(\d+)\.jsonl$")


def batch_name(number: int) -> str:
    return f"batch_{number}.jsonl"


def batch_files(run_dir: Path) -> dict[int, Path]:
    """Existing batch files by number."""
    found: dict[int, Path] = {}
    if run_dir.is_dir():
        for path in run_dir.iterdir():
            match = _BATCH.match(path.name)
            if match:
                found[int(match.group(1))] = path
    return found


def cut_torn_tail(path: Path) -> bool:
    """Drop a final line without its newline (a row torn by a kill); no record can
    point at it, because rows are fsynced before their record is written."""
    size = path.stat().st_size
    if size == 0:
        return False
    with path.open("r+b") as handle:
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return False
        start = max(size - 1024 * 1024, 0)
        while True:
            handle.seek(start)
            chunk = handle.read(size - start)
            cut = chunk.rfind(b"\n")
            if cut != -1 or start == 0:
                handle.truncate(start + cut + 1 if cut != -1 else 0)
                return True
            start = max(start - 1024 * 1024, 0)


class RowWriter:
    """Appends rows to batch files (from worker threads), fsyncing each one."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._lock = threading.Lock()
        self._handles: dict[int, IO[bytes]] = {}

    def __getstate__(self) -> dict[str, Any]:
        # Sent with its door to the nodes of `--executor ray`, which never write rows
        # (the driver does): the folder alone, no open file, no lock.
        return {"run_dir": self.run_dir}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["run_dir"])  # type: ignore[misc]

    def append(self, batch: int, line: bytes) -> tuple[str, int, int]:
        """(file name, byte offset, length) of the row, once it is on disk."""
        with self._lock:
            handle = self._handles.get(batch)
            if handle is None:
                handle = (self.run_dir / batch_name(batch)).open("ab")
                self._handles[batch] = handle
            offset = handle.tell()
            handle.write(line)
            handle.flush()
            fileno = handle.fileno()
        # Outside the lock, so rows of other prompts are not held up by this sync;
        # handles are only closed once every row is written.
        os.fsync(fileno)
        return batch_name(batch), offset, len(line)

    def close_batch(self, batch: int) -> None:
        with self._lock:
            handle = self._handles.pop(batch, None)
        if handle is not None:
            handle.close()

    def close(self) -> None:
        with self._lock:
            handles, self._handles = self._handles, {}
        for handle in handles.values():
            handle.close()


def orphan_rows(run_dir: Path, records: Iterable[dict[str, Any]]) -> int:
    """Rows in batch files that no record points at (left by a kill mid-prompt)."""
    lines = 0
    for path in batch_files(run_dir).values():
        with path.open("rb") as handle:
            lines += sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))
    referenced = sum(1 for r in records if "file" in r)
    return max(lines - referenced, 0)
