"""Finding run folders under the served folders, and what each one is.

Every door's run folder has a `run.json` (its `kind` names the door): a batch's and a
toolcalls report's at the top with `results.jsonl` beside it, a generate run's in its
`.helios/` folder. The summary a door writes at the end (`batch_summary.json`,
`toolcalls_summary.json`, `statistics.json`) adds its totals.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from helios.engine.labels import read_labels
from helios.engine.store import RUN_FILE
from helios.results.folders import MAX_JSON_BYTES, FolderWalk, RunFolder
from helios.text import visible
from helios.view.records import RecordIndex
from helios.view.roots import Roots
from helios.view.state import is_running

RESULTS = "results.jsonl"
#: the per-trial rows a summary may hold
PER_TRIAL = ("tasks", "rows", "results")
SUMMARIES = ("batch_summary.json", "toolcalls_summary.json", "statistics.json")
DOORS = ("batch", "run", "generate", "toolcalls")
#: the run_prefix (run.json's kind) of `helios tasks check`'s runs: check_oracle, check_nop
CHECK_PREFIX = "check_"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


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
    except (msgspec.DecodeError, RecursionError) as exc:
        return None, f"{path.name}: not valid JSON ({exc})"
    return value, None


def summary_file(run: RunFolder) -> Path | None:
    """The summary its door wrote at the end, if it is there."""
    for name in SUMMARIES:
        if (run.folder / name).is_file():
            return run.folder / name
    return None


#: folders the runs list looks at, at most, per walk of the served folders
MAX_FOLDERS = 10_000
#: how long one walk's answer is reused (the list is polled; a new run shows this late)
WALK_SECONDS = 5.0


def find_runs(roots: Roots) -> list[RunFolder]:
    """Every run folder under the roots (not following links), newest name first."""
    return walk_runs(roots)[0]


def walk_runs(roots: Roots) -> tuple[list[RunFolder], bool]:
    """`find_runs`, and whether the walk stopped at MAX_FOLDERS folders."""
    walk = FolderWalk(MAX_FOLDERS)
    found = {run.folder: run for root in roots.folders for run in walk.runs(root)}
    runs = sorted(found.values(), key=lambda run: run.folder.name, reverse=True)
    return runs, walk.truncated


@dataclass
class RunList:
    """The runs list of one viewer: a walk of the served folders is reused for
    WALK_SECONDS (90,000 empty folders cost seconds to walk, and the page polls it)."""

    at: float = -math.inf
    runs: list[RunFolder] = field(default_factory=list)
    truncated: bool = False

    def get(self, roots: Roots) -> tuple[list[RunFolder], bool]:
        if time.monotonic() - self.at >= WALK_SECONDS:
            self.runs, self.truncated = walk_runs(roots)
            self.at = time.monotonic()
        return self.runs, self.truncated


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
    summary_at = summary_file(run)
    summary, _ = read_summary(summary_at) if summary_at else (None, None)
    meta = meta or {}
    totals = index.totals.as_dict()
    seconds = meta.get("seconds")
    if summary is not None and isinstance(summary.get("duration_seconds"), int | float):
        seconds = summary["duration_seconds"]
    kind = meta.get("kind")
    if isinstance(kind, str) and kind.startswith(CHECK_PREFIX):
        kind = "tasks check"  # `helios tasks check`'s oracle and nop runs
    elif kind not in DOORS:
        kind = "generate" if run.is_generate_store else "batch"
    if kind == "generate":  # rows written, not a pass rate
        totals["pass_rate"] = None
        totals["breakdown"] = []
    else:
        del totals["rows_written"]
        if summary is not None and not is_running(run.store):
            # the door's one pass rate (an invalid task counts as failed) once it is done
            for name in ("pass_rate", "raw_pass_rate"):
                if _number(summary.get(name)) is not None:
                    totals[name] = summary[name]
    labels, bad_labels = read_labels(meta)
    tags = labels.tags.items()
    key = roots.key(run.folder)
    number, _, relative = key.partition("/")
    return {
        "key": key,
        "name": run.folder.name,
        # the folder under the served folder's name: runs of one name told apart
        "where": "/".join(part for part in (roots.folders[int(number)].name, relative) if part),
        # a run folder is untrusted: control characters shown as escapes (`\x1b[31m`)
        "title": None if labels.name is None else visible(labels.name, one_line=True),
        "tags": {visible(k, one_line=True): visible(v, one_line=True) for k, v in tags},
        "labels_error": "; ".join(f"run.json {line}" for line in bad_labels) or None,
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
