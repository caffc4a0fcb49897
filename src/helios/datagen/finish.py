"""The end of a generate invocation, however it ends: the records (reviewed) become
Hermes's files (`trajectories.jsonl`, tombstones, failures, `checkpoint.json`) and
`statistics.json`; what is written is returned for the result and the final table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helios.agents.toolsets.hermes import all_hermes_tool_names
from helios.datagen.folder import STATISTICS, orphan_rows
from helios.datagen.outputs import (
    MergeResult,
    checkpoint_document,
    final_records,
    merge_rows,
    write_checkpoint,
    write_tombstones_and_failures,
)
from helios.datagen.session import review_records
from helios.datagen.settings import GenerateSettings
from helios.datagen.statistics import RunTotals, statistics_document, totals
from helios.datagen.units import PromptUnit
from helios.engine.store import RunStore, write_json_atomic


@dataclass
class Written:
    #: the final record of each prompt
    finals: dict[str, dict[str, Any]]
    merge: MergeResult
    tombstones: int
    failures: int
    totals: RunTotals
    statistics: dict[str, Any]


def write_outputs(
    settings: GenerateSettings, run_dir: Path, store: RunStore, units: Sequence[PromptUnit], *,
    bad_lines: int, seconds: float, invocation_seconds: float,
    budget: dict[str, Any] | None = None,
) -> Written:  # fmt: skip
    s = settings
    records = review_records(run_dir, store.load_records())
    finals = final_records(records.values())
    merge = merge_rows(run_dir, finals.values(), set(all_hermes_tool_names()))
    n_tombstones, n_failures = write_tombstones_and_failures(run_dir, finals, merge.dropped, units)
    write_checkpoint(run_dir, checkpoint_document(s.run_name, records.values(), units))
    run = totals(finals.values(), n_failures)
    statistics = statistics_document(
        run_name=s.run_name, distribution=s.distribution, total_prompts=len(units),
        batch_size=s.batch_size, model=s.model, duration=invocation_seconds,
        total_duration=seconds, run=run, merge=merge, bad_lines=bad_lines,
        failed_prompts=n_failures, tombstones=n_tombstones,
        orphan_rows=orphan_rows(run_dir, records.values()),
    )  # fmt: skip
    if budget is not None:  # the budgets, which one stopped the run, the spend
        statistics["budget"] = budget
    write_json_atomic(run_dir / STATISTICS, statistics)
    return Written(finals, merge, n_tombstones, n_failures, run, statistics)
