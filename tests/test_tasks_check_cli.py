"""`helios tasks check` and `helios batch` report schema features, unsupported
tasks (apart from invalid ones) and unknown keys."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import helios_cmd
from .harbor_tasks import USERS_DOCKERFILE, USERS_SOLVE, USERS_TEST, USERS_TOML, task

pytestmark = pytest.mark.usefixtures("need_bwrap")


def _helios(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        helios_cmd(*args), cwd=cwd, capture_output=True, text=True, timeout=300,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "250", "HOME": str(cwd)},
    )  # fmt: skip


def _tasks(root: Path) -> Path:
    task(root, "users", USERS_TOML, solve=USERS_SOLVE, test=USERS_TEST, dockerfile=USERS_DOCKERFILE)
    task(root, "gpu", "[environment]\ngpus = 2\n[agent]\ntypo_key = 1\n")
    task(
        root, "plain", "[environment]\nmemory_mb = 256\n[agent]\ntypo_key = 1\n",
        solve="touch /app/done\n",
        test="if [ -e /app/done ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n",
    )  # fmt: skip
    return root


def test_check_lists_features_and_counts_unsupported_apart(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path / "tasks")
    task(tasks, "broken", '[agent]\ntimeout_sec = "soon"\n')
    result = _helios("tasks", "check", str(tasks), "--provider", "local", cwd=tmp_path)
    out = result.stdout
    assert result.returncode == 1, result.stderr  # the invalid task
    assert "Task features" in out and "agent user" in out and "workdir" in out
    assert "users are identities only" in out  # what local honours only in part
    unsupported = [line for line in out.splitlines() if line.startswith("unsupported task")]
    assert len(unsupported) == 1 and "unsupported: environment.gpus" in unsupported[0]
    assert [line for line in out.splitlines() if line.startswith("invalid")] != []
    warnings = [line for line in out.splitlines() if line.startswith("warning")]
    assert len(warnings) == 1 and "agent.typo_key (2 tasks)" in warnings[0]
    assert "1 broken task(s)" in out

    shutil.rmtree(tasks / "broken")
    healthy = _helios("tasks", "check", str(tasks), "--provider", "local", cwd=tmp_path)
    assert healthy.returncode == 0, healthy.stdout
    assert "all 2 tasks healthy (1 unsupported, not run)" in healthy.stdout


def test_batch_summary_counts_unsupported_apart(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path / "tasks")
    result = _helios(
        "batch", str(tasks), "--provider", "local", "--agent", "oracle", "-o", "out",
        "--fail-under", "0.9", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 1  # 2 of 3 tasks pass: the unsupported one counts as failed
    assert "unsupported and" in result.stderr or "unsupported" in result.stderr
    assert "Unsupported tasks" in result.stdout
    (run_dir,) = (tmp_path / "out").iterdir()
    summary = json.loads((run_dir / "batch_summary.json").read_text())
    assert (summary["passed"], summary["invalid"], summary["unsupported"]) == (2, 0, 1)
    assert summary["unsupported_tasks"][0]["path"].endswith("gpu")
    assert summary["unknown_keys"] == {"agent.typo_key": 2}


def test_only_unsupported_tasks_is_bad_input(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    task(tasks, "gpu", "[environment]\ngpus = 2\n")
    result = _helios("batch", str(tasks), "--provider", "local", "--agent", "oracle",
                     "-o", "out", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2
    assert "no task to run (0 invalid, 1 unsupported)" in result.stderr
    assert "Traceback" not in result.stderr
