"""A generate folder's run for one invocation, once the engine's `Run` has opened
and locked it (its config: `datagen.run_config`): what the invocation continues
from (the seed, the reviewed records, the number of the first new batch file); and
how records are read."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helios.datagen.folder import STORE_DIR, batch_files, cut_torn_tail
from helios.datagen.settings import GenerateSettings
from helios.engine.run import Run
from helios.engine.store import RUN_FILE, RunStore
from helios.errors import ConfigError


@dataclass
class RunSession:
    run_dir: Path
    store: RunStore
    seed: int
    first_batch: int
    records: dict[str, dict[str, Any]]
    resumed: bool
    #: batch files without a store (a run Hermes started): their rows get records
    adopt: bool = False


def check_run_name(settings: GenerateSettings) -> None:
    """A folder that holds a run is continued only with --resume (ConfigError)."""
    run_dir = settings.run_dir
    existing = (run_dir / STORE_DIR / RUN_FILE).is_file() or bool(batch_files(run_dir))
    if existing and not settings.resume:
        raise ConfigError(
            f"{run_dir} already holds a run: add --resume to continue it, or choose another "
            "--run_name", field="--run_name",
        )  # fmt: skip


def open_session(run: Run, settings: GenerateSettings) -> RunSession:
    """What this invocation continues from, read under the run's lock: the seed, the
    records (reviewed) and the number of the first new batch file."""
    run_dir, store = settings.run_dir, run.store
    adopt = not run.resumed and bool(batch_files(run_dir))
    metadata = store.metadata()
    seed = settings.seed if settings.seed is not None else int(metadata.get("seed", 0))
    numbers = set(batch_files(run_dir))
    for path in batch_files(run_dir).values():
        cut_torn_tail(path)
    records = review_records(run_dir, store.load_records())
    numbers |= {int(r.get("batch_num", -1)) for r in records.values()}
    first = max(numbers, default=-1) + 1
    return RunSession(run_dir, store, seed, first, records, run.resumed, adopt)


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
            record = {
                **kept,
                "status": "error",
                "error": {"type": problem[0], "message": problem[1], "phase": "record"},
            }
        reviewed[trial_id] = record
    return reviewed


#: what a reviewed record loses with its verdict
_VERDICT_KEYS = frozenset({"status", "reason", "file", "offset", "length", "error"})
