"""`helios export RUN --format harbor`: a task run written as a Harbor job folder.

A run of `helios batch` or `helios run` becomes the folder Harbor (0.25) writes for a
job, so that tools built on Harbor's outputs (its viewer, its result loaders) read it:

    OUT/config.json        the job's JobConfig
    OUT/result.json        the job's JobResult (stats by agent, model and dataset;
                           its trial results are in the trial folders, as Harbor
                           writes them)
    OUT/<trial_name>/config.json   the trial's TrialConfig
    OUT/<trial_name>/result.json   the trial's TrialResult
    OUT/<trial_name>/agent/        the agent's logs, with agent/trajectory.json (ATIF)
    OUT/<trial_name>/verifier/     the verifier's output and reward file
    OUT/<trial_name>/artifacts/    collected artifacts; steps/<name>/… for a
                                   multi-step task

What maps to what is in docs/outputs.md ("Harbor job folders"). The run folder is only
read. Records are streamed: a damaged line is one problem naming the file and the line,
and the rest exports. Files are copied without following any link (a link is left out
and named), and every registered secret, and every key in the environment, is replaced
by "[REDACTED]" in what is written. The folder is built beside OUT under a temporary
name and renamed into place: an existing OUT is refused unless `force`, and then
replaced whole only once the new one is complete.
"""

from __future__ import annotations

import os
import re
import secrets as random_names
import shutil
import stat
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import ValidationError

import helios.engine.retries as retries
from helios.atomic_write import write_text_atomic
from helios.engine.jsonl import TORN, RecordStream
from helios.engine.metrics import pass_at_k_table
from helios.engine.store import RESULTS_FILE, RUN_FILE
from helios.errors import InputError
from helios.failures import ErrorInfo
from helios.results.runs import BATCH_SUMMARY, NotARun, _read_json
from helios.safe_json import dumps
from helios.secrets import redact_value, register_secret, registered
from helios.tasks.results import TrialResult

#: the Harbor release whose models these files are checked against (tests/test_harbor_export.py)
HARBOR_VERSION = "0.25"
#: run.json kinds whose records are task trials
TASK_KINDS = ("batch", "run")
#: a trial folder's parts that are copied (Harbor's trial folder has the same names)
COPIED = ("agent", "verifier", "artifacts", "steps")
#: sandbox providers Harbor has under the same name (its EnvironmentType)
HARBOR_ENVIRONMENTS = frozenset({"docker", "daytona", "modal", "e2b", "runloop", "podman"})
#: an environment variable whose value is a secret, by its name
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$", re.IGNORECASE)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_CHUNK = 1 << 20
REDACTED = b"[REDACTED]"


class NotATaskRun(InputError):
    """A run folder that has no task trials to export as a Harbor job."""

    kind = "NotATaskRun"


@dataclass
class HarborExport:
    """What an export wrote: the job folder, its trials, and what was left out."""

    target: Path
    trials: int = 0
    #: damaged record lines, links left out, unreadable trial folders: one line each
    problems: list[str] = field(default_factory=list)


def register_environment_secrets(environ: Mapping[str, str]) -> None:
    """Every value of a variable named like a key (`*_API_KEY`, `*_TOKEN`, …) becomes
    a secret: the export runs in a process of its own, which saw no key registered."""
    for name, value in environ.items():
        if _SECRET_NAME.search(name):
            register_secret(value)


def export_harbor(
    run_dir: Path,
    output: Path | None = None,
    *,
    force: bool = False,
    environ: Mapping[str, str] | None = None,
) -> HarborExport:
    """Write the task run at `run_dir` as a Harbor job folder at `output` (default:
    RUN/export/harbor/<run folder's name>). NotATaskRun, NotARun or InputError (one
    line) when the run cannot be exported or `output` exists without `force`."""
    run_dir = Path(run_dir)
    meta = _task_run(run_dir)
    register_environment_secrets(os.environ if environ is None else environ)
    target = Path(output) if output is not None else run_dir / "export" / "harbor" / run_dir.name
    _check_target(run_dir, target, force)
    report = HarborExport(target=target)
    trials, superseded = _read_trials(run_dir / RESULTS_FILE, report.problems)
    summary = _summary(run_dir, report.problems)
    job = _Job(run_dir, target, meta, trials, summary, superseded)
    building = target.parent / f".{target.name}.tmp-{os.getpid()}-{random_names.token_hex(4)}"
    target.parent.mkdir(parents=True, exist_ok=True)
    building.mkdir()
    try:
        for trial in trials:
            job.write_trial(trial, building, report.problems)
        _write_json(building / "config.json", job.config())
        _write_json(building / "result.json", job.result())
        _swap_into_place(building, target)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    report.trials = len(trials)
    return report


