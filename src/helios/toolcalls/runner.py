"""`run` and `run_concurrent`: the russo API, run by the engine's batch service.

Every run (prompt, run index) is one unit on `BatchService` with no store
(in memory) unless `output_dir` asks for a run folder. `max_concurrency` is the
engine's bound on runs in flight (None: all at once, capped at
`DEFAULT_MAX_CONCURRENCY`). The result lists every run, in prompt order then
run order, whatever happened to it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

from rich.console import Console

from helios.display.progress import BatchProgress, default_console
from helios.engine import (
    ConcurrencyConfig,
    EndpointCalls,
    OutputsConfig,
    Run,
    RunConfig,
    RunOutcome,
    SandboxConfig,
    write_json_atomic,
)
from helios.engine.labels import RunLabels
from helios.engine.saved_config import dump_config
from helios.errors import ConfigError
from helios.failures import ErrorInfo
from helios.models.base import ToolCall
from helios.models.retry import RetryPolicy
from helios.models.services import ModelServices
from helios.toolcalls.cache import AudioCache, CachedSynthesizer
from helios.toolcalls.door import (
    DEFAULT_RETRY_POLICY,
    RunUnit,
    ToolCallDoor,
    failed_result,
    unit_id,
)
from helios.toolcalls.evaluators.exact import ExactEvaluator
from helios.toolcalls.helpers import coerce_call
from helios.toolcalls.protocols import Evaluator, Synthesizer
from helios.toolcalls.transport import aclose_quietly, classify
from helios.toolcalls.types import BatchResult, EvalResult, SingleRunResult

#: the bound when max_concurrency is None ("all at once"): sockets and memory stay sane
DEFAULT_MAX_CONCURRENCY = 256
#: seconds one synthesizer or agent call may take before it counts as a (transient) timeout
#: (a ModelAgent's requests: its `generation.timeout`, 120 s unless it says otherwise)
DEFAULT_TIMEOUT = 120.0
SUMMARY_FILE = "toolcalls_summary.json"
#: runs (prompts × runs) one batch may have: each run's result is kept in memory
#: (about 4 KB) for the BatchResult, and the runs themselves are made lazily
MAX_RUNS = 100_000


class _Default:
    def __repr__(self) -> str:
        return "<espeak-ng>"


#: "no synthesizer given": espeak-ng, the offline default (None means text mode)
DEFAULT_SYNTHESIZER: Any = _Default()


@dataclass(frozen=True)
class Case:
    """One prompt with its expected calls and how many runs it gets."""

    prompt: str
    expect: tuple[ToolCall, ...] = ()
    runs: int = 1
    test_id: str | None = None


def _expect(expect: Sequence[Any] | None) -> tuple[ToolCall, ...]:
    return tuple(coerce_call(call) for call in (expect or []))


def _cases(prompts: str | Sequence[str] | None, cases: Sequence[Any] | None,
           expect: Sequence[Any] | None, runs: int) -> list[Case]:  # fmt: skip
    if (prompts is None) == (cases is None):
        raise ConfigError("give either prompts= (with expect=) or cases=[(prompt, expect), ...]")
    if runs < 1:
        raise ConfigError(f"runs must be at least 1, got {runs}")
    if cases is None:
        texts = [prompts] if isinstance(prompts, str) else list(prompts or [])
        return [Case(text, _expect(expect), runs) for text in texts]
    built = []
    for item in cases:
        if isinstance(item, Case):
            built.append(item)
        else:
            prompt, case_expect = item
            built.append(Case(prompt, _expect(case_expect), runs))
    return built


def check_runs(cases: Sequence[Case]) -> None:
    """Refuse a batch of more than MAX_RUNS runs: every run's result is kept."""
    total = sum(max(case.runs, 0) for case in cases)
    if total > MAX_RUNS:
        raise ConfigError(too_many_runs(total), field="runs")


def too_many_runs(total: int) -> str:
    return (f"{total:,} runs (prompts × runs) is more than one batch may have "
            f"({MAX_RUNS:,}: every run's result is kept in memory)")  # fmt: skip


