"""Batch results: the Python API's `BatchResult` and the `batch_summary.json` document."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from helios.engine.metrics import (
    bootstrap_ci,
    group_passes,
    mean,
    pass_at_k_ci_table,
    pass_at_k_table,
)
from helios.tasks.results import TrialResult
from helios.usage import Usage

if TYPE_CHECKING:
    from helios.models.services import ModelServices


@dataclass(frozen=True)
class TaskResult:
    #: the task's folder name (`task_name` is the same)
    name: str
    status: str
    reward: float
    duration: float
    error: str | None
    attempt: int
    passed: bool
    trial_id: str = ""
    folder: str = ""
    #: a multi-step task's steps: name, status and reward of each
    steps: list[dict[str, Any]] | None = None
    #: why it did not pass, in one line (`TrialResult.reason`); None when it passed
    reason: str | None = None
    #: the trial's model (None: an agent that uses none) and agent
    model: str | None = None
    agent: str = ""
    #: the trial's model usage (its cost, for the breakdown by model and agent)
    usage: Usage = field(default_factory=Usage)
    #: a retry (`--retry-failed-below`): which one, and the trial it ran again
    retry: int = 0
    retry_of: str | None = None

    @property
    def task_name(self) -> str:
        return self.name

    @classmethod
    def from_trial(cls, result: TrialResult) -> TaskResult:
        error = f"{result.error.type}: {result.error.message}" if result.error else None
        return cls(
            name=result.task_name,
            status=result.status,
            reward=result.reward,
            duration=result.duration,
            error=error,
            attempt=result.attempt,
            passed=result.passed,
            trial_id=result.trial_id,
            folder=result.folder,
            steps=None
            if result.steps is None
            else [{"name": s.name, "status": s.status, "reward": s.reward} for s in result.steps],
            reason=None if result.passed else (result.reason or None),
            model=result.model,
            agent=result.agent,
            usage=result.usage,
            retry=result.retry,
            retry_of=result.retry_of,
        )


@dataclass
class InvalidTask:
    path: str
    error: str


@dataclass
class UnsupportedTask:
    """A valid task that needs what Helios (or the provider) cannot honour."""

    path: str
    #: "unsupported: <field> (<why>)", one per field
    reasons: list[str]
    #: the one agent of the run that cannot take the task (None: no agent can run it)
    agent: str | None = None
    #: with `agent`: the trials refused (that agent's models × attempts); the task's
    #: other trials run, so it is counted once, among the planned tasks
    trials: int = 0

    @property
    def error(self) -> str:
        """One line: the task's path and every field it cannot have."""
        return f"{self.path}: " + "; ".join(self.reasons)


@dataclass
class BatchResult:
    total_tasks: int
    passed: int
    failed: int
    errored: int
    mean_reward: float
    duration: float
    n_attempts: int
    n_unique_tasks: int
    #: pass@1 … pass@k as fractions (0–1); empty when k = 1
    pass_at_k_table: dict[str, float]
    results: list[TaskResult]
    #: the bootstrap 95% interval of each pass@k, over tasks; empty when k = 1
    pass_at_k_ci95: dict[str, tuple[float, float]] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    invalid: list[InvalidTask] = field(default_factory=list)
    unsupported: list[UnsupportedTask] = field(default_factory=list)
    #: task.toml keys no schema version defines → how many tasks have them
    unknown_keys: dict[str, int] = field(default_factory=dict)
    output_dir: Path | None = None
    model: str | None = None
    agent: str = ""
    interrupted: bool = False
    #: planned trials with no result yet (interrupted or stopped early): --resume runs them
    not_run: int = 0
    #: why the batch stopped starting trials early (e.g. a rejected key)
    aborted: str | None = None
    #: usage of the model calls made by trials an interrupt stopped: counted live, but in
    #: no record (so not in `usage`); None when nothing was stopped
    stopped_usage: Usage | None = None
    #: "out tok/s" as the live line measured it (this invocation's output tokens per
    #: second of its wall time); None: the panel divides the usage by the duration
    out_tokens_per_second: float | None = None
    #: models × agents: the trials of one task and attempt (a run over several)
    combinations: int = 1
    #: the budgets, which one stopped the run (`stopped_by`, `reason`) and the run's
    #: spend (`engine.budget`); None: no budget
    budget: dict[str, Any] | None = None

    @property
    def budget_stopped(self) -> str | None:
        """Which budget stopped the run, and the spend, in one line (None: none did)."""
        if self.budget is None or not self.budget.get("stopped_by"):
            return None
        return str(self.budget.get("reason") or self.budget["stopped_by"])

    @property
    def priced(self) -> bool:
        """False when the cost is unknown (no price for the model): `usage.cost_usd`
        is None and `usage.cost_unknown_reason` says why."""
        return self.usage.cost_usd is not None

    @property
    def tasks(self) -> list[TaskResult]:
        return self.results

    @property
    def total_duration_sec(self) -> float:
        return self.duration

    @property
    def pass_at_k(self) -> float | None:
        """pass@k for k = the number of attempts, as a percentage; None when k = 1."""
        if self.n_attempts <= 1:
            return None
        value = self.pass_at_k_table.get(f"pass@{self.n_attempts}")
        return None if value is None else value * 100.0

    @property
    def total_trials(self) -> int:
        """The trials that ran to a result (`total_tasks` is the same number, kept for
        callers of the Python API; batch_summary.json's `total_tasks` counts tasks)."""
        return self.total_tasks

    @property
    def n_tasks(self) -> int:
        """The tasks of the batch: those planned (run or not) and the invalid and
        unsupported ones."""
        per_task = max(self.n_attempts, 1) * max(self.combinations, 1)
        planned = (self.total_tasks + self.not_run + self._refused_trials) // per_task
        whole = {u.path for u in self.unsupported if u.agent is None}
        return planned + len(self.invalid) + len(whole)

    @property
    def _refused_trials(self) -> int:
        """The trials of the tasks refused for one agent only (counted as failed)."""
        return sum(u.trials for u in self.unsupported if u.agent is not None)

    @property
    def pass_rate(self) -> float:
        """The one pass rate (panel, batch_summary.json, `--fail-under`): passed trials
        over the planned ones, where an invalid or unsupported task counts as failed
        attempts and a trial not run as failed."""
        skipped = len(self.invalid) + len({u.path for u in self.unsupported if u.agent is None})
        planned = (self.total_tasks + self.not_run + self._refused_trials
                   + skipped * self.n_attempts * self.combinations)  # fmt: skip
        return self.passed / planned if planned else 0.0

    @property
    def raw_pass_rate(self) -> float:
        """Passed trials over the trials that ran (the valid tasks' only)."""
        return self.passed / self.total_tasks if self.total_tasks else 0.0

    @property
    def gated_pass_rate(self) -> float:
        """`pass_rate` (its earlier name)."""
        return self.pass_rate


