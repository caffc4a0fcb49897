"""A finished batch folder in today's format whose trials ran several models and
agents (what a job of models × agents writes), built with the real record classes:
for `helios compare --by model|agent` and the viewer's breakdown."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from helios.engine.jsonl import RecordStream
from helios.engine.store import run_metadata, write_json_atomic
from helios.tasks.results import TrialResult
from helios.usage import Usage

#: (model, agent) -> task -> its attempts' outcomes
Plan = Mapping[tuple[str | None, str], Mapping[str, Sequence[bool]]]


def write_multi_model_run(run_dir: Path, plan: Plan, **meta: Any) -> Path:
    """run.json (with `meta`: a name, tags…), a TrialResult line per attempt of each
    model and agent, a folder with result.json per trial, and the summary."""
    run_dir.mkdir(parents=True)
    models = sorted({m for m, _ in plan if m is not None})
    agents = sorted({a for _, a in plan})
    write_json_atomic(run_dir / "run.json", run_metadata(
        "batch", agent=", ".join(agents), model=", ".join(models) or None, provider="local",
        n_attempts=max(len(p) for tasks in plan.values() for p in tasks.values()), **meta,
    ))  # fmt: skip
    stream = RecordStream(run_dir / "results.jsonl")
    passed = total = 0
    for (model, agent), tasks in plan.items():
        for index, (task, passes) in enumerate(tasks.items()):
            for attempt, ok in enumerate(passes, start=1):
                key = f"{model}-{agent}-{index:03d}-{attempt}".replace("/", "_")
                trial = TrialResult(
                    trial_id=key, task_name=task, task_path=f"/t/{task}", attempt=attempt,
                    agent=agent, model=model, provider="local",
                    status="passed" if ok else "failed", reward=float(ok), duration=1.5,
                    usage=Usage(cost_usd=0.01), started_at="t", finished_at="t",
                    folder=f"{key}_{task}",
                )  # fmt: skip
                record = trial.model_dump(mode="json")
                write_json_atomic(run_dir / trial.folder / "result.json", record)
                stream.append(record)
                passed, total = passed + ok, total + 1
    stream.close()
    write_json_atomic(run_dir / "batch_summary.json", {
        "duration_seconds": 9.0, "pass_rate": passed / total, "passed": passed,
        "total_trials": total,
    })  # fmt: skip
    return run_dir
