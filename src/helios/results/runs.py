"""A run folder read as a comparable run: its tasks, each with its attempts.

Two doors write run folders whose units pass or fail:
- `helios batch`, `helios run` and `ParallelRunner`: `run.json`, `results.jsonl` (one
  `TrialResult` per finished trial) and, once the batch ends, `batch_summary.json`.
  A task is the task folder's name; its attempts are its trials (`-k`).
- `helios toolcalls --output` and `run_concurrent(output_dir=…)`: `run.json`,
  `results.jsonl` (one run of a prompt per line) and `toolcalls_summary.json`. A task
  is a prompt (under its test id); its attempts are its runs, its reward the match rate.

A `helios generate` run keeps rows, not verdicts: it is refused with one line.

Records are streamed with the engine's reader (`RecordStream.scan`), read-only: a
folder being written, or another Helios's, is never changed; of each record only what a
comparison needs is decoded and kept. A damaged line (not JSON, or not a
record of its door) is one line in `problems` naming the file and the line, and the
rest of the run still counts. A trial recorded twice (`--retry-errors`) counts once:
its later line wins, as on a resume.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import msgspec

import helios.engine.retries as retries
from helios.engine.jsonl import TORN, RecordStream
from helios.engine.labels import read_labels
from helios.engine.store import RESULTS_FILE, RUN_FILE
from helios.errors import InputError
from helios.results.folders import MAX_JSON_BYTES, find_runs, run_folder
from helios.safe_json import JsonValueError, parse_json

BATCH_SUMMARY = "batch_summary.json"
TOOLCALLS_SUMMARY = "toolcalls_summary.json"


class NotARun(InputError):
    """A path that is not a run folder `helios compare` can read."""

    kind = "NotARun"


@dataclass(frozen=True, slots=True)
class Attempt:
    """One trial of a task (one run of a prompt)."""

    attempt: int
    passed: bool
    reward: float
    #: "passed", "failed" or "error"
    status: str
    duration: float
    #: None when unknown (no price for the model)
    cost_usd: float | None
    #: the model and agent of the trial, as its record names them (None: not recorded)
    model: str | None = None
    agent: str | None = None


@dataclass
class RunResults:
    """A run folder's verdicts, by task."""

    path: Path
    #: how the run is named in a comparison (the path as given, or under the folder given)
    label: str
    #: "tasks" (`helios batch`/`helios run`) or "toolcalls"
    door: str
    #: run.json's kind: "batch", "run", "toolcalls", …
    kind: str
    model: str | None = None
    agent: str | None = None
    created_at: str | None = None
    #: the run's name and tags (run.json; `helios batch --name --tag`)
    name: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    #: its summary is written: the run ended (else it is running, or was stopped hard)
    finished: bool = False
    #: the run's wall-clock time over all its invocations, when recorded
    wall_seconds: float | None = None
    #: task -> its attempts, in attempt order
    tasks: dict[str, list[Attempt]] = field(default_factory=dict)
    #: damaged lines and unreadable files, one line each (file and line named)
    problems: list[str] = field(default_factory=list)

    @property
    def trials(self) -> int:
        return sum(len(attempts) for attempts in self.tasks.values())


