"""A tool-call batch's units: its cases (a prompt, its expected calls, its runs) and
every run of them (`RunPlan`, made lazily), and the batch's result in case order."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

from helios.errors import ConfigError
from helios.failures import ErrorInfo
from helios.models.base import ToolCall
from helios.toolcalls.door import RunUnit, failed_result, unit_id
from helios.toolcalls.helpers import coerce_call
from helios.toolcalls.types import BatchResult, SingleRunResult

#: runs (prompts × runs) one batch may have: each run's result is kept in memory
#: (about 4 KB) for the BatchResult, and the runs themselves are made lazily
MAX_RUNS = 100_000


@dataclass(frozen=True)
class Case:
    """One prompt with its expected calls and how many runs it gets."""

    prompt: str
    expect: tuple[ToolCall, ...] = ()
    runs: int = 1
    test_id: str | None = None


def expect_calls(expect: Sequence[Any] | None) -> tuple[ToolCall, ...]:
    return tuple(coerce_call(call) for call in (expect or []))


def build_cases(prompts: str | Sequence[str] | None, cases: Sequence[Any] | None,
           expect: Sequence[Any] | None, runs: int) -> list[Case]:  # fmt: skip
    if (prompts is None) == (cases is None):
        raise ConfigError("give either prompts= (with expect=) or cases=[(prompt, expect), ...]")
    if runs < 1:
        raise ConfigError(f"runs must be at least 1, got {runs}")
    if cases is None:
        texts = [prompts] if isinstance(prompts, str) else list(prompts or [])
        return [Case(text, expect_calls(expect), runs) for text in texts]
    built = []
    for item in cases:
        if isinstance(item, Case):
            built.append(item)
        else:
            prompt, case_expect = item
            built.append(Case(prompt, expect_calls(case_expect), runs))
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


def from_record(record: dict[str, Any]) -> SingleRunResult:
    """A run recorded by an earlier invocation, as its result."""
    fields = set(SingleRunResult.model_fields)
    return SingleRunResult.model_validate({k: v for k, v in record.items() if k in fields})


def collect(units: RunPlan, by_id: dict[str, SingleRunResult],
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
