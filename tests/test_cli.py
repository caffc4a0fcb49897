"""The CLI as a user runs it: exit codes, one-line errors, the display."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from .cli_inprocess import helios_inprocess
from .conftest import TaskMaker, helios_cmd


def _run_line(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A command line as a user types it (test paths have no spaces)."""
    return _helios(*shlex.split(command), cwd=cwd)


def _helios(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(helios_cmd(*args), capture_output=True, text=True, cwd=cwd, timeout=300)


def _refused(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A command refused before it starts anything, run in this process (its exit code
    and stderr are those of the console script: tests/cli_inprocess.py); the other
    tests run the console script itself."""
    return helios_inprocess(*args, cwd=cwd)


def test_help_lists_commands(tmp_path: Path) -> None:
    result = _helios("--help", cwd=tmp_path)
    assert result.returncode == 0
    for command in ("run", "batch", "tasks", "cleanup"):
        assert command in result.stdout


@pytest.mark.usefixtures("need_bwrap")
def test_batch_local_oracle_and_summary(examples_copy: Path, tmp_path: Path) -> None:
    result = _run_line(
        f"batch {examples_copy} --provider local --agent oracle -n 4 -k 2 -o out", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert "Batch Results" in result.stdout
    assert "pass@2: 100.0%" in result.stdout and "Raw: " in result.stdout
    (run_dir,) = (tmp_path / "out").iterdir()
    assert run_dir.name.startswith("batch_")
    summary = json.loads((run_dir / "batch_summary.json").read_text())
    assert summary["passed"] == summary["total_trials"] == 2 * summary["n_unique_tasks"]


@pytest.mark.usefixtures("need_bwrap")
def test_fail_under_exits_1(examples_copy: Path, tmp_path: Path) -> None:
    result = _run_line(
        f"batch {examples_copy} --provider local --agent nop -q --fail-under 0.5", cwd=tmp_path
    )
    assert result.returncode == 1
    assert "below --fail-under" in result.stderr


def test_bad_input_exits_2_with_one_line(tmp_path: Path) -> None:
    missing = _refused("batch", str(tmp_path / "nope"), "--agent", "oracle", cwd=tmp_path)
    assert missing.returncode == 2
    assert "nope" in missing.stderr and "Traceback" not in missing.stderr
    provider = _refused(
        "batch", str(tmp_path), "--provider", "kubernetes", "--agent", "nop", cwd=tmp_path
    )
    assert provider.returncode == 2
    assert "unknown provider 'kubernetes'" in provider.stderr and "docker" in provider.stderr
    agent = _refused("batch", str(tmp_path), "--agent", "wizard", cwd=tmp_path)
    assert agent.returncode == 2 and "unknown agent 'wizard'" in agent.stderr
    assert len(agent.stderr.strip().splitlines()) == 1


@pytest.mark.usefixtures("need_bwrap")
def test_malformed_task_one_line_rest_run(examples_copy: Path, tmp_path: Path) -> None:
    (examples_copy / "word-count" / "task.toml").write_text('[agent]\ntimeout_sec = "x"\n')
    result = _run_line(f"batch {examples_copy} --provider local --agent oracle -n 4", cwd=tmp_path)
    assert result.returncode == 0
    lines = [line for line in result.stdout.splitlines() if "invalid task" in line]
    assert len(lines) == 1
    assert "word-count/task.toml:2" in lines[0] and "agent.timeout_sec" in lines[0]
    assert "Invalid tasks" in result.stdout


@pytest.mark.usefixtures("need_bwrap")
def test_tasks_check_flags_broken_copies(examples_copy: Path, tmp_path: Path) -> None:
    healthy = _helios("tasks", "check", str(examples_copy), "--provider", "local", cwd=tmp_path)
    assert healthy.returncode == 0 and "healthy" in healthy.stdout
    wrong = examples_copy / "hello-wrong"
    shutil.copytree(examples_copy / "hello-file", wrong)
    (wrong / "solution" / "solve.sh").write_text("#!/bin/sh\necho nope > /app/hello.txt\n")
    lax = examples_copy / "hello-lax"
    shutil.copytree(examples_copy / "hello-file", lax)
    (lax / "tests" / "test.sh").write_text("#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n")
    broken = _helios("tasks", "check", str(examples_copy), "--provider", "local", cwd=tmp_path)
    assert broken.returncode == 1
    assert "2 broken task(s)" in broken.stdout
    assert "hello-wrong" in broken.stdout and "hello-lax" in broken.stdout
    assert "nop passes" in broken.stdout and "oracle below 1.0" in broken.stdout


@pytest.mark.usefixtures("need_bwrap")
def test_tasks_check_runs_a_task_with_skills_and_names_who_cannot_take_them(
    examples_copy: Path, tmp_path: Path
) -> None:
    """Skills are offered to the agent: the oracle and nop run the task (before,
    every agent's run refused it)."""
    tasks = tmp_path / "skills"
    shutil.copytree(examples_copy / "hello-file", tasks / "hello-skills")
    toml = tasks / "hello-skills" / "task.toml"
    toml.write_text(toml.read_text().replace("[environment]", '[environment]\nskills_dir = "/s"'))
    done = _helios("tasks", "check", str(tasks), "--provider", "local", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all 1 tasks healthy" in done.stdout and "unsupported" not in done.stdout
    # the tool agent takes skills too; the computer agent does not
    assert "skills_dir" in done.stdout and "computer" in done.stdout


@pytest.mark.usefixtures("need_bwrap")
def test_run_single_task(examples_copy: Path, tmp_path: Path) -> None:
    result = _run_line(
        f"run {examples_copy / 'sort-unique'} --provider local --agent oracle -o out", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert "sort-unique" in result.stdout
    (run_dir,) = (tmp_path / "out").iterdir()
    assert run_dir.name.startswith("run_")


@pytest.mark.usefixtures("need_docker")
def test_examples_on_docker_k3_leave_no_container(examples_copy: Path, tmp_path: Path) -> None:
    result = _run_line(
        f"batch {examples_copy} --provider docker --agent oracle -n 4 -k 3 -q -o out", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    (run_dir,) = (tmp_path / "out").iterdir()
    summary = json.loads((run_dir / "batch_summary.json").read_text())
    assert summary["passed"] == summary["total_trials"] == 3 * summary["n_unique_tasks"]
    assert summary["pass_at_k"]["pass@3"] == 1.0
    # this run's containers: other batches may be running on the same engine
    run_id = json.loads((run_dir / "run.json").read_text())["run_id"]
    leftovers = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=helios.run={run_id}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert leftovers.stdout.split() == []


def test_no_tasks_found_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = _run_line(
        f"batch {tmp_path / 'empty'} --agent oracle --provider local -o out", cwd=tmp_path
    )
    assert result.returncode == 2
    assert "no task.toml matching" in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.usefixtures("need_bwrap")
def test_a_batch_where_every_trial_errored_exits_2(make_task: TaskMaker, tmp_path: Path) -> None:
    for name in ("a", "b"):
        make_task(name, solve=None)  # the oracle has no solution to run: an error
    result = _helios(
        "batch", str(tmp_path / "tasks"), "--provider", "local", "--agent", "oracle", "-o", "out",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert "every trial errored (2)" in result.stderr and "no solution/solve.sh" in result.stderr
    # one errored trial among passing ones is a result like any other
    make_task("c")
    mixed = _helios(
        "batch", str(tmp_path / "tasks"), "--provider", "local", "--agent", "oracle", "-o", "out",
        cwd=tmp_path,
    )  # fmt: skip
    assert mixed.returncode == 0, mixed.stderr


def test_the_null_provider_is_not_offered_for_tasks(tmp_path: Path) -> None:
    null = _refused("batch", str(tmp_path), "--provider", "null", "--agent", "oracle", cwd=tmp_path)
    assert null.returncode == 2
    assert "'null' has no sandbox" in null.stderr and "docker, local" in null.stderr
    typo = _refused("batch", str(tmp_path), "--provider", "nul", "--agent", "oracle", cwd=tmp_path)
    assert typo.returncode == 2 and "null" not in typo.stderr.split("known:")[1]


def test_run_on_a_folder_of_tasks_points_to_batch(examples_copy: Path, tmp_path: Path) -> None:
    result = _refused("run", str(examples_copy), "--agent", "oracle", cwd=tmp_path)
    assert result.returncode == 2
    assert f"run them with `helios batch {examples_copy}`" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
