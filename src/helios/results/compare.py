"""Runs compared task by task: what changed from a baseline run to another.

For each pair (the first run, the baseline, against each other run), over the tasks both
ran:
- per task: each side's attempts, passes, pass rate, mean reward, pass@k (k up to its
  attempts), mean cost and duration per attempt, and the deltas (B − A);
- flips: tasks whose pass rate went down (passed in A, failed in B: `regressions`) or up
  (`fixes`). With one attempt per task that is pass → fail and back;
- the difference in pass rate (B − A) with a paired bootstrap interval: the tasks are
  resampled (`resamples` times, seeded, so the same runs give the same interval) and
  each resample's mean of the per-task differences is taken (`engine.metrics.bootstrap_ci`;
  past 5,000 shared tasks its normal approximation);
- a note when the two runs did not run the same tasks (the tasks only in A, only in B),
  which are left out of every paired figure.

B is *significantly worse* when the interval's upper bound is below 0. Everything here
is plain data (`to_dict`, `to_json`): the terminal, the formats and the viewer render it.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from helios.engine.metrics import (
    BOOTSTRAP_MAX,
    bootstrap_ci,
    k_values,
    mean,
    pass_at_k,
    pass_at_k_table,
)
from helios.results.runs import Attempt, RunResults

DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 0
CONFIDENCE = 0.95

Change = Literal["regressed", "fixed", "same", "only_a", "only_b"]


@dataclass(frozen=True)
class TaskSide:
    """One task in one run."""

    attempts: int
    passed: int
    pass_rate: float
    mean_reward: float
    #: "pass@1" … "pass@n" for the task's n attempts (unbiased estimator)
    pass_at_k: dict[str, float]
    mean_duration: float
    #: None when any attempt's cost is unknown
    mean_cost_usd: float | None
    errors: int


@dataclass(frozen=True)
class TaskComparison:
    task: str
    a: TaskSide | None
    b: TaskSide | None
    change: Change
    reward_delta: float | None
    duration_delta: float | None
    cost_delta_usd: float | None


@dataclass(frozen=True)
class RunSummary:
    """One run on its own (all its tasks)."""

    label: str
    path: str
    door: str
    kind: str
    model: str | None
    agent: str | None
    created_at: str | None
    finished: bool
    tasks: int
    trials: int
    passed: int
    #: passed trials / trials
    pass_rate: float
    mean_reward: float
    #: "pass@1" … for k up to the fewest attempts a task has (empty with one attempt)
    pass_at_k: dict[str, float]
    #: None when any trial's cost is unknown
    cost_usd: float | None
    #: the run's wall-clock time, when recorded
    wall_seconds: float | None
    #: seconds of all its trials together
    trial_seconds: float
    problems: list[str]
    #: the run's name and tags (run.json), when it has them
    name: str | None = None
    tags: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    confidence: float
    resamples: int
    seed: int
    #: "bootstrap"; past BOOTSTRAP_MAX shared tasks "normal" (the normal approximation,
    #: as good there, and resampling would cost resamples × tasks draws)
    method: str = "bootstrap"


@dataclass(frozen=True)
class Comparison:
    """Run B against the baseline A, over the tasks both ran."""

    a: str
    b: str
    shared_tasks: int
    only_in_a: list[str]
    only_in_b: list[str]
    #: the mean over the shared tasks of each task's pass rate
    pass_rate_a: float
    pass_rate_b: float
    pass_rate_delta: float
    #: the paired bootstrap interval of `pass_rate_delta`
    ci: Interval
    significantly_worse: bool
    significantly_better: bool
    mean_reward_a: float
    mean_reward_b: float
    reward_delta: float
    #: pass@k over the shared tasks, for k up to the fewest attempts of either side
    pass_at_k_a: dict[str, float]
    pass_at_k_b: dict[str, float]
    #: totals over the shared tasks (None: a cost is unknown)
    cost_a_usd: float | None
    cost_b_usd: float | None
    cost_delta_usd: float | None
    trial_seconds_a: float
    trial_seconds_b: float
    duration_delta: float
    #: the tasks that passed less often in B (passed in A, failed in B), and more often
    regressions: list[str]
    fixes: list[str]
    #: every task of either run, shared ones first
    tasks: list[TaskComparison]
    #: why the figures cover fewer tasks than the runs, when they do
    note: str | None = None


@dataclass(frozen=True)
class CompareReport:
    runs: list[RunSummary]
    #: each run after the first against the first
    comparisons: list[Comparison]
    #: run folders found under a given folder and left out
    skipped: list[str] = field(default_factory=list)

    @property
    def worse(self) -> list[Comparison]:
        """The comparisons whose run is significantly worse than the baseline."""
        return [c for c in self.comparisons if c.significantly_worse]

    def to_dict(self) -> dict[str, Any]:
        """Plain dicts, lists, strings and numbers (what `json.loads(to_json())` gives)."""
        data: dict[str, Any] = msgspec.to_builtins(self)
        return data

    def to_json(self, indent: int = 2) -> str:
        """The report as JSON (msgspec: a run of 100,000 trials in well under a second)."""
        raw = msgspec.json.encode(self)
        return (msgspec.json.format(raw, indent=indent) if indent else raw).decode("utf-8")


def bounded(value: float) -> float:
    """A sum or a difference of finite values, kept finite: past the largest float it
    is that float (rewards of 1e308 and -1e308 differ by "inf" otherwise, which CSV
    and text would show as `inf` and JSON as `null`)."""
    if math.isfinite(value):
        return value
    if math.isnan(value):
        raise ValueError("a figure of finite values is not a number")
    return math.copysign(sys.float_info.max, value)


def _sum(values: Sequence[float]) -> float:
    return bounded(sum(values))


def _sum_cost(costs: Sequence[float | None]) -> float | None:
    if any(cost is None for cost in costs):
        return None
    return _sum([cost for cost in costs if cost is not None])


def task_side(attempts: Sequence[Attempt]) -> TaskSide:
    n = len(attempts)
    passed = sum(a.passed for a in attempts)
    cost = _sum_cost([a.cost_usd for a in attempts])
    return TaskSide(
        attempts=n,
        passed=passed,
        pass_rate=passed / n if n else 0.0,
        mean_reward=mean([a.reward for a in attempts]),
        pass_at_k={f"pass@{k}": pass_at_k(n, passed, k) for k in k_values(n)},
        mean_duration=mean([a.duration for a in attempts]),
        mean_cost_usd=None if cost is None or not n else cost / n,
        errors=sum(a.status == "error" for a in attempts),
    )


def _passes(run: RunResults, names: Sequence[str]) -> dict[str, list[bool]]:
    return {name: [a.passed for a in run.tasks[name]] for name in names}


def summarize(run: RunResults) -> RunSummary:
    attempts = [a for task in run.tasks.values() for a in task]
    passes = _passes(run, list(run.tasks))
    table = pass_at_k_table(passes)
    return RunSummary(
        label=run.label, path=str(run.path), door=run.door, kind=run.kind, model=run.model,
        agent=run.agent, created_at=run.created_at, finished=run.finished,
        tasks=len(run.tasks), trials=len(attempts),
        passed=sum(a.passed for a in attempts),
        pass_rate=sum(a.passed for a in attempts) / len(attempts) if attempts else 0.0,
        mean_reward=mean([a.reward for a in attempts]),
        pass_at_k=table if len(table) > 1 else {},
        cost_usd=_sum_cost([a.cost_usd for a in attempts]),
        wall_seconds=run.wall_seconds,
        trial_seconds=_sum([a.duration for a in attempts]),
        problems=list(run.problems), name=run.name, tags=dict(run.tags),
    )  # fmt: skip


def _delta(b: float | None, a: float | None) -> float | None:
    return None if a is None or b is None else bounded(b - a)


def _change(a: TaskSide, b: TaskSide) -> Change:
    if b.pass_rate < a.pass_rate:
        return "regressed"
    if b.pass_rate > a.pass_rate:
        return "fixed"
    return "same"


def _pair_table(passes: dict[str, list[bool]], k_max: int) -> dict[str, float]:
    table = pass_at_k_table(passes)
    return {key: value for key, value in table.items() if int(key[5:]) <= k_max}


def compare_pair(
    a: RunResults,
    b: RunResults,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = CONFIDENCE,
) -> Comparison:
    """B against A over the tasks both ran."""
    shared = [name for name in a.tasks if name in b.tasks]
    only_a = [name for name in a.tasks if name not in b.tasks]
    only_b = [name for name in b.tasks if name not in a.tasks]
    rows: list[TaskComparison] = []
    for name in shared:
        side_a, side_b = task_side(a.tasks[name]), task_side(b.tasks[name])
        rows.append(TaskComparison(
            task=name, a=side_a, b=side_b, change=_change(side_a, side_b),
            reward_delta=bounded(side_b.mean_reward - side_a.mean_reward),
            duration_delta=bounded(side_b.mean_duration - side_a.mean_duration),
            cost_delta_usd=_delta(side_b.mean_cost_usd, side_a.mean_cost_usd),
        ))  # fmt: skip
    for name in only_a:
        rows.append(
            TaskComparison(name, task_side(a.tasks[name]), None, "only_a", None, None, None)
        )
    for name in only_b:
        rows.append(
            TaskComparison(name, None, task_side(b.tasks[name]), "only_b", None, None, None)
        )
    paired = [row for row in rows if row.a is not None and row.b is not None]
    rates_a = [row.a.pass_rate for row in paired if row.a is not None]
    rates_b = [row.b.pass_rate for row in paired if row.b is not None]
    differences = [rb - ra for ra, rb in zip(rates_a, rates_b, strict=True)]
    low, high = bootstrap_ci(differences, confidence=confidence, samples=resamples, seed=seed)
    attempts_a = [x for name in shared for x in a.tasks[name]]
    attempts_b = [x for name in shared for x in b.tasks[name]]
    k_max = min((min(len(a.tasks[n]), len(b.tasks[n])) for n in shared), default=0)
    table_a = _pair_table(_passes(a, shared), k_max) if k_max > 1 else {}
    table_b = _pair_table(_passes(b, shared), k_max) if k_max > 1 else {}
    cost_a = _sum_cost([x.cost_usd for x in attempts_a])
    cost_b = _sum_cost([x.cost_usd for x in attempts_b])
    seconds_a = _sum([x.duration for x in attempts_a])
    seconds_b = _sum([x.duration for x in attempts_b])
    reward_a = mean([r.a.mean_reward for r in paired if r.a is not None])
    reward_b = mean([r.b.mean_reward for r in paired if r.b is not None])
    return Comparison(
        a=a.label, b=b.label, shared_tasks=len(shared), only_in_a=only_a, only_in_b=only_b,
        pass_rate_a=mean(rates_a), pass_rate_b=mean(rates_b), pass_rate_delta=mean(differences),
        ci=Interval(low, high, confidence, resamples, seed,
                    "normal" if len(differences) > BOOTSTRAP_MAX else "bootstrap"),
        significantly_worse=bool(differences) and high < 0,
        significantly_better=bool(differences) and low > 0,
        mean_reward_a=reward_a, mean_reward_b=reward_b, reward_delta=bounded(reward_b - reward_a),
        pass_at_k_a=table_a, pass_at_k_b=table_b,
        cost_a_usd=cost_a, cost_b_usd=cost_b, cost_delta_usd=_delta(cost_b, cost_a),
        trial_seconds_a=seconds_a, trial_seconds_b=seconds_b,
        duration_delta=bounded(seconds_b - seconds_a),
        regressions=[r.task for r in paired if r.change == "regressed"],
        fixes=[r.task for r in paired if r.change == "fixed"],
        tasks=rows, note=_note(a, b, shared, only_a, only_b),
    )  # fmt: skip


def _note(
    a: RunResults, b: RunResults, shared: list[str], only_a: list[str], only_b: list[str]
) -> str | None:
    if not shared:
        return f"{a.label} and {b.label} share no task: nothing to pair"
    if not only_a and not only_b:
        return None
    parts = []
    if only_a:
        parts.append(f"{len(only_a)} only in {a.label}")
    if only_b:
        parts.append(f"{len(only_b)} only in {b.label}")
    return (
        f"the runs did not run the same tasks: {', '.join(parts)}; the paired figures "
        f"cover the {len(shared)} they share"
    )


def compare_runs(
    runs: Sequence[RunResults],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = CONFIDENCE,
    skipped: Sequence[str] = (),
) -> CompareReport:
    """Each run after the first against the first (the baseline)."""
    if len(runs) < 2:
        raise ValueError(f"comparing needs two runs or more, got {len(runs)}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    baseline = runs[0]
    return CompareReport(
        runs=[summarize(run) for run in runs],
        comparisons=[
            compare_pair(baseline, run, resamples=resamples, seed=seed, confidence=confidence)
            for run in runs[1:]
        ],
        skipped=list(skipped),
    )
