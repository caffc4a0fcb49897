"""Opening a run folder for one invocation: the lock, the engine's store, the seed
and the number of the first new batch file; and how its records are read."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helios.datagen.folder import STORE_DIR, RunLock, batch_files, cut_torn_tail
from helios.datagen.settings import GenerateSettings
from helios.engine.store import RUN_FILE, RunStore, run_metadata, write_json_atomic
from helios.errors import ConfigError


@dataclass
class RunSession:
    run_dir: Path
    store: RunStore
    lock: RunLock
    seed: int
    first_batch: int
    records: dict[str, dict[str, Any]]
    #: earlier invocations' time, for the total duration
    prior_seconds: float
    resumed: bool
    #: batch files without a store (a run Hermes started): their rows get records
    adopt: bool = False

    def close(self) -> None:
        self.store.close()
        self.lock.release()


def _metadata(settings: GenerateSettings, seed: int) -> dict[str, Any]:
    return run_metadata(
        "generate",
        run_name=settings.run_name,
        dataset_file=str(settings.dataset_file),
        model=settings.model,
        distribution=settings.distribution,
        seed=seed,
    )


def open_run(settings: GenerateSettings) -> RunSession:
    """Lock the run folder and open (or create) its store; ConfigError if it is taken."""
    run_dir = settings.run_dir
    store_dir = run_dir / STORE_DIR
    existing = (store_dir / RUN_FILE).is_file() or bool(batch_files(run_dir))
    if existing and not settings.resume:
        raise ConfigError(
            f"{run_dir} already holds a run: add --resume to continue it, or choose another "
            "--run_name", field="--run_name",
        )  # fmt: skip
    store_dir.mkdir(parents=True, exist_ok=True)
    lock = RunLock(store_dir)
    lock.acquire()
    try:
        return _open_locked(settings, run_dir, store_dir, lock)
    except BaseException:
        lock.release()
        raise


def _open_locked(
    settings: GenerateSettings, run_dir: Path, store_dir: Path, lock: RunLock
) -> RunSession:
    resumed = (store_dir / RUN_FILE).is_file()
    adopt = not resumed and bool(batch_files(run_dir))
    if not resumed:
        seed = settings.seed if settings.seed is not None else random.randrange(2**31)
        write_json_atomic(store_dir / RUN_FILE, _metadata(settings, seed))
    store = RunStore.open_existing(store_dir)
    metadata = store.metadata()
    seed = settings.seed if settings.seed is not None else int(metadata.get("seed", 0))
    numbers = set(batch_files(run_dir))
    for path in batch_files(run_dir).values():
        cut_torn_tail(path)
    records = review_records(run_dir, store.load_records())
    numbers |= {int(r.get("batch_num", -1)) for r in records.values()}
    first = max(numbers, default=-1) + 1
    prior = float(metadata.get("seconds", 0.0)) if resumed else 0.0
    return RunSession(run_dir, store, lock, seed, first, records, prior, resumed, adopt)


def review_records(run_dir: Path, records: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The records, with each verdict that does not hold read as a failure (in memory:
    the store is append-only), so `--resume` runs its prompt again:
    - a tombstone of a prompt the model never answered: a discard judges an answer
      (earlier versions wrote one when a prompt's time ran out before any answer);
    - a row no longer in its batch file (the file was removed or cut short)."""
    sizes: dict[str, int] = {}

    def on_disk(record: dict[str, Any]) -> bool:
        name = Path(str(record["file"])).name
        if name not in sizes:
            try:
                sizes[name] = (run_dir / name).stat().st_size
            except OSError:
                sizes[name] = -1
        return int(record["offset"]) + int(record["length"]) <= sizes[name]

    reviewed: dict[str, dict[str, Any]] = {}
    for trial_id, record in records.items():
        status, problem = record.get("status"), None
        if status == "discarded" and not record.get("api_calls"):
            problem = ("NoAnswer", "discarded before the model answered; run again")
        elif status == "ok" and "file" in record and not on_disk(record):
            problem = ("RowMissing", f"its row is no longer in {record['file']}; run again")
        if problem is not None:
            kept = {k: v for k, v in record.items() if k not in _VERDICT_KEYS}
            record = {**kept, "status": "error",
                      "error": {"type": problem[0], "message": problem[1], "phase": "record"}}
        reviewed[trial_id] = record
    return reviewed


#: what a reviewed record loses with its verdict
_VERDICT_KEYS = frozenset({"status", "reason", "file", "offset", "length", "error"})


def save_seconds(session: RunSession, seconds: float) -> None:
    """Keep the run's total time in run.json, for statistics after a resume."""
    path = session.store.run_dir / RUN_FILE
    metadata = session.store.metadata()
    metadata["seconds"] = round(seconds, 3)
    write_json_atomic(path, metadata)
