"""The run store: one writer, append-only record streams, a folder per unit.

Crash invariants (kill -9 at any instant; see docs/design/invariants.md):
- a unit is complete iff the `results` stream holds a readable line with its id;
- its files are written before that line, so a complete unit has its files;
- a torn last line is cut on open (that unit simply runs again); any other bad
  line is quarantined and reported, and the records after it still count;
- a folder without a line is a leftover of an unfinished unit: it is moved
  aside under `_incomplete/` (the last KEEP_LEFTOVERS per unit are kept);
- JSON documents (result.json, summaries, checkpoints) are replaced atomically;
- one process writes a run folder at a time: an exclusive lock on `.lock`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
import shutil
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from helios.engine.jsonl import BadLine, RecordHead, RecordStream
from helios.errors import ConfigError, InputError
from helios.safe_json import JsonValueError, dumps, parse_json
from helios.settings import current as helios_settings
from helios.version import __version__

RESULTS_FILE = "results.jsonl"
RUN_FILE = "run.json"
LOCK_FILE = ".lock"
INCOMPLETE_DIR = "_incomplete"
#: leftovers kept per unit folder under _incomplete/; older ones are deleted
KEEP_LEFTOVERS = 3


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON via a temp file and os.replace: readers see old or new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as handle:
            handle.write(dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def run_metadata(kind: str, **fields: Any) -> dict[str, Any]:
    """The head of every door's `run.json`: one id scheme (a uuid4: sandbox labels
    and names are per run), when, which Helios, what kind of run, the door's own
    fields, then the `HELIOS_*` settings that are set (`helios.settings`: a URL
    without its password) and the facts of the host it ran on."""
    return {
        "run_id": uuid.uuid4().hex,
        "created_at": datetime.now(UTC).isoformat(),
        "helios_version": __version__,
        "kind": kind,
        **fields,
        "helios_settings": helios_settings().recorded(),
        "host": {
            "python": platform.python_version(),
            "platform": platform.platform(terse=True),
            "machine": platform.machine(),
            "cpus": os.cpu_count() or 1,
        },
    }


def new_run_dir(output_dir: Path, prefix: str) -> Path:
    """`OUTPUT/<prefix>_YYYYMMDD_HHMMSS`, with a suffix if that second is taken."""
    stamp = datetime.now().strftime("%Y%m%d_%H%M%S")
    candidate = output_dir / f"{prefix}_{stamp}"
    n = 1
    while candidate.exists():
        n += 1
        candidate = output_dir / f"{prefix}_{stamp}_{n}"
    return candidate


class RunInUse(InputError):
    """Another process holds the run folder's lock."""

    kind = "RunInUse"


