"""Text from a task, a dataset, a config or a model reaches the terminal with its
control characters shown, never sent: one function (`helios.text.visible`) on
every path, and `SafeConsole` behind it."""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.table import Table
from typer.testing import CliRunner

from helios.cli.app import app
from helios.testing.mock_llm import MockLLMServer
from tests.conftest import TaskMaker, helios_cmd
from tests.datagen.conftest import SCRIPT, cli_env, hermes_args, run_generate, write_dataset

#: clears the screen, then retitles the window (OSC 0, ended by BEL)
HOSTILE = "evil\x1b[2J\x1b]0;pwned\x07"
SHOWN = "evil\\x1b[2J\\x1b]0;pwned\\x07"


@pytest.fixture
def mock_server() -> Iterator[MockLLMServer]:
    with MockLLMServer(script=SCRIPT) as server:
        yield server


def test_visible_shows_every_terminal_control_and_keeps_the_rest() -> None:
    from helios.text import visible

    assert visible(HOSTILE) == SHOWN
    shown = "a\tb\nc\\x0d\\x7f\\x9b\\u202e\\u2066 é ✓"
    assert visible("a\tb\nc\r\x7f\x9b\u202e\u2066 é ✓") == shown
    assert visible("two\nlines", one_line=True) == "two\\x0alines"
    assert visible(visible(HOSTILE)) == visible(HOSTILE)  # idempotent


def test_safe_console_shows_controls_in_any_renderable() -> None:
    from helios.display.console import SafeConsole

    out = io.StringIO()
    console = SafeConsole(file=out, force_terminal=True, width=200, highlight=False)
    table = Table("task")
    table.add_row(HOSTILE)  # rich measures the controls as zero wide: no visible() first
    console.print(table)
    console.print(f"[red]{HOSTILE}[/]")
    text = out.getvalue()
    assert text.count("evil\\x1b[2J\\x1b]0;pwned") == 2
    assert "\x1b[2J" not in text and "\x1b]0;" not in text and "\x07" not in text
    assert "\x1b[31m" in text  # rich's own styling still goes out


def _no_raw_escape(output: bytes | str) -> None:
    raw = output.encode() if isinstance(output, str) else output
    assert b"\x1b" not in raw and b"\x07" not in raw, raw[-2000:]


def _hostile_tasks(make_task: TaskMaker) -> None:
    make_task(HOSTILE)
    make_task(HOSTILE + "-fails", test="echo 0 > /logs/verifier/reward.txt\n")


@pytest.mark.usefixtures("need_bwrap")
def test_a_hostile_task_folder_name_is_shown_not_sent_by_batch(
    make_task: TaskMaker, tmp_path: Path
) -> None:
    _hostile_tasks(make_task)
    env = {**os.environ, "NO_COLOR": "1", "TERM": "dumb"}
    result = subprocess.run(
        helios_cmd("batch", str(tmp_path / "tasks"), "--provider", "local", "--agent", "oracle",
                   "-o", str(tmp_path / "out")),
        capture_output=True, env=env, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    _no_raw_escape(result.stdout + result.stderr)
    assert SHOWN.encode() in result.stdout


@pytest.mark.usefixtures("need_bwrap")
def test_the_live_display_on_a_terminal_shows_a_hostile_name(
    make_task: TaskMaker, tmp_path: Path
) -> None:
    """On a terminal rich styles and moves the cursor itself; the task's own
    sequences (clear screen, window title, bell) must still never go out."""
    make_task(HOSTILE, solve="sleep 1\n")  # long enough for the live table to show it
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "160", "LINES": "40"}
    env.pop("NO_COLOR", None)
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        helios_cmd("batch", str(tmp_path / "tasks"), "--provider", "local", "--agent", "oracle",
                   "-o", str(tmp_path / "out")),
        stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True,
    )  # fmt: skip
    os.close(slave)
    output = bytearray()
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                output += chunk
            elif proc.poll() is not None:
                break
        assert proc.wait(timeout=60) == 0, bytes(output[-2000:])
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    assert b"\x1b[" in output  # a real terminal: rich did style and move the cursor
    assert b"\x1b[2J" not in output and b"\x1b]0;" not in output and b"\x07" not in output
    assert SHOWN.encode() in output


TOOLCALLS_AGENTS = """
from helios import toolcalls

class Synth:
    async def synthesize(self, text):
        return toolcalls.Audio(data=b"\\x00" * 480, format="pcm", transcript=text)

class Echo:
    async def run(self, audio):
        return toolcalls.AgentResponse(tool_calls=[toolcalls.tool_call("book\\x1b]0;agent\\x07")])
"""
TOOLCALLS_CONFIG = r"""
synthesizer: hostile_agents:Synth
agent: hostile_agents:Echo
tests:
  - id: "evil\e[2J\e]0;pwned\a"
    prompt: "book\e[2J now"
    expect: [{name: "book\e]0;expected\a"}]
"""


def test_toolcalls_test_ids_and_tool_names_are_shown_not_sent(tmp_path: Path) -> None:
    (tmp_path / "hostile_agents.py").write_text(TOOLCALLS_AGENTS)
    config = tmp_path / "c.yaml"
    config.write_text(textwrap.dedent(TOOLCALLS_CONFIG))
    sys.path.insert(0, str(tmp_path))
    try:
        result = CliRunner().invoke(app, ["toolcalls", "--config", str(config)])
    finally:
        sys.path.remove(str(tmp_path))
    assert result.exit_code == 1, result.output  # the names differ: a failed run
    _no_raw_escape(result.output)
    assert SHOWN in result.output  # the test id
    assert "\\x1b]0;expected\\x07" in result.output  # the expected tool's name


@pytest.mark.usefixtures("need_bwrap")
def test_generate_shows_a_hostile_dataset_and_model_reply(
    tmp_path: Path, mock_server: MockLLMServer
) -> None:
    """The dataset's name and lines, and a tool name the model made up (the final
    table counts every name the model called)."""
    calls_hostile_tool = {
        "match": "Hostile",
        "turns": [{"reasoning": "hm", "tool_calls": [{"name": HOSTILE, "arguments": {}}]}],
        "final": {"reasoning": "ok", "text": "done"},
    }
    mock_server.set_script({"scenarios": [calls_hostile_tool, *SCRIPT["scenarios"]]})
    dataset = write_dataset(tmp_path / f"{HOSTILE}.jsonl", [
        "RAW:not json " + HOSTILE,
        "Task 1: go " + HOSTILE,
        "Hostile: call it",
    ])  # fmt: skip
    result = run_generate(tmp_path, *hermes_args(mock_server, dataset, "h"), "--verbose")
    assert result.returncode == 0, result.stderr
    _no_raw_escape(result.stdout + result.stderr)
    assert result.stdout.count(SHOWN) >= 2  # the header's dataset, the tool usage table


def test_an_error_line_quoting_hostile_input_is_shown_not_sent(tmp_path: Path) -> None:
    missing = tmp_path / HOSTILE
    result = subprocess.run(
        helios_cmd("generate", f"--dataset_file={missing}", "--batch_size=1", "--run_name=x",
                   "--base_url=http://127.0.0.1:9/v1"),
        capture_output=True, env=cli_env(), cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2
    _no_raw_escape(result.stdout + result.stderr)
    assert SHOWN.encode() in result.stderr