# -- reading the run ----------------------------------------------------------------
def _task_run(run_dir: Path) -> dict[str, Any]:
    if not run_dir.is_dir():
        raise NotARun(f"{run_dir}: no such run folder")
    if not (run_dir / RUN_FILE).is_file():
        if (run_dir / ".helios" / RUN_FILE).is_file():
            raise NotATaskRun(_generate_line(run_dir))
        raise NotARun(f"{run_dir} is not a Helios run folder (no {RUN_FILE})")
    meta = _read_json(run_dir / RUN_FILE)
    kind = meta.get("kind") if isinstance(meta.get("kind"), str) else "batch"
    if kind == "generate":
        raise NotATaskRun(_generate_line(run_dir))
    if kind not in TASK_KINDS:
        raise NotATaskRun(
            f"{run_dir} is a `helios {kind}` run; --format harbor exports a task run "
            "(`helios batch` or `helios run`)"
        )
    return meta


def _generate_line(run_dir: Path) -> str:
    return (
        f"{run_dir} is a `helios generate` run; --format harbor exports a task run "
        "(`helios batch` or `helios run`): use --format sharegpt, openai or parquet"
    )


def _read_trials(path: Path, problems: list[str]) -> tuple[list[TrialResult], int]:
    """The run's trials, the later line of a trial recorded twice winning (a rerun of
    an errored trial), as a trial's newest retry does (`--retry-failed-below`), and how
    many lines such a later line replaced."""

    def decode(raw: bytes) -> TrialResult | str:
        try:
            return TrialResult.model_validate_json(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            if first["type"] == "json_invalid":
                return "not JSON"
            return f"not a trial record (field {where or '?'}: {first['msg']})"

    latest: dict[str, TrialResult] = {}
    superseded = 0
    for number, _, value in RecordStream(path).scan(decode):
        if isinstance(value, str):
            reason = value
            if reason == TORN:
                reason = "an unfinished last line (the run is still writing, or was killed)"
            problems.append(f"{path}:{number}: {reason}; skipped")
            continue
        key, n = retries.slot(value.retry_of, value.retry, value.trial_id)
        older = latest.get(key)
        if older is not None:
            superseded += 1
            if retries.slot(older.retry_of, older.retry, older.trial_id)[1] > n:
                continue  # an older retry written after a newer one
            del latest[key]
        latest[key] = value
    return list(latest.values()), superseded


def _summary(run_dir: Path, problems: list[str]) -> dict[str, Any] | None:
    path = run_dir / BATCH_SUMMARY
    if not path.is_file():
        return None
    try:
        return _read_json(path)
    except NotARun as exc:
        problems.append(f"{exc}; the job's totals come from the records alone")
        return None


# -- the output folder --------------------------------------------------------------
def _check_target(run_dir: Path, target: Path, force: bool) -> None:
    run_real, target_real = run_dir.resolve(), target.resolve()
    if target_real == run_real or run_real.is_relative_to(target_real):
        raise InputError(f"{target}: the output would replace the run itself; give another -o")
    if target_real.is_relative_to(run_real) and not target_real.is_relative_to(run_real / "export"):
        # inside a trial's folder, the copy would copy itself
        raise InputError(
            f"{target} is inside the run folder; give a folder outside it, or one under "
            f"{run_dir / 'export'}"
        )
    if target.is_symlink():
        raise InputError(f"{target} is a link; give a real folder as -o")
    if target.exists() and not force:
        raise InputError(f"{target} exists; give --force to replace it, or another -o")
    if target.exists() and not target.is_dir():
        raise InputError(f"{target} exists and is not a folder; not replaced")


def _swap_into_place(building: Path, target: Path) -> None:
    """`building` becomes `target`; an old `target` is removed only after the rename."""
    if not target.exists():
        building.rename(target)
        return
    old = target.parent / f".{target.name}.old-{random_names.token_hex(4)}"
    target.rename(old)
    try:
        building.rename(target)
    except OSError:
        old.rename(target)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _write_json(path: Path, value: Any) -> None:
    write_text_atomic(path, dumps(redact_value(value), indent=4) + "\n")


def _safe_name(text: str) -> str:
    return _UNSAFE.sub("-", text).strip("-._")[:32].rstrip("-_") or "task"


def _inside(run_dir: Path, folder: str) -> Path | None:
    """`run_dir/folder` when `folder` is a plain relative path and no part of it is a
    link; else None (a record naming a folder outside the run is not followed)."""
    parts = PurePosixPath(folder).parts
    if not parts or PurePosixPath(folder).is_absolute() or ".." in parts:
        return None
    here = run_dir
    for part in parts:
        here = here / part
        try:
            if not stat.S_ISDIR(os.lstat(here).st_mode):
                return None
        except OSError:
            return None
    return here


def _copy_tree(source: Path, dest: Path, problems: list[str]) -> None:
    """Regular files and folders under `source`, never through a link (a link is
    named in `problems` and left out), secrets redacted."""
    try:
        entries = sorted(os.scandir(source), key=lambda entry: entry.name)
    except OSError as exc:
        problems.append(f"{source}: {exc.strerror or exc}; not copied")
        return
    dest.mkdir(parents=True, exist_ok=True)
    for entry in entries:
        path = Path(entry.path)
        if entry.is_symlink():
            problems.append(f"{path}: a link; not copied")
        elif entry.is_dir(follow_symlinks=False):
            _copy_tree(path, dest / entry.name, problems)
        elif entry.is_file(follow_symlinks=False):
            _copy_file(path, dest / entry.name, problems)
        else:
            problems.append(f"{path}: not a regular file; not copied")


def _copy_file(source: Path, dest: Path, problems: list[str]) -> None:
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        problems.append(f"{source}: {exc.strerror or exc}; not copied")
        return
    with os.fdopen(fd, "rb") as reader, dest.open("wb") as writer:
        for piece in _redacted(reader.read, [s.encode() for s in registered()]):
            writer.write(piece)


def _redacted(read: Any, secrets: list[bytes]) -> Iterator[bytes]:
    """The stream `read` gives, in pieces, each secret replaced; a secret split across
    two reads is still found (the last len-1 bytes wait for the next read)."""
    keep = max((len(s) for s in secrets), default=1) - 1
    carry = b""
    while True:
        chunk = read(_CHUNK)
        if not chunk:
            break
        buffer = carry + chunk
        for secret in secrets:
            buffer = buffer.replace(secret, REDACTED)
        cut = len(buffer) - keep
        if cut <= 0:
            carry = buffer
            continue
        yield buffer[:cut]
        carry = buffer[cut:]
    for secret in secrets:
        carry = carry.replace(secret, REDACTED)
    if carry:
        yield carry


# -- the mapping --------------------------------------------------------------------
def _uuid(value: object, namespace: uuid.UUID, name: str) -> uuid.UUID:
    if isinstance(value, str) and re.fullmatch(r"[0-9a-fA-F]{32}", value):
        return uuid.UUID(value)
    return uuid.uuid5(namespace, name)


def _time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    # a time without a zone is UTC (Helios writes UTC); naive and aware never mix
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _exception(error: ErrorInfo | None, at: str | None) -> dict[str, Any] | None:
    if error is None:
        return None
    return {
        "exception_type": error.type,
        "exception_message": error.message,
        "exception_traceback": error.detail or "",
        "occurred_at": at,
    }


def _model_info(model: str | None) -> dict[str, Any] | None:
    if not model:
        return None
    provider, slash, _ = model.partition("/")
    return {"name": model, "provider": provider if slash else None}


class _Job:
    """One run's mapping onto Harbor's job, trial and stats models."""

    def __init__(
        self,
        run_dir: Path,
        target: Path,
        meta: dict[str, Any],
        trials: list[TrialResult],
        summary: dict[str, Any] | None,
        superseded: int,
    ) -> None:
        self.run_dir, self.target, self.meta = run_dir, target, meta
        self.trials, self.summary, self.superseded = trials, summary, superseded
        self.id = _uuid(meta.get("run_id"), uuid.NAMESPACE_URL, f"helios:{run_dir.resolve()}")
        name = meta.get("name")
        self.name = name if isinstance(name, str) and name else target.name
        settings = meta.get("agent_settings")
        self.agent_kwargs = settings if isinstance(settings, dict) else {}
        self.provider = str(meta.get("provider") or (trials[0].provider if trials else "docker"))
        self.datasets = self._dataset_roots()
        self.names = {trial.trial_id: self._trial_name(trial) for trial in trials}
        self.now = datetime.now().astimezone()

    # the job --------------------------------------------------------------------------
    def _dataset_roots(self) -> list[Path]:
        given = self.meta.get("task_paths")
        if isinstance(given, list):
            roots = [Path(p) for p in given if isinstance(p, str)]
        else:
            roots = sorted({Path(trial.task_path).parent for trial in self.trials})
        return roots

    def source(self, trial: TrialResult) -> str | None:
        """The dataset a trial's task came from, as Harbor names it (its folder's
        name); None for a task given by itself (Harbor's "adhoc")."""
        task = Path(trial.task_path)
        for root in self.datasets:
            if task != root and task.is_relative_to(root):
                return root.name
        return None

    def _environment(self) -> dict[str, Any]:
        if self.provider in HARBOR_ENVIRONMENTS:
            return {"type": self.provider}
        # no Harbor environment of this name: Harbor would refuse to rerun it rather
        # than run it in docker
        return {"import_path": f"helios.environments.{self.provider}",
                "kwargs": {"helios_provider": self.provider}}  # fmt: skip

    def _agents(self) -> list[dict[str, Any]]:
        pairs = dict.fromkeys((trial.agent, trial.model) for trial in self.trials)
        if not pairs:
            agent = self.meta.get("agent")
            model = self.meta.get("model")
            pairs = {(str(agent or "oracle"), model if isinstance(model, str) else None): None}
        return [{"name": agent, "model_name": model, "kwargs": self.agent_kwargs}
                for agent, model in pairs]  # fmt: skip

    def config(self) -> dict[str, Any]:
        attempts = self.meta.get("n_attempts")
        concurrent = self.meta.get("n_concurrent")
        tasks = [{"path": str(root)} for root in self.datasets if (root / "task.toml").is_file()]
        return {
            "job_name": self.name,
            "jobs_dir": str(self.target.parent),
            # run.json's -k, else the highest attempt recorded
            "n_attempts": (
                attempts
                if isinstance(attempts, int) and attempts >= 1
                else max((trial.attempt for trial in self.trials), default=1)
            ),
            "timeout_multiplier": 1.0,
            "n_concurrent_trials": (
                concurrent if isinstance(concurrent, int) and concurrent >= 1 else 4
            ),
            "environment": self._environment(),
            "agents": self._agents(),
            "datasets": [
                {"path": str(root)} for root in self.datasets if not (root / "task.toml").is_file()
            ],
            "tasks": tasks,
        }

    def started(self) -> datetime:
        """The job's start: run.json's, else its first trial's, else now."""
        started = _time(self.meta.get("created_at"))
        begins = [t for t in (_time(trial.started_at) for trial in self.trials) if t]
        return started or min(begins, default=None) or self.now

    def result(self) -> dict[str, Any]:
        started = self.started()
        ends = [t for t in (_time(trial.finished_at) for trial in self.trials) if t]
        last = max(ends, default=None)
        finished = last or started if self.summary is not None else None
        not_run = self.summary.get("not_run") if self.summary else 0
        pending = not_run if isinstance(not_run, int) and not_run > 0 else 0
        return {
            "id": str(self.id),
            "started_at": _iso(started),
            "updated_at": _iso(last or started),
            "finished_at": _iso(finished),
            "n_total_trials": len(self.trials) + pending,
            "stats": self._stats(pending),
        }

    def _stats(self, pending: int) -> dict[str, Any]:
        evals: dict[str, dict[str, Any]] = {}
        groups: dict[str, list[TrialResult]] = {}
        n_input = n_cache = n_output = 0
        costs = [trial.usage.cost_usd for trial in self.trials]
        errored = cancelled = 0
        for trial in self.trials:
            key = (
                f"{trial.agent}__{trial.model}__{self.source(trial) or 'adhoc'}"
                if trial.model
                else f"{trial.agent}__{self.source(trial) or 'adhoc'}"
            )
            groups.setdefault(key, []).append(trial)
            usage = trial.usage
            n_input += usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
            n_cache += usage.cache_read_tokens
            n_output += usage.output_tokens
            error = trial.error or trial.agent_error
            if error is not None:
                errored += 1
                cancelled += error.type == "CancelledError"
        for key, group in groups.items():
            evals[key] = self._eval(group)
        known = [cost for cost in costs if cost is not None]
        return {
            "n_completed_trials": len(self.trials),
            "n_errored_trials": errored,
            "n_running_trials": 0,
            "n_pending_trials": pending,
            "n_cancelled_trials": cancelled,
            "n_retries": self.superseded,
            "evals": evals,
            "n_input_tokens": n_input if self.trials else None,
            "n_cache_tokens": n_cache if self.trials else None,
            "n_output_tokens": n_output if self.trials else None,
            "cost_usd": sum(known) if known else None,
        }

    def _eval(self, group: list[TrialResult]) -> dict[str, Any]:
        rewards = [self.rewards(trial) for trial in group]
        reward_stats: dict[str, dict[float, list[str]]] = {}
        exception_stats: dict[str, list[str]] = {}
        for trial, reward in zip(group, rewards, strict=True):
            name = self.names[trial.trial_id]
            for key, value in (reward or {}).items():
                reward_stats.setdefault(key, {}).setdefault(value, []).append(name)
            error = trial.error or trial.agent_error
            if error is not None:
                exception_stats.setdefault(error.type, []).append(name)
        passes: dict[str, list[bool]] = {}
        for trial in group:
            passes.setdefault(trial.task_path, []).append(trial.passed)
        table = pass_at_k_table(passes)
        return {
            "n_trials": sum(reward is not None for reward in rewards),
            "n_errors": sum((t.error or t.agent_error) is not None for t in group),
            "metrics": [_mean(rewards)],
            "pass_at_k": {int(k.removeprefix("pass@")): v for k, v in table.items()},
            "reward_stats": reward_stats,
            "exception_stats": exception_stats,
        }

    # a trial --------------------------------------------------------------------------
    def _trial_name(self, trial: TrialResult) -> str:
        return f"{_safe_name(trial.task_name)}__{trial.trial_id}"

    @staticmethod
    def rewards(trial: TrialResult) -> dict[str, float] | None:
        """The verifier's rewards, None when it produced none (an error before scoring,
        or a verifier that wrote no reward file): Harbor's verifier_result."""
        if trial.rewards:
            return dict(trial.rewards)
        if trial.status == "error" or trial.error is not None:
            return None
        return {"reward": trial.reward}  # a record of a Helios that kept no rewards dict

    def trial_config(self, trial: TrialResult, name: str) -> dict[str, Any]:
        source = self.source(trial)
        return {
            "task": {"path": trial.task_path, "source": source},
            "trial_name": name,
            "trials_dir": str(self.target),
            "timeout_multiplier": 1.0,
            "agent": {"name": trial.agent, "model_name": trial.model, "kwargs": self.agent_kwargs},
            "environment": self._environment(),
            "job_id": str(self.id),
        }

    def trial_result(self, trial: TrialResult, name: str, checksum: str) -> dict[str, Any]:
        started, finished = _time(trial.started_at), _time(trial.finished_at)
        # when the error was recorded: the trial's end (a record without readable times:
        # the job's start)
        occurred = _iso(finished or started or self.started())
        timings = trial.timings
        phases: dict[str, Any] = {}
        # Helios keeps each phase's length; they run one after another from the start
        clock = started
        for phase, seconds in (
            ("environment_setup", timings.environment),
            ("agent_execution", timings.agent),
            ("verifier", timings.verifier),
        ):
            if clock is None:
                phases[phase] = None
                continue
            end = clock + timedelta(seconds=max(0.0, seconds))
            phases[phase] = {"started_at": _iso(clock), "finished_at": _iso(end)}
            clock = end
        usage = trial.usage
        rewards = self.rewards(trial)
        return {
            "id": str(uuid.uuid5(self.id, trial.trial_id)),
            "task_name": trial.task_name,
            "trial_name": name,
            "trial_uri": (self.target / name).resolve().as_uri(),
            "task_id": {"path": trial.task_path},
            "source": self.source(trial),
            "task_checksum": checksum,
            "config": self.trial_config(trial, name),
            "agent_info": {
                "name": trial.agent,
                "version": str(self.meta.get("helios_version") or "unknown"),
                "model_info": _model_info(trial.model),
            },
            "agent_result": {
                "n_input_tokens": usage.input_tokens
                + usage.cache_read_tokens
                + usage.cache_write_tokens,
                "n_cache_tokens": usage.cache_read_tokens,
                "n_output_tokens": usage.output_tokens,
                "cost_usd": usage.cost_usd,
                "metadata": {
                    "helios_trial_id": trial.trial_id,
                    "helios_status": trial.status,
                    "turns": trial.turns,
                    "model_calls": usage.calls,
                    "reasoning_tokens": usage.reasoning_tokens,
                },
            },
            "verifier_result": None if rewards is None else {"rewards": rewards},
            "exception_info": _exception(trial.error or trial.agent_error, occurred),
            "started_at": _iso(started),
            "finished_at": _iso(finished),
            **phases,
            "step_results": None
            if trial.steps is None
            else [
                {
                    "step_name": step.name,
                    "verifier_result": (
                        None
                        if step.reward is None
                        else {"rewards": dict(step.rewards) or {"reward": step.reward}}
                    ),
                    "exception_info": _exception(step.error or step.agent_error, occurred),
                }
                for step in trial.steps
            ],
        }

    def write_trial(self, trial: TrialResult, building: Path, problems: list[str]) -> None:
        name = self.names[trial.trial_id]
        dest = building / name
        dest.mkdir()
        source = _inside(self.run_dir, trial.folder)
        checksum = ""
        if source is None:
            problems.append(
                f"{self.run_dir / RESULTS_FILE}: trial {trial.trial_id}: its folder "
                f"{trial.folder!r} is not a folder inside the run; only its result is exported"
            )
        else:
            for part in COPIED:
                here = source / part
                if here.is_symlink():
                    problems.append(f"{here}: a link; not copied")
                elif here.is_dir():
                    _copy_tree(here, dest / part, problems)
            checksum = _checksum(source / "config.json")
        _write_json(dest / "config.json", self.trial_config(trial, name))
        _write_json(dest / "result.json", self.trial_result(trial, name, checksum))


def _checksum(path: Path) -> str:
    """The task's content hash from the trial's config.json ("" when unknown)."""
    try:
        if path.is_symlink() or path.stat().st_size > 1 << 20:
            return ""
        data = _read_json(path)
    except (OSError, NotARun):
        return ""
    value = data.get("task_checksum")
    return value if isinstance(value, str) else ""


def _mean(rewards: list[dict[str, float] | None]) -> dict[str, float]:
    """Harbor's default metric: the mean reward over the trials (a trial with no
    reward counts 0), per reward key when there are several."""
    keys = sorted({key for reward in rewards if reward for key in reward})
    if not rewards:
        return {"mean": 0.0}
    if len(keys) <= 1:
        values = [next(iter(r.values()), 0.0) if r else 0.0 for r in rewards]
        return {"mean": sum(values) / len(values)}
    return {key: sum((r or {}).get(key, 0.0) for r in rewards) / len(rewards) for key in keys}