class RunPlan(Sequence[RunUnit]):
    """Every run of the cases, made when asked for (nothing per run is held):
    runs interleaved across prompts (p0#0, p1#0, p0#1, ...), so every prompt's
    audio is made early and a slow prompt does not hold back the others."""

    def __init__(self, cases: Sequence[Case]) -> None:
        self.cases = list(cases)
        #: (first round, rounds, the cases that have a run in those rounds, first position)
        self._segments: list[tuple[int, int, list[int], int]] = []
        start = position = 0
        for end in sorted({case.runs for case in self.cases if case.runs > 0}):
            active = [i for i, case in enumerate(self.cases) if case.runs >= end]
            self._segments.append((start, end - start, active, position))
            position += (end - start) * len(active)
            start = end
        self._length = position

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[RunUnit]:
        for start, rounds, active, _ in self._segments:
            for run_index in range(start, start + rounds):
                for case_index in active:
                    yield self.unit(case_index, run_index)

    @overload
    def __getitem__(self, index: int) -> RunUnit: ...

    @overload
    def __getitem__(self, index: slice) -> list[RunUnit]: ...

    def __getitem__(self, index: int | slice) -> RunUnit | list[RunUnit]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._length))]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("run plan index out of range")
        for start, _, active, first in reversed(self._segments):
            if index >= first:
                round_offset, slot = divmod(index - first, len(active))
                return self.unit(active[slot], start + round_offset)
        raise AssertionError("unreachable: the first segment starts at 0")

    def unit(self, case_index: int, run_index: int) -> RunUnit:
        case = self.cases[case_index]
        short = case.prompt if len(case.prompt) <= 48 else case.prompt[:45] + "..."
        return RunUnit(
            trial_id=unit_id(case.test_id, case_index, case.prompt, run_index),
            label=f"{case.test_id + ': ' if case.test_id else ''}{short} #{run_index}",
            case_index=case_index, run_index=run_index, prompt=case.prompt,
            expect=case.expect, test_id=case.test_id,
        )  # fmt: skip


def plan_units(cases: Sequence[Case]) -> RunPlan:
    """The batch's runs, made lazily (see `RunPlan`)."""
    return RunPlan(cases)


def _synthesizer(synthesizer: Any, cache: AudioCache | bool | None) -> Synthesizer | None:
    from helios.toolcalls.synthesizers import (
        EspeakSynthesizer,
        GoogleSynthesizer,
        OpenAISynthesizer,
    )

    if synthesizer is DEFAULT_SYNTHESIZER:
        synthesizer = EspeakSynthesizer()
    if synthesizer is None or isinstance(synthesizer, CachedSynthesizer) or cache is False:
        return synthesizer  # type: ignore[no-any-return]
    if isinstance(cache, AudioCache):
        return CachedSynthesizer(synthesizer, cache=cache)
    builtin = isinstance(synthesizer, EspeakSynthesizer | OpenAISynthesizer | GoogleSynthesizer)
    if cache is True or builtin:
        return CachedSynthesizer(synthesizer, cache=AudioCache())
    return synthesizer  # type: ignore[no-any-return]


def check_setup(synthesizer: Any) -> None:
    """Ask the synthesizer (through a cache) whether this machine can run it, once,
    before any run (`check_setup()`, where it has one): a missing program is one
    `SetupError`, not the same failure for every run."""
    seen: set[int] = set()
    while synthesizer is not None and id(synthesizer) not in seen:
        seen.add(id(synthesizer))
        check = getattr(synthesizer, "check_setup", None)
        if callable(check):
            check()
            return
        synthesizer = getattr(synthesizer, "inner", None)


