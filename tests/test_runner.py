"""The task front door end to end through the Python API, on the local sandbox."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from helios import AgentRunner, ParallelRunner
from helios.tasks.summary import TaskResult

from .conftest import TaskMaker

pytestmark = pytest.mark.usefixtures("need_bwrap")


def _run(tasks: Any, out: Path, **kwargs: Any) -> Any:
    kwargs.setdefault("provider", "local")
    kwargs.setdefault("show_progress", False)
    return asyncio.run(ParallelRunner(tasks, output_dir=out, **kwargs).run())


def test_examples_pass_with_oracle_and_fail_with_nop(examples_copy: Path, tmp_path: Path) -> None:
    seen: list[tuple[str, TaskResult]] = []

    async def on_complete(name: str, result: TaskResult) -> None:
        seen.append((name, result))

    oracle = _run(
        examples_copy, tmp_path / "o", agent="oracle", n_concurrent=4, on_complete=on_complete
    )
    assert oracle.total_tasks == oracle.passed == len(seen) >= 6
    assert oracle.mean_reward == 1.0
    nop = _run(examples_copy, tmp_path / "n", agent="nop", n_concurrent=4)
    assert nop.passed == 0 and nop.failed == nop.total_tasks
    summary = json.loads((oracle.output_dir / "batch_summary.json").read_text())
    for key in ("total_tasks", "passed", "failed", "mean_reward", "duration_seconds", "model"):
        assert key in summary
    assert {t["name"] for t in summary["tasks"]} == {r.name for r in oracle.results}
    required = {"name", "status", "reward", "duration", "error"}
    assert all(set(t) >= required for t in summary["tasks"])
    assert summary["pass_at_k"] is None  # one attempt: null, never left out
    trial_dir = oracle.output_dir / oracle.results[0].folder
    names = {p.name for p in trial_dir.iterdir()}
    assert names >= {"agent", "verifier", "config.json", "result.json"}
    assert (trial_dir / "verifier" / "reward.txt").exists() or (
        trial_dir / "verifier" / "reward.json"
    ).exists()


def test_partial_reward_and_reward_json(examples_copy: Path, tmp_path: Path) -> None:
    config = examples_copy / "config-edit"
    (config / "solution" / "solve.sh").write_text(
        "#!/bin/sh\nsed -i 's/^port=.*/port=8080/' /app/app.conf\n"
    )
    csv = examples_copy / "csv-report"
    (csv / "solution" / "solve.sh").write_text("#!/bin/sh\necho 'rows: 12' > /app/report.txt\n")
    batch = _run([config, csv], tmp_path / "out", agent="oracle")
    rewards = {r.name: r.reward for r in batch.results}
    assert rewards["config-edit"] == pytest.approx(1 / 3, abs=1e-3)
    assert rewards["csv-report"] == 0.5
    assert batch.passed == 0
    result = json.loads((batch.output_dir / batch.results[1].folder / "result.json").read_text())
    assert result["rewards"] == {"reward": 0.5, "total": 0.0, "rows": 1.0}


def test_k_attempts_interleaved_with_pass_at_k(make_task: TaskMaker, tmp_path: Path) -> None:
    make_task(
        "always",
        solve="touch /app/ok\n",
        test="test -e /app/ok && echo 1 > "
        "/logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n",
    )
    make_task("never", test="echo 0 > /logs/verifier/reward.txt\n")
    order: list[tuple[str, int]] = []
    batch = _run(
        tmp_path / "tasks",
        tmp_path / "out",
        agent="oracle",
        n_attempts=3,
        n_concurrent=1,
        on_complete=lambda name, r: order.append((name, r.attempt)),
    )
    assert order == [
        ("always", 1),
        ("never", 1),
        ("always", 2),
        ("never", 2),
        ("always", 3),
        ("never", 3),
    ]
    assert batch.n_attempts == 3 and batch.n_unique_tasks == 2
    assert batch.pass_at_k_table["pass@3"] == 0.5
    assert batch.pass_at_k == 50.0  # the docs' percentage
    summary = json.loads((batch.output_dir / "batch_summary.json").read_text())
    assert summary["n_attempts"] == 3
    assert summary["pass_at_k"]["pass@1"] == 0.5
    low, high = summary["pass_at_k_ci95"]["pass@3"]  # two tasks: 1.0 and 0.0
    assert 0.0 <= low <= 0.5 <= high <= 1.0 and low < high
    assert summary["raw_pass_rate"] == 0.5
    assert (batch.output_dir / "001_always" / "attempt_002" / "result.json").is_file()


def test_malformed_task_is_counted_and_others_run(examples_copy: Path, tmp_path: Path) -> None:
    (examples_copy / "hello-file" / "task.toml").write_text("version = \n")
    batch = _run(examples_copy, tmp_path / "out", agent="oracle", n_concurrent=4)
    assert len(batch.invalid) == 1 and "hello-file" in batch.invalid[0].path
    assert batch.passed == batch.total_tasks >= 5
    summary = json.loads((batch.output_dir / "batch_summary.json").read_text())
    assert summary["invalid"] == 1
    assert "task.toml:1" in summary["invalid_tasks"][0]["error"]


def test_verifier_ignores_agent_written_reward_and_reports_missing(
    make_task: TaskMaker, tmp_path: Path
) -> None:
    make_task(
        "cheat",
        solve="mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt\n",
        test="echo 'no reward written'\n",
    )
    batch = _run(tmp_path / "tasks", tmp_path / "out", agent="oracle")
    (result,) = batch.results
    assert result.reward == 0.0 and result.status == "failed"
    assert result.error is not None and result.error.startswith("RewardFileMissing")
    out = (batch.output_dir / result.folder / "verifier" / "test-stdout.txt").read_text()
    assert out == "no reward written\n"


def test_phase_timeouts(make_task: TaskMaker, tmp_path: Path) -> None:
    make_task("slow-agent", solve="sleep 30\n", agent_timeout=1)
    make_task("slow-test", test="sleep 30\n", verifier_timeout=1)
    batch = _run(tmp_path / "tasks", tmp_path / "out", agent="oracle", n_concurrent=2)
    by_name = {r.name: r for r in batch.results}
    # the agent timing out is partial: still verified (this test always gives 1)
    assert by_name["slow-agent"].reward == 1.0
    folder = batch.output_dir / by_name["slow-agent"].folder
    record = json.loads((folder / "result.json").read_text())
    assert record["agent_error"]["type"] == "AgentTimeout"
    assert by_name["slow-test"].reward == 0.0
    assert (by_name["slow-test"].error or "").startswith("VerifierTimeout")
    assert batch.duration < 25


def test_resume_skips_finished_and_moves_leftovers(examples_copy: Path, tmp_path: Path) -> None:
    first = _run(examples_copy, tmp_path / "out", agent="oracle", n_concurrent=4)
    run_dir = first.output_dir
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    # forget the last trial as if killed before its line, leaving its folder behind
    dropped = json.loads(lines[-1])
    (run_dir / "results.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    again = _run(examples_copy, tmp_path / "out", agent="oracle", resume=run_dir)
    ids = [json.loads(x)["trial_id"] for x in (run_dir / "results.jsonl").read_text().splitlines()]
    assert sorted(ids) == sorted(set(ids)) and dropped["trial_id"] in ids
    assert len(ids) == len(lines) == again.total_tasks == again.passed
    aside = list((run_dir / "_incomplete").iterdir())
    assert len(aside) == 1 and (aside[0] / "result.json").is_file()


def test_retry_failed_below_reruns_the_low_trial_beside_the_old(
    make_task: TaskMaker, tmp_path: Path
) -> None:
    from helios.results.harbor_export import _read_trials
    from helios.results.runs import _trial_tasks

    make_task("high")
    make_task("low", test="echo 0 > /logs/verifier/reward.txt\n")
    first = _run(tmp_path / "tasks", tmp_path / "out", agent="oracle", n_concurrent=2)
    run_dir = first.output_dir
    low = next(r for r in first.results if r.name == "low")
    again = _run(tmp_path / "tasks", tmp_path / "out", agent="oracle", resume=run_dir,
                 retry_failed_below=0.5)  # fmt: skip
    lines = [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]
    assert len(lines) == 3 and lines[-1]["retry_of"] == low.trial_id and lines[-1]["retry"] == 1
    assert again.total_tasks == 2 and again.passed == 1 and again.failed == 1  # counted once
    retried = next(r for r in again.results if r.name == "low")
    assert retried.retry == 1 and retried.folder == f"{low.folder}__retry1"
    assert (run_dir / low.folder / "result.json").is_file()  # the old attempt stays
    assert (run_dir / retried.folder / "result.json").is_file()
    summary = json.loads((run_dir / "batch_summary.json").read_text())
    assert [t.get("retry") for t in summary["tasks"] if t["name"] == "low"] == [1]
    assert sum(len(a) for a in _trial_tasks(run_dir, []).values()) == 2  # compare: once
    trials, replaced = _read_trials(run_dir / "results.jsonl", [])  # a Harbor export: once
    assert sorted(t.folder for t in trials) == sorted(["001_high", retried.folder]) != []
    assert replaced == 1


def test_retry_errors_only_when_asked(make_task: TaskMaker, tmp_path: Path) -> None:
    make_task("nosolution", solve=None)  # oracle raises → trial error
    first = _run(tmp_path / "tasks", tmp_path / "out", agent="oracle")
    assert first.errored == 1
    run_dir = first.output_dir
    _run(tmp_path / "tasks", tmp_path / "out", agent="oracle", resume=run_dir)
    assert len((run_dir / "results.jsonl").read_text().splitlines()) == 1
    _run(tmp_path / "tasks", tmp_path / "out", agent="oracle", resume=run_dir, retry_errors=True)
    assert len((run_dir / "results.jsonl").read_text().splitlines()) == 2


def test_agent_runner_single_task(examples_copy: Path, tmp_path: Path) -> None:
    runner = AgentRunner(
        examples_copy / "hello-file",
        provider="local",
        agent="oracle",
        output_dir=tmp_path,
        show_progress=False,
    )
    result = asyncio.run(runner.run())
    assert result.total_tasks == 1 and result.passed == 1
    assert result.output_dir is not None and result.output_dir.name.startswith("run_")


def test_trial_ids_are_stable_and_content_based(examples_copy: Path, tmp_path: Path) -> None:
    a = _run(examples_copy / "hello-file", tmp_path / "a", agent="oracle")
    b = _run(examples_copy / "hello-file", tmp_path / "b", agent="oracle")
    assert a.results[0].trial_id == b.results[0].trial_id
    (examples_copy / "hello-file" / "instruction.md").write_text("changed\n")
    c = _run(examples_copy / "hello-file", tmp_path / "c", agent="oracle")
    assert c.results[0].trial_id != a.results[0].trial_id
    d = _run(examples_copy / "hello-file", tmp_path / "d", agent="nop")
    assert d.results[0].trial_id not in {a.results[0].trial_id, c.results[0].trial_id}


def test_identical_task_folders_are_distinct_trials(make_task: TaskMaker, tmp_path: Path) -> None:
    for name in ("twin-a", "twin-b"):
        make_task(name)
    batch = _run(tmp_path / "tasks", tmp_path / "out", agent="oracle", n_concurrent=2)
    assert batch.total_tasks == 2 and batch.n_unique_tasks == 2
    assert len({r.trial_id for r in batch.results}) == 2
