"""The examples under examples/toolcalls/ run as a user runs them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "toolcalls"
needs_espeak = pytest.mark.espeak


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)  # fmt: skip


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("concurrent_runs.py", "All 6 runs passed!"),
        pytest.param("callable_agent.py", "PASSED (100% pass rate, 6 runs)", marks=needs_espeak),
        pytest.param("http_agent.py", "retries: 1", marks=needs_espeak),
        ("text_mode.py", "pass rate 67%"),
    ],
)
def test_example_script(script: str, expected: str, tmp_path: Path) -> None:
    result = _run(str(EXAMPLES / script), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert expected in result.stdout


@needs_espeak
def test_pytest_example_runs_russos_tests_unchanged(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES / "pytest_example", tmp_path / "example")
    # As the example's docstring says to run it: its own pytest.ini, no -o overrides.
    result = _run("-m", "pytest", "-q", "-p", "no:cacheprovider", "example",
                  "--toolcalls-report", "report.json", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout and "Total: 3  Passed: 3  Failed: 0" in result.stdout
    assert (tmp_path / "report.json").is_file()
    # pytest-asyncio's "asyncio_default_fixture_loop_scope is unset" deprecation warning
    assert "asyncio_default_fixture_loop_scope" not in result.stdout + result.stderr
    assert "PytestDeprecationWarning" not in result.stdout + result.stderr