class RunStore:
    def __init__(self, run_dir: Path, *, readonly: bool = False) -> None:
        self.run_dir = run_dir
        self.readonly = readonly
        self.results = RecordStream(run_dir / RESULTS_FILE)
        self._streams: dict[str, RecordStream] = {"results": self.results}
        self._lock: IO[str] | None = None
        #: bad lines found when loading the results (reported by the door)
        self.quarantined: list[BadLine] = []
        #: leftovers deleted to keep _incomplete/ bounded
        self.pruned: list[Path] = []
        #: this invocation wrote run.json (`open_or_create`)
        self.created = False

    @property
    def results_path(self) -> Path:
        return self.results.path

    # -- opening -------------------------------------------------------------
    @classmethod
    def create(cls, run_dir: Path, metadata: dict[str, Any]) -> RunStore:
        run_dir.mkdir(parents=True, exist_ok=False)
        store = cls(run_dir)
        store._acquire()
        write_json_atomic(run_dir / RUN_FILE, metadata)
        return store

    @classmethod
    def create_new(cls, parent: Path, prefix: str, metadata: dict[str, Any]) -> RunStore:
        """A new `<parent>/<prefix>_YYYYMMDD_HHMMSS` run, claimed by its own mkdir:
        two runs started in the same second (two reruns of one run) each get their own."""
        for _ in range(100):
            try:
                return cls.create(new_run_dir(parent, prefix), metadata)
            except FileExistsError:
                continue  # another process took that name between the check and the mkdir
        raise InputError(f"cannot make a new run folder under {parent}: every name is taken")

    @classmethod
    def open_or_create(
        cls, run_dir: Path, metadata: Callable[[], dict[str, Any]], *, create: bool
    ) -> RunStore:
        """The run in `run_dir`, locked before anything in it is read: resumed when
        its run.json exists, else (with `create`) started there with `metadata()`.
        `store.created` says which."""
        if create:
            run_dir.mkdir(parents=True, exist_ok=True)
        elif not (run_dir / RUN_FILE).is_file():
            raise FileNotFoundError(f"{run_dir} is not a Helios run folder (no {RUN_FILE})")
        store = cls(run_dir)
        store._acquire()
        try:
            if not (run_dir / RUN_FILE).is_file():
                write_json_atomic(run_dir / RUN_FILE, metadata())
                store.created = True
        except BaseException:
            store.close()
            raise
        return store

    @classmethod
    def open_existing(cls, run_dir: Path, *, readonly: bool = False) -> RunStore:
        if not (run_dir / RUN_FILE).is_file():
            raise FileNotFoundError(f"{run_dir} is not a Helios run folder (no {RUN_FILE})")
        store = cls(run_dir, readonly=readonly)
        if not readonly:
            store._acquire()
        return store

    def _acquire(self) -> None:
        handle = (self.run_dir / LOCK_FILE).open("a+", encoding="utf-8")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            owner = handle.read().strip() or "unknown"
            handle.close()
            raise RunInUse(
                f"{self.run_dir} is in use by another Helios process (pid {owner}); "
                "wait for it to finish or stop it first"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._lock = handle

    def metadata(self) -> dict[str, Any]:
        data = json.loads((self.run_dir / RUN_FILE).read_text("utf-8"))
        return data if isinstance(data, dict) else {}

    def check_settings(self, current: Mapping[str, Any], *, force: bool = False) -> None:
        """Refuse to resume with settings that change results (unless `force`)."""
        stored = self.metadata()
        for key, value in current.items():
            if key in stored and stored[key] != value and not force:
                raise ConfigError(
                    f"{self.run_dir} was run with {key}={stored[key]!r}, not {value!r}: "
                    "resuming would mix two runs (use the same settings, or --force)",
                    field=key,
                )

    # -- records ---------------------------------------------------------------
    def stream(self, name: str) -> RecordStream:
        """Another record stream of this run (`<name>.jsonl`)."""
        if name not in self._streams:
            self._streams[name] = RecordStream(self.run_dir / f"{name}.jsonl")
        return self._streams[name]

    def load_records(self) -> dict[str, dict[str, Any]]:
        """Complete records by unit id (a later line wins); quarantines bad lines."""
        loaded = self.results.load(repair=not self.readonly)
        self.quarantined = loaded.quarantined
        return {str(r["trial_id"]): r for r in loaded.records if "trial_id" in r}

    def load_index(self) -> dict[str, RecordHead]:
        """Complete records' heads by unit id (a later line wins): what resume
        needs, at a cost that grows with the number of records, not their size."""
        heads, self.quarantined = self.results.load_heads(repair=not self.readonly)
        index: dict[str, RecordHead] = {}
        for head in heads:
            tid = head.trial_id
            if tid is not None:
                index[tid if isinstance(tid, str) else str(tid)] = head
        return index

    def recorded_spends(self) -> list[object]:
        """Every record line's `spend` (`engine.budget`), superseded lines included:
        what the run has spent so far, as its records keep it."""
        heads, _ = self.results.load_heads(repair=False)
        return [head.spend for head in heads]

    def read_records(self, ids: set[str]) -> dict[str, dict[str, Any]]:
        """The full records of `ids` (a later line wins), streamed from the file."""
        found: dict[str, dict[str, Any]] = {}
        if not ids or not self.results_path.is_file():
            return found
        with self.results_path.open("rb") as handle:
            for raw in handle:
                if not raw.endswith(b"\n"):
                    break
                try:
                    record = parse_json(raw)
                except JsonValueError:
                    continue
                if isinstance(record, dict) and str(record.get("trial_id")) in ids:
                    found[str(record["trial_id"])] = record
        return found

    def append(self, record: dict[str, Any]) -> None:
        """Mark a unit complete: its files must already be written."""
        if self.readonly:
            raise PermissionError(f"{self.run_dir} was opened read-only")
        self.results.append(record)

    # -- unit folders ----------------------------------------------------------
    def trial_dir(self, folder: str) -> Path:
        return self.run_dir / folder

    def clear_leftover(self, folder: str) -> Path | None:
        """Move an unfinished unit's folder aside (the last few are kept as evidence)."""
        path = self.trial_dir(folder)
        if not path.exists():
            return None
        aside_root = self.run_dir / INCOMPLETE_DIR
        aside_root.mkdir(exist_ok=True)
        base = folder.replace("/", "__")
        taken = sorted(
            (int(p.suffix[1:]), p)
            for p in aside_root.glob(f"{base}.*")
            if p.suffix[1:].isdigit() and p.stem == base
        )
        number = taken[-1][0] + 1 if taken else 1
        target = aside_root / f"{base}.{number}"
        shutil.move(str(path), str(target))
        for _, old in taken[: max(0, len(taken) + 1 - KEEP_LEFTOVERS)]:
            shutil.rmtree(old, ignore_errors=True)
            self.pruned.append(old)
        return target

    # -- closing ---------------------------------------------------------------
    def flush(self) -> None:
        for stream in self._streams.values():
            stream.close()

    def close(self) -> None:
        self.flush()
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.close()  # closing the descriptor releases the flock
