"""A generate folder's run for one invocation: its `RunConfig` (the engine's `Run`
opens and locks it), then what the invocation continues from (the seed, the
reviewed records, the number of the first new batch file); and how records are
read."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helios.datagen.folder import STORE_DIR, batch_files, cut_torn_tail
from helios.datagen.settings import GenerateSettings
from helios.engine.config import ConcurrencyConfig, OutputsConfig, RunConfig, SandboxConfig
from helios.engine.run import Run
from helios.engine.saved_config import dump_config
from helios.engine.store import RUN_FILE, RunStore
from helios.errors import ConfigError
from helios.secrets import public_url


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


#: the settings `helios generate --resume` takes from the run when not given again, by
#: their flag's name (the system prompt and prefill are not kept: pass them again;
#: --max_samples is this invocation's: a resume without it runs the whole dataset)
RESUMABLE = ("batch_size", "base_url", "routing", "provider", "max_turns", "num_workers",
             "concurrency", "max_tokens", "reasoning_effort", "reasoning_disabled",
             "providers_allowed", "providers_ignored", "providers_order", "provider_sort",
             "keep_no_reasoning", "image", "prompt_timeout", "prices",
             "distributions_file", "executor", "ray_address")  # fmt: skip


def resumable_settings(settings: GenerateSettings) -> dict[str, Any]:
    """What run.json keeps for `--resume` (no key; the endpoint without its userinfo)."""
    kept: dict[str, Any] = {}
    for name in RESUMABLE:
        value = getattr(settings, name)
        if isinstance(value, list):
            value = ",".join(value)
        elif isinstance(value, Path):
            value = str(value.absolute())
        kept[name] = value
    if settings.base_url:
        kept["base_url"] = public_url(settings.base_url)
    return kept


def run_config(settings: GenerateSettings) -> RunConfig:
    """The engine's run for a generate folder: `<run_name>/.helios/`, resumed by name."""
    s = settings
    seed = s.seed if s.seed is not None else random.randrange(2**31)  # recorded if new
    return RunConfig(
        kind="generate",
        concurrency=ConcurrencyConfig(
            in_flight=s.in_flight, retry_errors=True,
            executor="ray" if s.executor == "ray" else "local", ray_address=s.ray_address,
        ),
        sandbox=SandboxConfig(provider=s.provider),
        outputs=OutputsConfig(fixed=s.run_dir / STORE_DIR),
        recorded={
            "run_name": s.run_name, "dataset_file": str(s.dataset_file.absolute()),
            "model": s.model, "distribution": s.distribution, "seed": seed,
            "settings": resumable_settings(s),
        },
        config={"settings": dump_config(s)},
        labels=s.labels,
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
