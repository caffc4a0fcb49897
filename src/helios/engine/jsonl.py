"""Append-only JSON Lines files that survive kill -9 and a bad line.

Crash invariants:
- an appended line is flushed at once (a process crash cannot lose it) and
  fsynced within FSYNC_INTERVAL (an OS crash loses at most that much);
- only a torn final line (no newline: the process died mid-append) is cut on
  load; its bytes are kept in the quarantine file as evidence; a blank line
  holds nothing and is skipped;
- any other unreadable line is moved to the quarantine file and reported, and
  every record after it still counts;
- a failed append (a full disk) is rolled back to the last whole line, so the
  file never holds half a record followed by more records.
"""

from __future__ import annotations

import asyncio
import contextlib
import mmap
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

import msgspec

from helios.safe_json import JsonValueError, dumps, parse_json

FSYNC_INTERVAL = 1.0
#: why a last line without its newline is not read
TORN = "torn final line (cut)"
#: bytes of whole lines decoded at once on resume
HEAD_BLOCK = 32 * 1024 * 1024


class RecordHead(msgspec.Struct, gc=False):
    """What resume needs of a record: its id, status and folder. Decoding into
    this validates the whole line as JSON but builds nothing else, so a run's
    load time follows its number of records, not their size."""

    trial_id: object = None
    status: object = None
    folder: object = None
    #: the trial's spend and whether a budget stopped it (`engine.budget`)
    spend: object = None
    budget_stopped: object = None
    #: the reward, and a retry's marks (`engine.retries`: `--retry-failed-below`)
    reward: object = None
    retry_of: object = None
    retry: object = None
    retry_round: object = None


_HEADS = msgspec.json.Decoder(RecordHead)
T = TypeVar("T")


@dataclass(frozen=True)
class BadLine:
    line: int
    reason: str


@dataclass
class Loaded:
    records: list[dict[str, Any]] = field(default_factory=list)
    #: unreadable lines moved to the quarantine file (the torn tail included)
    quarantined: list[BadLine] = field(default_factory=list)


