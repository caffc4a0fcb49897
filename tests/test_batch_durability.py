"""Nothing lost, nothing mixed: run-folder lock, resume settings, trial identity,
bad task files, failing callbacks and output I/O, through the task door."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from helios import ParallelRunner
from helios.tasks.door import TaskDoor

from .cli_inprocess import helios_inprocess
from .conftest import TaskMaker, helios_cmd

pytestmark = pytest.mark.usefixtures("need_bwrap")
PASS_IF_OK = "if test -e /app/ok; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"


def _helios(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`helios ARGS` in-process (tests/cli_inprocess.py): the commands here end by
    themselves, with an exit code of their own; the signal tests start a process."""
    return helios_inprocess(*args, cwd=cwd)


def _run(tasks: Any, out: Path, **kwargs: Any) -> Any:
    kwargs.setdefault("provider", "local")
    kwargs.setdefault("agent", "oracle")
    kwargs.setdefault("show_progress", False)
    return asyncio.run(ParallelRunner(tasks, output_dir=out, **kwargs).run())


def _records(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def test_a_second_resume_of_a_running_batch_exits_2_at_once(
    make_task: TaskMaker, tmp_path: Path
) -> None:
    # long enough that the second command (in-process, no Python start: before, that
    # took seconds on a loaded machine, and CI saw the first batch end before it) meets
    # the first still running
    for i in range(3):
        make_task(f"slow-{i}", solve="sleep 10; touch /app/ok\n", test=PASS_IF_OK)
    tasks, out = tmp_path / "tasks", tmp_path / "out"
    command = ["batch", str(tasks), "--provider", "local", "--agent", "oracle", "-q", "-o"]
    first = subprocess.Popen(helios_cmd(*command, str(out)), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not list(out.glob("batch_*/run.json")) and time.monotonic() < deadline:
            time.sleep(0.05)
        (run_dir,) = out.glob("batch_*")
        started = time.monotonic()
        second = _helios(*command, str(out), "--resume", str(run_dir), cwd=tmp_path)
        assert first.poll() is None, "the first batch ended before the second started"
        assert second.returncode == 2 and time.monotonic() - started < 10
        assert "in use by another Helios process" in second.stderr
        assert len(second.stderr.strip().splitlines()) == 1
    finally:
        first.wait(timeout=60)
    assert first.returncode == 0
    assert len(_records(run_dir)) == 3  # the first process alone ran each trial once


def test_resume_with_another_agent_is_refused_unless_forced(
    make_task: TaskMaker, tmp_path: Path
) -> None:
    make_task("t", solve="touch /app/ok\n", test=PASS_IF_OK)
    batch = _run(tmp_path / "tasks", tmp_path / "out")
    refused = _helios("batch", str(tmp_path / "tasks"), "--provider", "local", "--agent", "nop",
                      "--resume", str(batch.output_dir), cwd=tmp_path)  # fmt: skip
    assert refused.returncode == 2
    assert "agent='oracle', not 'nop'" in refused.stderr and "--force" in refused.stderr
    forced = _helios("batch", str(tmp_path / "tasks"), "--provider", "local", "--agent", "nop",
                     "--resume", str(batch.output_dir), "--force", "-q", cwd=tmp_path)  # fmt: skip
    assert forced.returncode == 0, forced.stderr


def test_identical_tasks_in_two_folders_are_two_units(make_task: TaskMaker, tmp_path: Path) -> None:
    root = tmp_path / "suite"
    for group in ("a", "b"):
        make_task("slow-1", solve="touch /app/ok\n", test=PASS_IF_OK, root=root / group)
    first = _run(root, tmp_path / "out")
    assert first.total_tasks == 2 and len({r.trial_id for r in first.results}) == 2
    # Moving the whole suite keeps every id: a resume from the new place has nothing to do.
    moved = tmp_path / "suite-renamed"
    shutil.move(str(root), str(moved))
    again = _run(moved, tmp_path / "out", resume=first.output_dir)
    assert again.total_tasks == 2 and len(_records(first.output_dir)) == 2


def test_a_failing_on_complete_is_logged_and_the_batch_goes_on(
    make_task: TaskMaker, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    for i in range(3):
        make_task(f"t{i}", solve="touch /app/ok\n", test=PASS_IF_OK)

    def boom(name: str, result: Any) -> None:
        raise RuntimeError(f"callback bug on {name}")

    with caplog.at_level(logging.ERROR):
        batch = _run(tmp_path / "tasks", tmp_path / "out", on_complete=boom)
    assert batch.passed == 3
    failures = [r for r in caplog.records if "on_complete callback failed" in r.getMessage()]
    assert len(failures) == 3 and "callback bug on t" in failures[0].getMessage()


def test_an_io_error_writing_a_result_is_that_trials_error(
    make_task: TaskMaker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(3):
        make_task(f"t{i}", solve="touch /app/ok\n", test=PASS_IF_OK)
    real = TaskDoor.write_files

    def flaky_write(self: TaskDoor, unit: Any, result: Any) -> None:
        if unit.task.name == "t1":
            raise PermissionError(13, "Permission denied", "result.json")
        real(self, unit, result)

    monkeypatch.setattr(TaskDoor, "write_files", flaky_write)
    batch = _run(tmp_path / "tasks", tmp_path / "out")
    statuses = {r.name: (r.status, r.error) for r in batch.results}
    assert statuses["t0"][0] == statuses["t2"][0] == "passed"
    assert statuses["t1"][0] == "error" and "Permission denied" in (statuses["t1"][1] or "")


def test_non_utf8_task_files_make_only_that_task_invalid(
    make_task: TaskMaker, tmp_path: Path
) -> None:
    make_task("good", solve="touch /app/ok\n", test=PASS_IF_OK)
    make_task("bad-toml")
    (tmp_path / "tasks" / "bad-toml" / "task.toml").write_bytes(b'version = "1.0"\n# \xff\xfe\n')
    make_task("bad-instruction")
    (tmp_path / "tasks" / "bad-instruction" / "instruction.md").write_bytes(b"caf\xe9\n")
    make_task("bad-name")
    (tmp_path / "tasks" / "bad-name" / "environment").joinpath(
        b"\xff.txt".decode("utf-8", "surrogateescape")
    ).write_text("x")
    result = _helios("batch", str(tmp_path / "tasks"), "--provider", "local", "--agent",
                     "oracle", "-o", str(tmp_path / "out"), cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    for name in ("bad-toml/task.toml", "bad-instruction/instruction.md", "bad-name"):
        assert name in result.stdout and "not valid UTF-8" in result.stdout
    (run_dir,) = (tmp_path / "out").iterdir()
    summary = json.loads((run_dir / "batch_summary.json").read_text())
    assert summary["passed"] == 1 and summary["invalid"] == 3


def test_all_invalid_and_bad_patterns_exit_2(make_task: TaskMaker, tmp_path: Path) -> None:
    broken = make_task("broken")
    (broken / "task.toml").write_text("version = \n")
    for args in (
        ["batch", str(tmp_path / "tasks"), "--agent", "oracle", "--provider", "local"],
        ["run", str(broken), "--agent", "oracle", "--provider", "local"],
        ["batch", str(tmp_path / "tasks"), "--agent", "oracle", "-p", "/etc/*"],
        ["batch", str(tmp_path / "tasks"), "--agent", "oracle", "-p", ""],
    ):
        result = _helios(*args, "-o", str(tmp_path / "out"), cwd=tmp_path)
        assert result.returncode == 2, (args, result.stderr)
        assert "Traceback" not in result.stderr and "internal error" not in result.stderr


def test_invalid_tasks_count_against_fail_under(make_task: TaskMaker, tmp_path: Path) -> None:
    make_task("good", solve="touch /app/ok\n", test=PASS_IF_OK)
    (make_task("broken") / "task.toml").write_text("[environment]\ncpus = -1\n")
    result = _helios("batch", str(tmp_path / "tasks"), "--provider", "local", "--agent",
                     "oracle", "-q", "--fail-under", "0.9", "-o", str(tmp_path / "out"),
                     cwd=tmp_path)  # fmt: skip
    assert result.returncode == 1 and "50.0%" in result.stderr


def _wait_for_handlers(pid: int, timeout: float = 30) -> None:
    """Until Helios's own code has installed its SIGTERM handler: before that the
    interpreter itself is starting, and no program can catch a signal yet."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:") and int(line.split()[1], 16) & (1 << (15 - 1)):
                return
        time.sleep(0.002)
    raise AssertionError("helios never installed its signal handlers")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_at_startup_exits_130_with_one_line(
    make_task: TaskMaker, tmp_path: Path, signum: int
) -> None:
    make_task("slow", solve="sleep 20\n")
    command = helios_cmd("batch", str(tmp_path / "tasks"), "--agent", "oracle", "--provider",
                         "local", "-o", str(tmp_path / "out"))  # fmt: skip
    # From the first instant Helios's code runs (imports, parsing, planning, the batch).
    for delay in (0.0, 0.05, 0.1, 0.2, 0.3, 0.5):
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _wait_for_handlers(proc.pid)
        time.sleep(delay)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, (delay, proc.returncode, err)
        assert "Traceback" not in err and len(err.strip().splitlines()) <= 2, err