def build_batch_result(
    trials: list[TrialResult],
    *,
    n_attempts: int,
    duration: float,
    invalid: list[InvalidTask],
    output_dir: Path | None,
    model: str | None,
    agent: str,
    planned: int,
    interrupted: bool = False,
    aborted: str | None = None,
    unsupported: list[UnsupportedTask] | None = None,
    unknown_keys: dict[str, int] | None = None,
    stopped_usage: Usage | None = None,
    combinations: int = 1,
    budget: dict[str, Any] | None = None,
) -> BatchResult:
    ordered = sorted(trials, key=lambda r: (r.folder, r.attempt))
    # pass@k over each task's k attempts with one model and agent
    passes = group_passes((_combination_key(r, combinations), r.passed) for r in ordered)
    return BatchResult(
        total_tasks=len(ordered),
        passed=sum(r.passed for r in ordered),
        failed=sum(not r.passed for r in ordered),
        errored=sum(r.status == "error" for r in ordered),
        mean_reward=mean([r.reward for r in ordered]),
        duration=duration,
        n_attempts=n_attempts,
        n_unique_tasks=len({r.task_path for r in ordered}),
        pass_at_k_table=pass_at_k_table(passes) if n_attempts > 1 else {},
        pass_at_k_ci95=pass_at_k_ci_table(passes) if n_attempts > 1 else {},
        results=[TaskResult.from_trial(r) for r in ordered],
        usage=Usage.sum([r.usage for r in ordered]),
        invalid=invalid,
        unsupported=list(unsupported or []),
        unknown_keys=dict(unknown_keys or {}),
        output_dir=output_dir,
        model=model,
        agent=agent,
        interrupted=interrupted,
        not_run=max(0, planned - len(ordered)),
        aborted=aborted,
        stopped_usage=stopped_usage,
        combinations=combinations,
        budget=budget,
    )


def _combination_key(result: TrialResult, combinations: int) -> str:
    """The group of a trial's attempts: its task, and in a run over several models
    or agents its model and agent too."""
    if combinations == 1:
        return result.task_path
    return json.dumps([result.task_path, result.model, result.agent])


def breakdown(batch: BatchResult, by: Literal["model", "agent"]) -> dict[str, dict[str, Any]]:
    """The trials that ran, grouped by model (no model: "none") or agent: trials,
    passed, errored, pass rate over them, mean reward and cost (None: unknown)."""
    groups: dict[str, list[TaskResult]] = {}
    for result in batch.results:
        key = result.model if by == "model" else result.agent
        groups.setdefault(key or "none", []).append(result)
    sections: dict[str, dict[str, Any]] = {}
    for key, results in groups.items():
        usage = Usage.sum([r.usage for r in results])
        passed = sum(r.passed for r in results)
        sections[key] = {
            "trials": len(results),
            "passed": passed,
            "failed": len(results) - passed,
            "errored": sum(r.status == "error" for r in results),
            "pass_rate": round(passed / len(results), 6),
            "mean_reward": round(mean([r.reward for r in results]), 6),
            "cost_usd": None if usage.cost_usd is None else round(usage.cost_usd, 6),
        }
    return sections


