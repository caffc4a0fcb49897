"""Why a trial failed, where the user looks: the verifier's last meaningful line (made
safe: no escapes, no secrets, capped) on the trial's line, in the final panel (capped,
with the count of the rest), in result.json, and `tasks check` names the file."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from helios.secrets import register_secret
from helios.tasks.report import failed_panel
from helios.tasks.summary import BatchResult, TaskResult
from helios.tasks.verifier import NOTE_LIMIT, verifier_note

from .conftest import helios_cmd

HELLO_FILE_OUTPUT = "FAIL: /app/hello.txt does not exist\nreward: 0\n"
PYTEST_OUTPUT = """\
============================= test session starts ==============================
collected 2 items

tests/test_outputs.py .F                                                 [100%]

=================================== FAILURES ===================================
___________________________________ test_sum ___________________________________
    def test_sum():
>       assert total() == 10
E       assert 9 == 10

tests/test_outputs.py:7: AssertionError
=========================== short test summary info ============================
FAILED tests/test_outputs.py::test_sum - assert 9 == 10
========================= 1 failed, 1 passed in 0.03s ==========================
"""


@pytest.mark.parametrize(
    ("stdout", "stderr", "expected"),
    [
        (HELLO_FILE_OUTPUT, "", "FAIL: /app/hello.txt does not exist"),
        (PYTEST_OUTPUT, "", "FAILED tests/test_outputs.py::test_sum - assert 9 == 10"),
        ("checking\n", "cat: /app/out.csv: No such file or directory\n",
         "cat: /app/out.csv: No such file or directory"),
        ("step 1 ok\nall good\n--------\nreward: 1\n", "", "all good"),
        ("", "", ""),
    ],
)  # fmt: skip
def test_the_last_meaningful_line_is_picked(stdout: str, stderr: str, expected: str) -> None:
    assert verifier_note(stdout, stderr) == expected


def test_the_line_is_made_safe_for_a_terminal() -> None:
    register_secret("sk-verifier-test-secret-0123456789")
    colored = "\x1b[31mFAIL\x1b[0m: key sk-verifier-test-secret-0123456789 \x1b]0;owned\x07\x07"
    note = verifier_note(colored + "\n")
    assert note == "FAIL: key [REDACTED] \\x07"
    long = verifier_note("FAIL: " + "x" * 1000)
    assert len(long) == NOTE_LIMIT and long.endswith("…")
    # a bidi override or a line separator is shown, not obeyed
    assert verifier_note("FAIL: \u202eevil\u2028") == "FAIL: \\u202eevil"


def _task(name: str, *, passed: bool, reason: str | None = None) -> TaskResult:
    return TaskResult(name=name, status="passed" if passed else "failed",
                      reward=1.0 if passed else 0.0, duration=1.0, error=None, attempt=1,
                      passed=passed, reason=reason)  # fmt: skip


def _batch(results: list[TaskResult]) -> BatchResult:
    passed = sum(r.passed for r in results)
    n = len(results)
    return BatchResult(total_tasks=n, passed=passed, failed=n - passed, errored=0,
                       mean_reward=0.0, duration=1.0, n_attempts=1, n_unique_tasks=n,
                       pass_at_k_table={}, results=results)  # fmt: skip


def _text(renderable: object, width: int = 100) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None)
    console.print(renderable)
    assert isinstance(console.file, io.StringIO)
    return console.file.getvalue()


def test_the_final_panel_lists_the_failed_trials_capped() -> None:
    results = [_task("ok", passed=True)] + [
        _task(f"t{i:02d}", passed=False, reason=f"FAIL: check {i}") for i in range(13)
    ]
    shown = _text(failed_panel(_batch(results)))
    assert "t00" in shown and "FAIL: check 0" in shown and "t09" in shown
    assert "t10" not in shown and "… and 3 more" in shown
    assert "ok" not in shown.replace("Failed", "")
    assert failed_panel(_batch([_task("ok", passed=True)])) is None


@pytest.mark.usefixtures("need_bwrap")
def test_a_batch_and_tasks_check_show_why(examples_copy: Path, tmp_path: Path) -> None:
    wrong = examples_copy / "hello-wrong"
    shutil.copytree(examples_copy / "hello-file", wrong)
    (wrong / "solution" / "solve.sh").write_text("#!/bin/sh\necho nope > /app/hello.txt\n")
    for other in examples_copy.iterdir():
        if other.name not in ("hello-file", "hello-wrong"):
            shutil.rmtree(other)
    batch = subprocess.run(
        helios_cmd("batch", str(examples_copy), "--provider", "local", "--agent", "nop",
                   "-o", str(tmp_path / "out")),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert batch.returncode == 0, batch.stderr
    lines = batch.stdout.splitlines()
    (line,) = [row for row in lines if row.startswith("✗ hello-file ")]
    assert line.endswith("· FAIL: /app/hello.txt does not exist"), line
    assert "Failed trials" in batch.stdout
    (run_dir,) = (tmp_path / "out").iterdir()
    summary = json.loads((run_dir / "batch_summary.json").read_text())
    reasons = {t["name"]: t["reason"] for t in summary["tasks"]}
    assert reasons["hello-file"] == "FAIL: /app/hello.txt does not exist"
    (result,) = run_dir.glob("*_hello-file/result.json")
    assert json.loads(result.read_text())["verifier_note"] == reasons["hello-file"]

    check = subprocess.run(
        helios_cmd("tasks", "check", str(examples_copy), "--provider", "local",
                   "-o", str(tmp_path / "check")),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert check.returncode == 1
    assert "oracle below 1.0 (FAIL:" in check.stdout  # the table wraps the rest
    (pointer,) = [row for row in check.stdout.splitlines() if "the verifier's output" in row]
    assert pointer.startswith("hello-wrong: the verifier's output with oracle: ")
    path = Path(pointer.split(": ", 2)[2].strip())
    assert path.name == "test-stdout.txt" and "content differs" in path.read_text()
