"""`run` and `run_concurrent`: the russo API, run by the engine's batch service.

Every run (prompt, run index) is one unit on `BatchService` with no store
(in memory) unless `output_dir` asks for a run folder. `max_concurrency` is the
engine's bound on runs in flight (None: all at once, capped at
`DEFAULT_MAX_CONCURRENCY`). The result lists every run, in prompt order then
run order, whatever happened to it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from helios.display.presenter import RunPresenter
from helios.display.progress import default_console
from helios.engine import EndpointCalls, Run, RunOutcome, write_json_atomic
from helios.engine.budget import BudgetConfig
from helios.engine.config import Executor, check_executor
from helios.engine.labels import RunLabels
from helios.engine.reported_models import record_models
from helios.errors import ConfigError
from helios.models.retry import RetryPolicy
from helios.models.services import ModelServices
from helios.toolcalls.cache import AudioCache
from helios.toolcalls.components import DEFAULT_SYNTHESIZER, check_setup, synthesizer_for, text_mode
from helios.toolcalls.door import DEFAULT_RETRY_POLICY, RunUnit, ToolCallDoor
from helios.toolcalls.evaluators.exact import ExactEvaluator
from helios.toolcalls.plan import Case, build_cases, check_runs, collect, from_record, plan_units
from helios.toolcalls.protocols import Evaluator
from helios.toolcalls.run_config import DEFAULT_MAX_CONCURRENCY, budget_of, in_flight, run_config
from helios.toolcalls.transport import aclose_quietly, classify
from helios.toolcalls.types import BatchResult, EvalResult, SingleRunResult

#: seconds one synthesizer or agent call may take before it counts as a (transient) timeout
#: (a ModelAgent's requests: its `generation.timeout`, 120 s unless it says otherwise)
DEFAULT_TIMEOUT = 120.0
SUMMARY_FILE = "toolcalls_summary.json"

__all__ = [  # with names once defined here (the plan's, the components')
    "DEFAULT_MAX_CONCURRENCY", "DEFAULT_SYNTHESIZER", "DEFAULT_TIMEOUT", "SUMMARY_FILE",
    "Case", "check_setup", "plan_units", "run", "run_cases", "run_concurrent",
]  # fmt: skip


def _show(show_progress: bool | None, console: Console) -> bool:
    if show_progress is not None:
        return show_progress
    return console.is_terminal and "PYTEST_CURRENT_TEST" not in os.environ


async def run_cases(
    cases: Sequence[Case],
    *,
    synthesizer: Any = DEFAULT_SYNTHESIZER,
    agent: Any,
    evaluator: Evaluator | None = None,
    max_concurrency: int | None = None,
    cache: AudioCache | bool | None = None,
    retry_policy: RetryPolicy | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
    output_dir: str | Path | None = None,
    show_progress: bool | None = None,
    console: Console | None = None,
    labels: RunLabels | None = None,
    settings: Mapping[str, Any] | None = None,
    resume: str | Path | None = None,
    force: bool = False,
    budget: BudgetConfig | Mapping[str, Any] | None = None,
    executor: Executor = "local",
    ray_address: str | None = None,
) -> BatchResult:
    """Run every case `case.runs` times on the engine; never raises for a run's failure.
    `labels`: the run's name and tags, kept in its run.json (with `output_dir`);
    `settings`: what the run was configured with (the CLI's YAML config, as JSON),
    saved in run.json's `config` (secrets removed); `resume`: a run folder of these
    cases to finish (its recorded runs are not run again; other components than the
    run's are refused unless `force`); `budget`: the run's budgets (`engine.budget`:
    `BudgetConfig`, or {"max_cost": 5, "max_tokens": N, "max_duration": "2h", "hard":
    bool}); once one is reached no run starts, the result's `budget_stopped` says so,
    and the runs not started are `NotRun` failures a resume runs; `executor="ray"`:
    the runs are tasks of a Ray cluster (`ray_address`; None: a local Ray instance)."""
    if max_concurrency is not None and max_concurrency < 1:
        raise ConfigError(f"max_concurrency must be at least 1, got {max_concurrency}")
    check_executor(executor, ray_address)
    check_runs(cases)
    synth = synthesizer_for(synthesizer, cache)
    reads_text = text_mode(agent, synth)
    if not reads_text:
        check_setup(synth)
    units = plan_units(cases)
    limit = in_flight(max_concurrency, len(units))
    console = console or default_console()
    screen = RunPresenter(console, show=_show(show_progress, console))
    # An agent on Helios's model services (ModelAgent): they are the engine's for this
    # batch, and their limiter and retries the only ones its calls go through.
    services = getattr(agent, "services", None)
    screen.services = services if isinstance(services, ModelServices) else None
    budget = budget_of(budget, screen.services)
    policy = retry_policy or DEFAULT_RETRY_POLICY

    def endpoint() -> EndpointCalls:
        return EndpointCalls(policy=policy, limit=limit, timeout=timeout, classify=classify)

    door = ToolCallDoor(
        synthesizer=synth, agent=agent, evaluator=evaluator or ExactEvaluator(),
        text_mode=reads_text, agent_calls=None if screen.services is not None else endpoint(),
        synthesizer_calls=None if reads_text else endpoint(),
    )  # fmt: skip
    door.plan(units)
    by_id: dict[str, SingleRunResult] = {}

    def keep(unit: RunUnit, result: SingleRunResult) -> None:
        by_id[unit.trial_id] = result

    config = run_config(
        runs=len(units), limit=limit, agent=agent, evaluator=door.evaluator, synthesizer=synth,
        timeout=timeout, policy=policy, output_dir=output_dir, resume=resume, force=force,
        settings=settings, labels=labels, budget=budget, executor=executor,
        ray_address=ray_address,
    )  # fmt: skip

    def finish(outcome: RunOutcome[RunUnit, SingleRunResult]) -> BatchResult:
        for record in outcome.plan.finished:  # a resume's runs recorded before
            by_id.setdefault(str(record["trial_id"]), from_record(record))
        batch = collect(units, by_id, outcome.aborted or outcome.budget_stopped)
        batch.budget = outcome.budget
        if not engine_run.in_memory:
            from helios.toolcalls.report import batch_document

            document = batch_document(batch, duration=outcome.seconds)
            write_json_atomic(engine_run.run_dir / SUMMARY_FILE, document)
            if batch.usage is not None:  # the ids the provider answered with, in run.json
                record_models(engine_run.run_dir, batch.usage.reported_models)
        return batch

    async with Run() as engine_run:
        await engine_run.open(config)
        agent_services = screen.services
        screen.attach(engine_run)
        screen.services = agent_services  # the agent's, not the run's (it opens none)
        # tokens, cost, the model's limit and the spend against each budget on the line
        progress = screen.live(quiet=True)
        try:
            done = None if engine_run.in_memory else engine_run.store.load_index()
            if done is not None:
                screen.store_repairs(engine_run.store)
            return await engine_run.drive(
                door, units, done=done, emit=progress.handle, on_recorded=keep,
                services=screen.services, display=screen.shown(progress), finish=finish,
            )  # fmt: skip
        finally:
            for component in {id(c): c for c in (agent, synthesizer, synth)}.values():
                if type(component).__module__.startswith("helios."):
                    await aclose_quietly(component)
                    await aclose_quietly(getattr(component, "inner", None))


async def run_concurrent(
    prompts: str | Sequence[str] | None = None,
    synthesizer: Any = DEFAULT_SYNTHESIZER,
    agent: Any = None,
    evaluator: Evaluator | None = None,
    expect: Sequence[Any] | None = None,
    runs: int = 1,
    max_concurrency: int | None = None,
    *,
    cases: Sequence[Any] | None = None,
    **options: Any,
) -> BatchResult:
    """russo's `run_concurrent`: prompts × runs, concurrently, on the engine.

    `cases=[(prompt, expect), ...]` gives each prompt its own expectation.
    `synthesizer=None` is text mode (the agent reads the prompt: `ModelAgent`).
    More keywords: cache, retry_policy, timeout, output_dir, show_progress, console,
    executor and ray_address (see `run_cases`).
    """
    if agent is None:
        raise ConfigError("run_concurrent needs an agent")
    built = build_cases(prompts, cases, expect, runs)
    return await run_cases(built, synthesizer=synthesizer, agent=agent, evaluator=evaluator,
                           max_concurrency=max_concurrency, **options)  # fmt: skip


async def run(
    prompt: str,
    synthesizer: Any = DEFAULT_SYNTHESIZER,
    agent: Any = None,
    evaluator: Evaluator | None = None,
    expect: Sequence[Any] | None = None,
    **options: Any,
) -> EvalResult:
    """One prompt, one run: its EvalResult (a failure carries its error; nothing raises)."""
    batch = await run_concurrent(prompt, synthesizer, agent, evaluator, expect, runs=1,
                                 **options)  # fmt: skip
    return batch.runs[0].eval_result
