"""`helios run`'s view of one trial: its phases, tool calls and every reward key."""

from __future__ import annotations

import io
import os
import shlex
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from helios.display.trial import TrialView, call_line
from helios.engine.events import (
    BatchPlanned,
    PhaseChanged,
    Retrying,
    ToolCalled,
    TrialStarted,
    TurnStarted,
)
from helios.testing.mock_llm import MockLLMServer

from .conftest import helios_cmd
from .waiting import wait_until

SCRIPT = Path(__file__).parent / "fixtures" / "scripted_examples.json"
KEY = "sk-trial-view-5e4d3c"


def _view(quiet: bool = False) -> tuple[TrialView, io.StringIO]:
    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=False, color_system=None)
    return TrialView(console, agent="tool · openai/gpt-4.1", quiet=quiet), out


def _story(view: TrialView) -> None:
    for event in (
        BatchPlanned(total=1, pending=1), TrialStarted("t", "csv-report"),
        PhaseChanged("t", "environment"), PhaseChanged("t", "agent"), TurnStarted("t", 1),
        ToolCalled("t", "bash", '{"command": "' + "echo long; " * 20 + '"}'),
        Retrying("t", "model", 2.0, "429"),
        ToolCalled("t", "editor", '{"command": "create", "path": "/app/x", "file_text": "hi"}'),
        PhaseChanged("t", "verifier"),
    ):  # fmt: skip
        view.handle(event)
    view.result(passed=False, status="failed", rewards={"reward": 0.5, "total": 1.0, "rows": 0.0},
                duration=2.25, error="MaxTurns: stopped after 3 turns")  # fmt: skip


def test_the_view_tells_a_trial_top_to_bottom() -> None:
    view, out = _view()
    _story(view)
    lines = out.getvalue().splitlines()
    assert lines[:4] == [
        "[Setup] starting the sandbox", "[Agent] tool · openai/gpt-4.1", "  turn 1",
        lines[3],
    ]  # fmt: skip
    assert lines[3].startswith("  → bash  echo long; echo long;") and lines[3].endswith("…")
    assert all(len(line) <= 80 for line in lines)
    assert "  retrying model in 2s: 429" in lines
    assert "  → editor  create /app/x" in lines
    assert "[Verify] running the tests" in lines
    assert "[Result] ✗ failed · reward 0.5 · total 1 · rows 0 · 2.2s" in lines
    assert lines[-1].strip() == "MaxTurns: stopped after 3 turns"
    # no trial label for one trial: the header names the task
    assert "csv-report" not in out.getvalue()


def test_quiet_prints_nothing() -> None:
    view, out = _view(quiet=True)
    _story(view)
    assert out.getvalue() == ""


def test_a_call_line_shows_controls_and_odd_arguments() -> None:
    assert call_line("bash", '{"command": "printf \\"\\u001b[2J\\""}') == 'bash  printf "\\x1b[2J"'
    assert call_line("submit", "{}") == "submit"
    assert call_line("fetch", '{"n": 3}') == 'fetch  {"n": 3}'
    assert call_line("bash", "null") == "bash  null"


@pytest.fixture
def scripted() -> Iterator[str]:
    with MockLLMServer(script=SCRIPT, require_key=KEY) as server:
        yield server.openai_base_url


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["OPENAI_COMPATIBLE_API_KEY"] = KEY
    return env


@pytest.mark.usefixtures("need_bwrap")
def test_helios_run_shows_one_trial_and_every_reward_key(
    examples_copy: Path, tmp_path: Path
) -> None:
    task = examples_copy / "csv-report"
    result = subprocess.run(
        helios_cmd("run", str(task), "--provider", "local", "--agent", "oracle", "-o", "out"),
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Helios run" in out and "Helios batch" not in out and "Batch Results" not in out
    for line in ("[Setup] starting the sandbox", "[Agent] oracle",
                 "  → bash  sh /solution/solve.sh", "[Verify] running the tests"):  # fmt: skip
        assert line in out.splitlines(), out
    assert "[Result] ✓ passed · reward 1 · total 1 · rows 1 · " in out


@pytest.mark.usefixtures("need_bwrap")
def test_helios_run_with_the_tool_agent_in_an_80_column_terminal(
    examples_copy: Path, tmp_path: Path, scripted: str
) -> None:
    if shutil.which("tmux") is None:
        pytest.skip("tmux not installed")
    done = tmp_path / "done"
    args = helios_cmd("run", str(examples_copy / "csv-report"), "--provider", "local",
                      "-m", "openai-compatible/scripted", "--base-url", scripted,
                      "-o", str(tmp_path / "out"))  # fmt: skip
    command = " ".join(map(shlex.quote, args)) + f"; touch {done}; sleep 30"
    session = f"helios-run-{uuid.uuid4().hex[:8]}"
    env = [
        f"{k}={v}" for k, v in _env().items() if k in ("OPENAI_COMPATIBLE_API_KEY", "PYTHONPATH")
    ]
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "80", "-y", "40",
                    "env", *env, "sh", "-c", command], check=True)  # fmt: skip
    try:
        wait_until(done.exists, "helios run to finish", within=90)
        screen = subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", session, "-S", "-100"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    lines = screen.splitlines()
    assert "[Agent] tool · openai-compatible/scripted" in lines, screen
    calls = [line for line in lines if line.startswith("  → ")]
    assert calls[0] == "  → bash  head -3 /app/sales.csv", screen
    assert calls[1].endswith("…") and calls[-1] == '  → submit  {"summary": "done"}'
    assert [line for line in lines if line.startswith("  turn")] == ["  turn 1", "  turn 2",
                                                                     "  turn 3"]  # fmt: skip
    assert "[Result] ✓ passed · reward 1 · total 1 · rows 1 · " in screen
    assert "tokens " in screen and "3 model calls" in screen
    assert "Batch Results" not in screen
