"""Interrupts: Ctrl-C, SIGTERM and kill -9 mid-batch, then --resume finishes exactly once."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import TaskMaker, helios_cmd

N_TASKS = 6


def _slow_tasks(make_task: TaskMaker, seconds: float, later: float | None = None) -> None:
    """N_TASKS tasks that sleep `seconds`; the second half sleeps `later` when given, so
    that trials are still in flight for a while after the first lines are written."""
    for i in range(N_TASKS):
        sleep = later if later is not None and i >= N_TASKS // 2 else seconds
        make_task(
            f"slow-{i}",
            solve=f"sleep {sleep}; touch /app/ok\n",
            test="if test -e /app/ok; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n",
        )


def _batch(tasks: Path, out: Path, provider: str, *extra: str) -> list[str]:
    """The same command for the first run and the resume, as a user would retype it."""
    return helios_cmd("batch", str(tasks), "--provider", provider, "--agent", "oracle",
                      "-n", "3", "-o", str(out), "-q", *extra)  # fmt: skip


def _start(tasks: Path, out: Path, provider: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        _batch(tasks, out, provider),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_lines(out: Path, n: int, timeout: float = 120) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = list(out.glob("batch_*/results.jsonl"))
        if runs and len(runs[0].read_text().splitlines()) >= n:
            return runs[0].parent
        time.sleep(0.1)
    raise AssertionError("batch made no progress")


def _ids(run_dir: Path) -> list[str]:
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    return [json.loads(line)["trial_id"] for line in lines]


def _containers(run_dir: Path) -> list[str]:
    run_id = json.loads((run_dir / "run.json").read_text())["run_id"]
    out = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=helios.run={run_id}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()


def _resume(tasks: Path, out: Path, run_dir: Path, provider: str) -> None:
    done = subprocess.run(
        _batch(tasks, out, provider, "--resume", str(run_dir)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    ids = _ids(run_dir)
    assert len(ids) == len(set(ids)) == N_TASKS
    summary = json.loads((run_dir / "batch_summary.json").read_text())
    assert summary["passed"] == summary["total_tasks"] == N_TASKS


@pytest.mark.usefixtures("need_docker")
def test_ctrl_c_with_docker_then_resume(make_task: TaskMaker, tmp_path: Path) -> None:
    # the second wave sleeps 12 s: a busy daemon may take seconds to answer `docker ps`,
    # and a 3 s window was missed once in CI
    _slow_tasks(make_task, 1, later=12)
    tasks, out = tmp_path / "tasks", tmp_path / "out"
    proc = _start(tasks, out, "docker")
    run_dir = _wait_for_lines(out, 1)
    deadline = time.monotonic() + 30
    while not _containers(run_dir) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _containers(run_dir), "expected trials in flight"
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "--resume" in stderr and "Traceback" not in stderr
    assert _containers(run_dir) == []
    finished = _ids(run_dir)
    assert 1 <= len(finished) < N_TASKS
    _resume(tasks, out, run_dir, "docker")
    assert _containers(run_dir) == []
    assert set(finished) <= set(_ids(run_dir))


@pytest.mark.usefixtures("need_bwrap")
def test_sigterm_then_resume(make_task: TaskMaker, tmp_path: Path) -> None:
    _slow_tasks(make_task, 2)
    tasks, out = tmp_path / "tasks", tmp_path / "out"
    proc = _start(tasks, out, "local")
    run_dir = _wait_for_lines(out, 1)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    summary = json.loads((run_dir / "batch_summary.json").read_text())
    assert summary["interrupted"] is True
    # trials that finished before the signal are in the summary, not only in results.jsonl
    assert summary["total_trials"] == len(_ids(run_dir)) >= 1
    assert summary["not_run"] == N_TASKS - summary["total_trials"] > 0
    _resume(tasks, out, run_dir, "local")


@pytest.mark.usefixtures("need_bwrap")
def test_kill_9_then_resume_loses_and_duplicates_nothing(
    make_task: TaskMaker, tmp_path: Path
) -> None:
    _slow_tasks(make_task, 2)
    tasks, out = tmp_path / "tasks", tmp_path / "out"
    proc = _start(tasks, out, "local")
    run_dir = _wait_for_lines(out, 2)
    proc.kill()
    proc.communicate(timeout=30)
    before = _ids(run_dir)
    _resume(tasks, out, run_dir, "local")
    assert set(before) <= set(_ids(run_dir))
    # the trials in flight at the kill left folders: they are kept aside, not deleted
    assert list((run_dir / "_incomplete").iterdir())
    cleanup = subprocess.run(helios_cmd("cleanup"), capture_output=True, text=True, timeout=120)
    assert cleanup.returncode == 0
    assert "orphaned local sandbox" in cleanup.stdout