def _decode_heads(path: Path) -> list[RecordHead] | None:
    """Every line's head, or None if a line is not a JSON object or the last one is torn."""
    with path.open("rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size == 0:
            return []
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            view = memoryview(mapped)
            try:
                return _decode_blocks(mapped, view, size)
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
                return None  # the slow path finds and quarantines the bad line
            finally:
                view.release()


def _decode_blocks(mapped: mmap.mmap, view: memoryview, size: int) -> list[RecordHead] | None:
    heads: list[RecordHead] = []
    start = 0
    while start < size:
        end = min(start + HEAD_BLOCK, size)
        cut = mapped.rfind(b"\n", start, end) + 1
        if cut <= start:  # a line longer than a block
            cut = mapped.find(b"\n", end) + 1
            if cut == 0:
                return None  # a torn final line
        heads.extend(_HEADS.decode_lines(view[start:cut]))
        start = cut
    return heads


def _parse(raw: bytes) -> dict[str, Any] | str:
    try:
        record = parse_json(raw)
    except JsonValueError as exc:
        return f"not JSON ({str(exc).removeprefix('invalid JSON: ')})"
    if not isinstance(record, dict):
        return f"not a JSON object but {type(record).__name__}"
    return record


class RecordStream:
    """One JSONL file of records, with its quarantine file beside it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.quarantine_path = path.with_name(path.stem + ".quarantine.jsonl")
        self._handle: IO[bytes] | None = None
        self._last_sync = 0.0
        self._sync_pending: asyncio.TimerHandle | None = None

    # -- loading ---------------------------------------------------------------
    def load(self, *, repair: bool = True) -> Loaded:
        """Every readable record in order. With `repair` (the owner of the file),
        unreadable lines are moved to the quarantine file and cut from this one."""
        loaded = Loaded()
        if not self.path.is_file():
            return loaded
        good: list[bytes] = []
        bad: list[tuple[int, bytes, str]] = []
        for number, raw, parsed in self.scan(_parse):
            if isinstance(parsed, str):
                bad.append((number, raw, parsed))
                continue
            good.append(raw)
            loaded.records.append(parsed)
        if bad and repair:
            self._quarantine(bad)
            self._rewrite(good)
        if bad:
            loaded.quarantined = [BadLine(number, reason) for number, _, reason in bad]
        return loaded

    def scan(self, decode: Callable[[bytes], T | str]) -> Iterator[tuple[int, bytes, T | str]]:
        """Every line but blank ones, streamed, read-only: (its 1-based number, its
        bytes, `decode(bytes)`: the value, or why the line is unreadable). A torn final
        line (no newline: the writer died mid-append, or is appending now) comes last
        as "torn final line (cut)"; `load` cuts it, a reader skips it. Memory stays
        that of one line, whatever the file's size."""
        try:
            handle = self.path.open("rb")
        except FileNotFoundError:
            return
        with handle:
            for number, raw in enumerate(handle, start=1):
                if not raw.endswith(b"\n"):
                    yield number, raw, TORN
                    return
                if raw.isspace():
                    continue  # no record, nothing to keep (the fast path skips it too)
                yield number, raw, decode(raw)

    def _quarantine(self, bad: list[tuple[int, bytes, str]]) -> None:
        with self.quarantine_path.open("ab") as handle:
            for number, raw, reason in bad:
                entry = {"line": number, "reason": reason, "text": raw.decode("utf-8", "replace")}
                handle.write(dumps(entry, ensure_ascii=False).encode() + b"\n")
            handle.flush()
            os.fsync(handle.fileno())

    def _rewrite(self, good: list[bytes]) -> None:
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with tmp.open("wb") as handle:
            handle.writelines(good)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)

    def load_heads(self, *, repair: bool = True) -> tuple[list[RecordHead], list[BadLine]]:
        """The head of every readable record, in order, and the bad lines. Blocks
        of whole lines are decoded at once, straight from a memory map, when every
        line is a JSON object (the usual case); otherwise `load` goes line by
        line, quarantining as it goes."""
        try:
            heads = _decode_heads(self.path)
        except FileNotFoundError:
            return [], []
        if heads is not None:
            return heads, []
        loaded = self.load(repair=repair)
        heads = [RecordHead(*(r.get(name) for name in RecordHead.__struct_fields__))
                 for r in loaded.records]  # fmt: skip
        return heads, loaded.quarantined

    # -- appending -------------------------------------------------------------
    def append(self, record: dict[str, Any]) -> None:
        """Append one record: flushed now, fsynced within a second."""
        line = dumps(record, ensure_ascii=False, default=str).encode("utf-8") + b"\n"
        if self._handle is None:
            self._handle = self.path.open("ab")
        handle = self._handle
        start = handle.tell()
        try:
            handle.write(line)
            handle.flush()
        except OSError:
            self._roll_back(start)
            raise
        now = time.monotonic()
        if now - self._last_sync >= FSYNC_INTERVAL:
            self._sync()
        elif self._sync_pending is None:
            with contextlib.suppress(RuntimeError):  # no running loop: sync at close
                loop = asyncio.get_running_loop()
                self._sync_pending = loop.call_later(FSYNC_INTERVAL, self._sync)

    def _roll_back(self, size: int) -> None:
        # A half-written line must not be followed by more records: drop it now.
        handle, self._handle = self._handle, None
        with contextlib.suppress(OSError):
            if handle is not None:
                handle.close()
        with contextlib.suppress(OSError), self.path.open("r+b") as fix:
            fix.truncate(size)

    def _sync(self) -> None:
        self._sync_pending = None
        if self._handle is not None:
            with contextlib.suppress(OSError):
                os.fsync(self._handle.fileno())
        self._last_sync = time.monotonic()

    def close(self) -> None:
        if self._sync_pending is not None:
            self._sync_pending.cancel()
            self._sync_pending = None
        handle, self._handle = self._handle, None
        if handle is not None:
            try:
                handle.flush()
                os.fsync(handle.fileno())
            finally:
                handle.close()
