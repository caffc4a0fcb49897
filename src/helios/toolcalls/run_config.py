"""A tool-call batch's `RunConfig`: in memory, a new run folder (`output_dir`) or
an old one to finish (`resume`); its identity is the components that change
results, and run.json saves the config it ran with (secrets removed)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from helios.engine import ConcurrencyConfig, OutputsConfig, RunConfig, SandboxConfig
from helios.engine.budget import BudgetConfig
from helios.engine.config import Executor
from helios.engine.labels import RunLabels
from helios.engine.saved_config import dump_config
from helios.errors import ConfigError
from helios.models.retry import RetryPolicy
from helios.models.services import ModelServices

#: the bound when max_concurrency is None ("all at once"): sockets and memory stay sane
DEFAULT_MAX_CONCURRENCY = 256


def in_flight(max_concurrency: int | None, runs: int) -> int:
    """Runs in flight: `max_concurrency` (None: all, up to the default bound), at most
    the runs there are, at least one."""
    return max(1, min(max_concurrency or DEFAULT_MAX_CONCURRENCY, runs or 1))


def budget_of(
    budget: BudgetConfig | Mapping[str, Any] | None, services: ModelServices | None
) -> BudgetConfig:
    """The run's budgets (`engine.budget`) from `BudgetConfig` or its keywords; a cost
    budget needs the price of every model of the agent's services (one line otherwise)."""
    budget = budget if isinstance(budget, BudgetConfig) else BudgetConfig.of(**(budget or {}))
    unpriced = services.unpriced_model() if services is not None else None
    if budget.max_cost is not None and unpriced is not None:
        raise ConfigError(f"--max-cost needs the price of every model, and {unpriced} has "
                          "none: give it with prices", field="--max-cost")  # fmt: skip
    return budget


def identity(agent: Any, evaluator: Any, synthesizer: Any) -> dict[str, Any]:
    """What a resume must match: the components (by their class) that change results."""
    return {"components": {
        "agent": type(agent).__name__, "evaluator": type(evaluator).__name__,
        "synthesizer": type(synthesizer).__name__ if synthesizer is not None else None,
    }}  # fmt: skip


def outputs(output_dir: str | Path | None, resume: str | Path | None, force: bool) -> OutputsConfig:
    if resume is not None:
        return OutputsConfig(resume=Path(resume), force=force)
    if output_dir is not None:
        return OutputsConfig(parent=Path(output_dir), prefix="toolcalls")
    return OutputsConfig()  # in memory


def run_config(
    *, runs: int, limit: int, agent: Any, evaluator: Any, synthesizer: Any,
    timeout: float | None, policy: RetryPolicy, output_dir: str | Path | None,
    resume: str | Path | None, force: bool, settings: Mapping[str, Any] | None,
    labels: RunLabels | None, budget: BudgetConfig | None = None,
    executor: Executor = "local", ray_address: str | None = None,
) -> RunConfig:  # fmt: skip
    # where the runs ran: recorded as the task door records it (a local run: nothing)
    where = {"executor": executor, "ray_address": ray_address} if executor == "ray" else {}
    return RunConfig(
        kind="toolcalls",
        concurrency=ConcurrencyConfig(in_flight=limit, executor=executor, ray_address=ray_address),
        sandbox=SandboxConfig(provider=None),  # each run's episode has the null sandbox
        outputs=outputs(output_dir, resume, force),
        identity=identity(agent, evaluator, synthesizer),
        recorded={"runs": runs, "max_concurrency": limit, **where},
        config={
            "settings": dict(settings or {}), "runs": runs, "max_concurrency": limit,
            "timeout": timeout, "retry_policy": dump_config(policy),
            "agent": type(agent).__name__, "evaluator": type(evaluator).__name__,
            "synthesizer": type(synthesizer).__name__ if synthesizer is not None else None,
        },
        labels=labels or RunLabels(),
        budget=budget or BudgetConfig(),  # one invocation's: never saved, nor the identity
    )  # fmt: skip