def _text_mode(agent: Any, synthesizer: Synthesizer | None) -> bool:
    can_read = callable(getattr(agent, "run_text", None))
    if synthesizer is None or getattr(agent, "accepts_audio", True) is False:
        if not can_read:
            raise ConfigError(
                "synthesizer=None is text mode: the agent needs run_text(prompt) "
                f"(e.g. ModelAgent), and {type(agent).__name__} has none"
            )
        return True
    if not callable(getattr(agent, "run", None)):
        raise ConfigError(f"the agent {type(agent).__name__} has no run(audio) method")
    return False


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
) -> BatchResult:
    """Run every case `case.runs` times on the engine; never raises for a run's failure.
    `labels`: the run's name and tags, kept in its run.json (with `output_dir`);
    `settings`: what the run was configured with (the CLI's YAML config, as JSON),
    saved in run.json's `config` (secrets removed); `resume`: a run folder of these
    cases to finish (its recorded runs are not run again; other components than the
    run's are refused unless `force`)."""
    if max_concurrency is not None and max_concurrency < 1:
        raise ConfigError(f"max_concurrency must be at least 1, got {max_concurrency}")
    check_runs(cases)
    synth = _synthesizer(synthesizer, cache)
    text_mode = _text_mode(agent, synth)
    if not text_mode:
        check_setup(synth)
    units = plan_units(cases)
    limit = max(1, min(max_concurrency or DEFAULT_MAX_CONCURRENCY, len(units) or 1))
    console = console or default_console()
    progress = BatchProgress(console, total=0, quiet=True)
    # An agent on Helios's model services (ModelAgent): they are the engine's for this
    # batch, and their limiter and retries the only ones its calls go through.
    services = getattr(agent, "services", None)
    services = services if isinstance(services, ModelServices) else None
    if services is not None:  # tokens, cost and the model's limit on the line
        progress.extra_source = services.live_line
    policy = retry_policy or DEFAULT_RETRY_POLICY

    def endpoint() -> EndpointCalls:
        return EndpointCalls(policy=policy, limit=limit, timeout=timeout, classify=classify)

    door = ToolCallDoor(
        synthesizer=synth, agent=agent, evaluator=evaluator or ExactEvaluator(),
        text_mode=text_mode, agent_calls=None if services is not None else endpoint(),
        synthesizer_calls=None if text_mode else endpoint(),
    )  # fmt: skip
    door.plan(units)
    by_id: dict[str, SingleRunResult] = {}

    def keep(unit: RunUnit, result: SingleRunResult) -> None:
        by_id[unit.trial_id] = result

    config = RunConfig(
        kind="toolcalls",
        concurrency=ConcurrencyConfig(in_flight=limit),
        sandbox=SandboxConfig(provider=None),  # each run's episode has the null sandbox
        outputs=OutputsConfig(resume=Path(resume), force=force) if resume is not None
        else OutputsConfig(parent=Path(output_dir), prefix="toolcalls")
        if output_dir is not None else OutputsConfig(),
        identity=_identity(agent, door.evaluator, synth),
        recorded={"runs": len(units), "max_concurrency": limit},
        config={
            "settings": dict(settings or {}), "runs": len(units), "max_concurrency": limit,
            "timeout": timeout, "retry_policy": dump_config(policy),
            "agent": type(agent).__name__, "evaluator": type(door.evaluator).__name__,
            "synthesizer": type(synth).__name__ if synth is not None else None,
        },
        labels=labels or RunLabels(),
    )  # fmt: skip
    show = progress if _show(show_progress, console) else None

    def finish(outcome: RunOutcome[RunUnit, SingleRunResult]) -> BatchResult:
        for record in outcome.plan.finished:  # a resume's runs recorded before
            by_id.setdefault(str(record["trial_id"]), _from_record(record))
        batch = _collect(units, by_id, outcome.aborted)
        if not engine_run.in_memory:
            from helios.toolcalls.report import batch_document

            document = batch_document(batch, duration=outcome.seconds)
            write_json_atomic(engine_run.run_dir / SUMMARY_FILE, document)
        return batch

    async with Run() as engine_run:
        await engine_run.open(config)
        try:
            done = None if engine_run.in_memory else engine_run.store.load_index()
            return await engine_run.drive(
                door, units, done=done, emit=progress.handle, on_recorded=keep,
                services=services, display=show, finish=finish,
            )  # fmt: skip
        finally:
            for component in {id(c): c for c in (agent, synthesizer, synth)}.values():
                if type(component).__module__.startswith("helios."):
                    await aclose_quietly(component)
                    await aclose_quietly(getattr(component, "inner", None))


def _identity(agent: Any, evaluator: Any, synthesizer: Any) -> dict[str, Any]:
    """What a resume must match: the components (by their class) that change results."""
    return {"components": {
        "agent": type(agent).__name__, "evaluator": type(evaluator).__name__,
        "synthesizer": type(synthesizer).__name__ if synthesizer is not None else None,
    }}  # fmt: skip


def _from_record(record: dict[str, Any]) -> SingleRunResult:
    """A run recorded by an earlier invocation, as its result."""
    fields = set(SingleRunResult.model_fields)
    return SingleRunResult.model_validate({k: v for k, v in record.items() if k in fields})


def _collect(units: RunPlan, by_id: dict[str, SingleRunResult],
             aborted: str | None) -> BatchResult:  # fmt: skip
    """Every unit's result in (case, run) order; units never started are failed runs."""
    results = []
    cases = enumerate(units.cases)
    for unit in (units.unit(i, run) for i, case in cases for run in range(case.runs)):
        found = by_id.get(unit.trial_id)
        if found is None:
            why = f"not run: the batch stopped early ({aborted})" if aborted else "not run"
            found = failed_result(unit, ErrorInfo(type="NotRun", message=why, phase="schedule"))
        results.append(found)
    return BatchResult(runs=results)


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
    More keywords: cache, retry_policy, timeout, output_dir, show_progress, console
    (see `run_cases`).
    """
    if agent is None:
        raise ConfigError("run_concurrent needs an agent")
    built = _cases(prompts, cases, expect, runs)
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