def summary_document(batch: BatchResult) -> dict[str, Any]:
    """The `batch_summary.json` content."""
    ci_low, ci_high = bootstrap_ci([r.reward for r in batch.results])
    usage = batch.usage
    doc: dict[str, Any] = {
        "total_tasks": batch.n_tasks,
        "total_trials": batch.total_trials,
        "passed": batch.passed,
        "failed": batch.failed,
        "errored": batch.errored,
        "invalid": len(batch.invalid),
        "unsupported": len(batch.unsupported),
        "mean_reward": round(batch.mean_reward, 6),
        "mean_reward_ci95": [round(ci_low, 6), round(ci_high, 6)],
        "pass_rate": round(batch.pass_rate, 6),
        "raw_pass_rate": round(batch.raw_pass_rate, 6),
        "duration_seconds": round(batch.duration, 3),
        "model": batch.model,
        "agent": batch.agent,
        "n_unique_tasks": batch.n_unique_tasks,
        "interrupted": batch.interrupted,
        "aborted": batch.aborted,
        "not_run": batch.not_run,
        "budget": batch.budget,
        "usage": usage.model_dump() | {"total_tokens": usage.total_tokens},
        "tasks": [
            {
                "name": t.name,
                "status": t.status,
                "reward": t.reward,
                "duration": round(t.duration, 3),
                "error": t.error,
                "attempt": t.attempt,
                "trial_id": t.trial_id,
                "folder": t.folder,
                "reason": t.reason,
                "model": t.model,
                "agent": t.agent,
                **({"steps": t.steps} if t.steps is not None else {}),
                # a retry (`--retry-failed-below`): the trial it replaces in the counts
                **({"retry": t.retry, "retry_of": t.retry_of} if t.retry else {}),
            }
            for t in batch.results
        ],
        "invalid_tasks": [{"path": i.path, "error": i.error} for i in batch.invalid],
        "unsupported_tasks": [
            {"path": u.path, "reasons": u.reasons, **({"agent": u.agent} if u.agent else {})}
            for u in batch.unsupported
        ],
        "unknown_keys": dict(sorted(batch.unknown_keys.items())),
        "by_model": breakdown(batch, "model"),
        "by_agent": breakdown(batch, "agent"),
    }
    doc["n_attempts"] = batch.n_attempts
    # null with one attempt: pass@k needs k > 1 (the key is always there)
    doc["pass_at_k"] = (
        {k: round(v, 6) for k, v in batch.pass_at_k_table.items()} if batch.n_attempts > 1 else None
    )
    doc["pass_at_k_ci95"] = (
        {k: [round(low, 6), round(high, 6)] for k, (low, high) in batch.pass_at_k_ci95.items()}
        if batch.n_attempts > 1
        else None
    )
    return doc


#: the batch's summary in its run folder
SUMMARY_FILE = "batch_summary.json"


def add_service_figures(batch: BatchResult, services: ModelServices | None) -> None:
    """The figures only the run's model services hold: output tokens per second and,
    when no call was priced, why the cost is unknown."""
    from helios.models.pricing import unknown_reason

    if services is None:
        return
    batch.out_tokens_per_second = services.out_tokens_per_second()
    if not services.priced and batch.usage.cost_usd is not None:
        # no call was priced (every trial errored, or a resume of such a run)
        batch.usage.mark_cost_unknown(unknown_reason(services.spec.qualified))


def write_summary(batch: BatchResult, run_dir: Path) -> str | None:
    """Write `batch_summary.json`; None, or why it could not be written (the records
    are safe; only the summary is missing, and a resume writes it again)."""
    from helios.engine.store import write_json_atomic

    try:
        write_json_atomic(run_dir / SUMMARY_FILE, summary_document(batch))
    except OSError as exc:
        return str(exc.strerror)
    return None


def stopped_usage(services: ModelServices | None, recorded: list[TrialResult]) -> Usage | None:
    """The tokens and calls this invocation's live line counted that no recorded trial
    holds: those of the trials the interrupt stopped."""
    if services is None:
        return None
    live, kept = services.totals, Usage.sum([r.usage for r in recorded])
    return Usage(
        input_tokens=max(0, live.input_tokens - kept.input_tokens),
        cache_read_tokens=max(0, live.cache_read_tokens - kept.cache_read_tokens),
        output_tokens=max(0, live.output_tokens - kept.output_tokens),
        calls=max(0, live.calls - kept.calls),
    )


def prior_duration(run_dir: Path) -> float:
    """The time a batch of an earlier Helios kept only in its summary."""
    path = run_dir / SUMMARY_FILE
    if not path.is_file():
        return 0.0
    try:
        return float(json.loads(path.read_text("utf-8")).get("duration_seconds", 0.0))
    except (ValueError, OSError, AttributeError):
        return 0.0
