"""The live line at 80, 100 and 160 columns, in a real terminal (tmux): n/N, the counts,
the bar and the ETA come first; the model figures follow on the same line only when they
fit, else on their own line. And a failed trial says why, on its line and in the final
panel."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from helios.testing.mock_llm import MockLLMServer

from .conftest import TaskMaker, helios_cmd
from .waiting import wait_until

pytestmark = pytest.mark.usefixtures("need_bwrap")

N_TASKS = 8
#: every trial's agent: one slow command, then submit (the slow command keeps the live
#: line on screen long enough to be read)
SCRIPT = {
    "scenarios": [
        {"match": "*", "turns": [
            {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 1; touch /app/ok"}}]},
            {"tool_calls": [{"name": "submit", "arguments": {}}]},
        ]},
    ]
}  # fmt: skip
PASS_IF_OK = "if test -e /app/ok; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"
#: a verifier whose last line is not the reason: the reason is picked out
FAILS = (
    "echo 'checking /app/hello.txt'\n"
    "echo 'FAIL: /app/hello.txt does not exist'\n"
    "echo 0 > /logs/verifier/reward.txt\n"
    "echo 'reward: 0'\n"
)
#: the live line: n/N, the counts, a bar, the elapsed time and an ETA, in this order
LIVE = re.compile(
    rf"(\d+)/{N_TASKS} Passed: \d+ \| Failed: \d+ [━╸ ]+ \d:\d\d:\d\d ETA (\d:\d\d:\d\d|-:--:--)"
)


def _done(line: str) -> int:
    match = LIVE.search(line)
    return int(match[1]) if match else -1


def _capture(session: str) -> str:
    out = subprocess.run(
        ["tmux", "capture-pane", "-p", "-t", session, "-S", "-200"], capture_output=True, text=True
    )
    return out.stdout


@pytest.mark.parametrize("width", [80, 100, 160])
def test_the_live_line_keeps_progress_first_at_any_width(
    make_task: TaskMaker, tmp_path: Path, width: int
) -> None:
    if shutil.which("tmux") is None:
        pytest.skip("tmux not installed")
    for i in range(N_TASKS - 1):
        make_task(f"t{i}", test=PASS_IF_OK)
    make_task("hello-file", test=FAILS)
    done = tmp_path / "done"
    session = f"helios-{uuid.uuid4().hex[:8]}"
    with MockLLMServer(script=SCRIPT) as server:
        args = ["batch", str(tmp_path / "tasks"), "--provider", "local", "-n", "2",
                "-m", "openai-compatible/scripted", "--base-url", server.openai_base_url,
                "-o", str(tmp_path / "out")]  # fmt: skip
        # the pane's width, not one inherited from the environment
        env = ["env", "-u", "COLUMNS", "-u", "LINES"]
        if "PYTHONPATH" in os.environ:  # a tmux server started earlier has another env
            env.append(f"PYTHONPATH={os.environ['PYTHONPATH']}")
        command = shlex.join([*env, *helios_cmd(*args)])
        subprocess.run(
            ["tmux", "new-session", "-d", "-s", session, "-x", str(width), "-y", "50",
             f"{command}; touch {done}; sleep 60"],
            check=True,
        )  # fmt: skip
        try:
            # mid-run: some trials done, some not, and the rate known
            live: list[str] = []

            def mid_run() -> bool:
                screen = _capture(session)
                lines = [line for line in screen.splitlines() if LIVE.search(line)]
                found = [line for line in lines if 0 < _done(line) < N_TASKS]
                if found and "-:--:--" not in found[-1]:
                    live.append(screen)
                    return True
                return done.exists()

            wait_until(mid_run, "the live line mid-run", within=120)
            wait_until(done.exists, "the batch's end", within=120)
            final = _capture(session)
        finally:
            subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    assert live, final
    screen = live[-1]
    (line,) = [line for line in screen.splitlines() if LIVE.search(line)]
    assert len(line.rstrip()) <= width
    assert "…" not in line
    # the model figures: on the same line when they fit (160), else on the next one
    figures = [row for row in screen.splitlines() if "out tok/s" in row]
    assert figures, screen
    assert (figures[0] == line) == (width >= 160), screen
    # the failed trial says why, on its line and in the final panel
    failed = [row for row in final.splitlines() if row.startswith("✗ hello-file")]
    assert len(failed) == 1, final
    assert "FAIL: /app/hello.txt does not exist" in failed[0], final
    assert "Failed trials" in final
    assert final.count("FAIL: /app/hello.txt does not exist") == 2, final
