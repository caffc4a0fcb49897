"""Finding run folders under the served folders, and what each one is.

Every door's run folder has a `run.json` (its `kind` names the door): a batch's and a
toolcalls report's at the top with `results.jsonl` beside it, a generate run's in its
`.helios/` folder. The summary a door writes at the end (`batch_summary.json`,
`toolcalls_summary.json`, `statistics.json`) adds its totals.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from helios.view.records import RecordIndex
from helios.view.roots import Roots
from helios.view.state import is_running

RUN_FILE = "run.json"
RESULTS = "results.jsonl"
STORE_DIR = ".helios"  # a generate run's engine store
#: the per-trial rows a summary may hold
PER_TRIAL = ("tasks", "rows", "results")
SUMMARIES = ("batch_summary.json", "toolcalls_summary.json", "statistics.json")
DOORS = ("batch", "run", "generate", "toolcalls")
#: how deep under a served folder runs are looked for
MAX_DEPTH = 4
#: files bigger than this are not parsed as a run's JSON (a hostile or damaged file)
MAX_JSON_BYTES = 64 * 1024 * 1024


#: parsed JSON files by (path, size, mtime): a 100,000-trial batch_summary.json is
#: parsed once, not on every poll of the page
_parsed: OrderedDict[
    tuple[str, int, int, tuple[str, ...]], tuple[dict[str, Any] | None, str | None]
] = OrderedDict()
_CACHED = 64
_decode_object = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode


def read_summary(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """A door's summary without its per-trial rows (the table pages through those
    from results.jsonl): the rows are skipped undecoded, so a 100,000-trial summary
    costs its bytes, not a Python object per field."""
    return read_json(path, skip=PER_TRIAL)


def read_json(path: Path, skip: tuple[str, ...] = ()) -> tuple[dict[str, Any] | None, str | None]:
    """The JSON object in `path` (without the keys in `skip`), or None and one line
    saying why not."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None, f"{path.name} is missing"
    except OSError as exc:
        return None, f"{path.name}: {exc.strerror}"
    key = (str(path), stat.st_size, stat.st_mtime_ns, skip)
    if key in _parsed:
        _parsed.move_to_end(key)
        return _parsed[key]
    answer = _parse(path, stat.st_size, skip)
    _parsed[key] = answer
    while len(_parsed) > _CACHED:
        _parsed.popitem(last=False)
    return answer


def _parse(
    path: Path, size: int, skip: tuple[str, ...]
) -> tuple[dict[str, Any] | None, str | None]:
    if size > MAX_JSON_BYTES:
        return None, f"{path.name} is larger than {MAX_JSON_BYTES >> 20} MB"
    try:
        fields = _decode_object(path.read_bytes())
        value = {name: msgspec.json.decode(raw) for name, raw in fields.items() if name not in skip}
    except FileNotFoundError:
        return None, f"{path.name} is missing"
    except OSError as exc:
        return None, f"{path.name}: {exc.strerror}"
    except msgspec.ValidationError:
        return None, f"{path.name}: not a JSON object"
    except msgspec.DecodeError as exc:
        return None, f"{path.name}: not valid JSON ({exc})"
    return value, None


@dataclass(frozen=True)
class RunFolder:
    """A run: `folder` is what the person sees, `store` holds run.json and results."""

    folder: Path
    store: Path

    @property
    def summary_file(self) -> Path | None:
        for name in SUMMARIES:
            if (self.folder / name).is_file():
                return self.folder / name
        return None


def find_runs(roots: Roots) -> list[RunFolder]:
    """Every run folder under the roots (not following symlinks), newest name first."""
    found: dict[Path, RunFolder] = {}
    for root in roots.folders:
        _walk(root, 0, found)
    return sorted(found.values(), key=lambda run: run.folder.name, reverse=True)


def _walk(folder: Path, depth: int, found: dict[Path, RunFolder]) -> None:
    if (folder / RUN_FILE).is_file():
        if folder.name == STORE_DIR:
            found[folder.parent] = RunFolder(folder.parent, folder)
        else:
            found[folder] = RunFolder(folder, folder)
        return
    if (folder / STORE_DIR / RUN_FILE).is_file():
        found[folder] = RunFolder(folder, folder / STORE_DIR)
        return
    if depth >= MAX_DEPTH:
        return
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=False) and not entry.name.startswith("_"):
            _walk(Path(entry.path), depth + 1, found)


def run_status(run: RunFolder, summary: dict[str, Any] | None) -> str:
    if is_running(run.store):
        return "running"
    if summary is None or summary.get("interrupted") or summary.get("aborted"):
        return "interrupted"
    return "done"


def describe(roots: Roots, run: RunFolder, index: RecordIndex) -> dict[str, Any]:
    """One line of the runs list (and the head of a run's page), from `index` as it
    was last refreshed."""
    meta, meta_error = read_json(run.store / RUN_FILE)
    summary_file = run.summary_file
    summary, _ = read_summary(summary_file) if summary_file else (None, None)
    meta = meta or {}
    totals = index.totals.as_dict()
    seconds = meta.get("seconds")
    if summary is not None and isinstance(summary.get("duration_seconds"), int | float):
        seconds = summary["duration_seconds"]
    kind = meta.get("kind")
    if kind not in DOORS:
        kind = "generate" if run.store != run.folder else "batch"
    return {
        "key": roots.key(run.folder),
        "name": run.folder.name,
        "door": kind,
        "model": meta.get("model") if isinstance(meta.get("model"), str) else None,
        "agent": meta.get("agent") if isinstance(meta.get("agent"), str) else None,
        "provider": meta.get("provider") if isinstance(meta.get("provider"), str) else None,
        "created_at": meta.get("created_at") if isinstance(meta.get("created_at"), str) else None,
        "attempts": meta.get("n_attempts") if isinstance(meta.get("n_attempts"), int) else None,
        "seconds": seconds if isinstance(seconds, int | float) else None,
        "status": run_status(run, summary),
        "error": meta_error,
        "pass_at_k": summary.get("pass_at_k") if summary else None,
        **totals,
    }