def _read_json(path: Path) -> dict[str, Any]:
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            raise NotARun(f"{path}: larger than {MAX_JSON_BYTES >> 20} MB, not read")
        data = parse_json(path.read_bytes())
    except JsonValueError as exc:
        raise NotARun(f"{path}: {exc}") from None
    except OSError as exc:
        raise NotARun(f"{path}: {exc.strerror or exc}") from None
    if not isinstance(data, dict):
        raise NotARun(f"{path}: not a JSON object but {type(data).__name__}")
    return data


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _seconds(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return None


def load_run(path: Path, label: str | None = None) -> RunResults:
    """The run folder at `path`; NotARun (one line) when it is none, or one of a
    door whose units have no verdict."""
    if not path.exists():
        raise NotARun(f"{path}: no such folder")
    if not path.is_dir():
        raise NotARun(f"{path}: not a folder (give the run folder, which holds {RUN_FILE})")
    found = run_folder(path)
    if found is not None and found.is_generate_store:
        raise NotARun(
            f"{path} is a `helios generate` run: its rows have no pass or fail to compare"
        )
    if not (path / RUN_FILE).is_file():
        raise NotARun(
            f"{path} is not a Helios run folder (no {RUN_FILE}); give a folder that "
            "`helios batch`, `helios run` or `helios toolcalls --output` wrote"
        )
    meta = _read_json(path / RUN_FILE)
    kind = _text(meta.get("kind")) or "batch"
    if kind == "generate":
        raise NotARun(
            f"{path} is a `helios generate` run: its rows have no pass or fail to compare"
        )
    toolcalls = kind == "toolcalls" or (path / TOOLCALLS_SUMMARY).is_file()
    run = RunResults(
        path=path,
        label=label if label is not None else str(path),
        door="toolcalls" if toolcalls else "tasks",
        kind=kind,
        model=_text(meta.get("model")),
        agent=_text(meta.get("agent")),
        created_at=_text(meta.get("created_at")),
    )
    labels, bad_labels = read_labels(meta)
    run.name, run.tags = labels.name, dict(labels.tags)
    run.problems += [f"{path / RUN_FILE}: {line}" for line in bad_labels]
    summary_path = path / (TOOLCALLS_SUMMARY if toolcalls else BATCH_SUMMARY)
    summary: dict[str, Any] = {}
    if summary_path.is_file():
        try:
            summary = _read_json(summary_path)
            run.finished = True
        except NotARun as exc:
            run.problems.append(f"{exc}; its totals are not used")
    # the summary's time, else run.json's (kept across invocations, written as it runs)
    run.wall_seconds = _seconds(summary.get("duration_seconds"))
    if run.wall_seconds is None:
        run.wall_seconds = _seconds(meta.get("seconds"))
    try:
        if toolcalls:
            run.tasks = _toolcall_tasks(path, run.problems)
        elif (path / RESULTS_FILE).exists() or not summary:
            run.tasks = _trial_tasks(path, run.problems)
        else:  # a batch of a Helios that kept no results.jsonl: its summary's rows
            run.tasks = _summary_tasks(summary_path, summary, run.problems)
    except OSError as exc:  # unreadable (permissions, a folder where the file should be)
        raise NotARun(f"{path / RESULTS_FILE}: {exc.strerror or exc}") from None
    if run.model is None and isinstance(summary.get("model"), str):
        run.model = summary["model"]
    return run


class _Usage(msgspec.Struct, gc=False):
    cost_usd: float | None = 0.0


class TrialFacts(msgspec.Struct, gc=False):
    """What a comparison reads of a `TrialResult` line (`helios.tasks.results`): the same
    names and types, decoded and checked by msgspec, so 100,000 records are read in
    seconds and nothing else of them is kept."""

    trial_id: str
    task_name: str
    task_path: str
    attempt: int
    status: Literal["passed", "failed", "error"]
    reward: float = 0.0
    duration: float = 0.0
    usage: _Usage = msgspec.field(default_factory=_Usage)
    #: any JSON: only a string counts (`_text`), so an odd value never skips the trial
    model: object = None
    agent: object = None
    #: a retry's marks (`engine.retries`): the trial it replaces, and which retry it is
    retry_of: object = None
    retry: object = None

    @property
    def slot(self) -> tuple[str, int]:
        """The trial this record counts for, and its retry number (`engine.retries`)."""
        return retries.slot(self.retry_of, self.retry, self.trial_id)


class RunFacts(msgspec.Struct, gc=False):
    """What a comparison reads of a tool-call run's line (`ToolCallDoor.to_record`)."""

    trial_id: str
    status: Literal["passed", "failed", "error"]
    prompt: str
    run_index: int
    passed: bool
    match_rate: float
    test_id: str | None = None
    duration: float = 0.0
    usage: _Usage | None = None


S = TypeVar("S", TrialFacts, RunFacts)


def _records(path: Path, kind: type[S], problems: list[str]) -> Iterator[S]:
    """Every readable record of `path` as `kind`, streamed; a line that is not JSON, or
    not such a record, is one problem naming the file, the line and the field."""
    decoder = msgspec.json.Decoder(kind)

    def decode(raw: bytes) -> S | str:
        try:
            return decoder.decode(raw)
        except msgspec.ValidationError as exc:
            return str(exc).replace(" - at `$.", " at field `")
        except (msgspec.DecodeError, RecursionError) as exc:
            return f"not JSON ({exc})"

    for number, _, value in RecordStream(path).scan(decode):
        if isinstance(value, str):
            reason = value
            if reason == TORN:
                reason = "an unfinished last line (the run is still writing, or was killed)"
            problems.append(f"{path}:{number}: {reason}; skipped")
        else:
            yield value


def _trial_tasks(run_dir: Path, problems: list[str]) -> dict[str, list[Attempt]]:
    latest: dict[str, TrialFacts] = {}
    for trial in _records(run_dir / RESULTS_FILE, TrialFacts, problems):
        slot, n = trial.slot  # a retry counts in place of the trial it ran again
        older = latest.get(slot)
        if older is not None and older.slot[1] > n:
            continue
        latest.pop(slot, None)  # a later line wins, and takes its place
        latest[slot] = trial
    names = _task_keys(latest.values())
    tasks: dict[str, list[Attempt]] = {}
    for trial in latest.values():
        tasks.setdefault(names[trial.task_path], []).append(Attempt(
            attempt=trial.attempt, passed=trial.status == "passed", reward=trial.reward,
            status=trial.status, duration=trial.duration, cost_usd=trial.usage.cost_usd,
            model=_text(trial.model), agent=_text(trial.agent),
        ))  # fmt: skip
    return _ordered(tasks)


def _task_keys(trials: Iterable[TrialFacts]) -> dict[str, str]:
    """task_path -> the name a task is paired by across runs: its folder's name, or,
    when two of the run's tasks share one (`a/hello`, `b/hello`), its path under the
    batch root."""
    paths_by_name: dict[str, set[str]] = {}
    for trial in trials:
        paths_by_name.setdefault(trial.task_name, set()).add(trial.task_path)
    every = sorted({p for paths in paths_by_name.values() for p in paths})
    try:
        root = posixpath.commonpath(every) if len(every) > 1 else ""
    except ValueError:  # absolute and relative paths mixed (not a record Helios wrote)
        root = ""
    keys: dict[str, str] = {}
    for name, paths in paths_by_name.items():
        for task_path in paths:
            if len(paths) == 1:
                keys[task_path] = name
            else:
                keys[task_path] = posixpath.relpath(task_path, root) if root else task_path
    return keys


def _toolcall_tasks(run_dir: Path, problems: list[str]) -> dict[str, list[Attempt]]:
    latest: dict[str, RunFacts] = {}
    for run in _records(run_dir / RESULTS_FILE, RunFacts, problems):
        latest.pop(run.trial_id, None)
        latest[run.trial_id] = run
    tasks: dict[str, list[Attempt]] = {}
    for run in latest.values():
        name = run.prompt if run.test_id is None else f"{run.test_id} · {run.prompt}"
        tasks.setdefault(name, []).append(Attempt(
            attempt=run.run_index + 1, passed=run.passed, reward=run.match_rate,
            status=run.status, duration=run.duration,
            cost_usd=None if run.usage is None else run.usage.cost_usd,
        ))  # fmt: skip
    return _ordered(tasks)


def _summary_tasks(
    path: Path, summary: dict[str, Any], problems: list[str]
) -> dict[str, list[Attempt]]:
    rows = summary.get("tasks")
    tasks: dict[str, list[Attempt]] = {}
    if not isinstance(rows, list):
        problems.append(f"{path}: field tasks: not a list; no trials read")
        return tasks
    for index, row in enumerate(rows):
        try:
            name, status = row["name"], row["status"]
            reward, duration = float(row.get("reward") or 0.0), float(row.get("duration") or 0.0)
            attempt = int(row.get("attempt") or 1)
            if not isinstance(name, str) or status not in ("passed", "failed", "error"):
                raise ValueError("name or status")
        except (TypeError, KeyError, ValueError) as exc:
            problems.append(f"{path}: tasks[{index}]: not a trial row ({exc}); skipped")
            continue
        tasks.setdefault(name, []).append(Attempt(
            attempt=attempt, passed=status == "passed", reward=reward, status=status,
            duration=duration, cost_usd=None,
        ))  # fmt: skip
    return _ordered(tasks)


def _ordered(tasks: dict[str, list[Attempt]]) -> dict[str, list[Attempt]]:
    return {name: sorted(tasks[name], key=lambda a: a.attempt) for name in sorted(tasks)}


@dataclass
class LoadedRuns:
    runs: list[RunResults]
    #: run folders found under a given folder and left out (a generate run), one line each
    skipped: list[str] = field(default_factory=list)


def load_runs(paths: Sequence[Path]) -> LoadedRuns:
    """Every run the paths name, in order: a run folder as itself, a folder of runs as
    the runs under it (labelled by their path under it). NotARun when a path is
    neither, or holds no run."""
    loaded = LoadedRuns(runs=[])
    for given in paths:
        if not given.is_dir() or run_folder(given) is not None:
            loaded.runs.append(load_run(given))
            continue
        found = [run.folder for run in find_runs(given)]
        if not found:
            raise NotARun(
                f"{given} is not a Helios run folder (no {RUN_FILE}) and holds none; give "
                "a folder that `helios batch`, `helios run` or `helios toolcalls --output` "
                "wrote, or a folder of such runs"
            )
        for path in found:
            label = str(given / path.relative_to(given))
            try:
                loaded.runs.append(load_run(path, label))
            except NotARun as exc:
                loaded.skipped.append(f"{exc}; skipped")
    _unique_labels(loaded.runs)
    return loaded


def _unique_labels(runs: list[RunResults]) -> None:
    seen: dict[str, int] = {}
    for run in runs:
        count = seen.get(run.label, 0) + 1
        seen[run.label] = count
        if count > 1:
            run.label = f"{run.label} ({count})"
