"""The docs' Python examples run unchanged against Helios (issue: one engine, three doors).

Each example runs as its own process, in a folder laid out as the docs assume
(`tasks/`, `tasks/benchmark/`, `tasks/pdfbench/`, `tasks/easy-task`, …), with the
default provider (docker) and the agent Helios chooses: the built-in tool agent, or
the computer agent for the comparison of the seed's computer-use default model. The
models it names are answered by the scripted server on 127.0.0.1 through the providers' base-URL
variables; "daytona" is the real provider and SDK against the loopback Daytona
(`helios.testing.daytona_fake`), whose sandboxes are local containers.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helios.testing.daytona_fake import DaytonaFake
from helios.testing.mock_llm import MockLLMServer

from ..desktop_helpers import GUI_EXAMPLES, need_desktop
from . import examples

GUI_EPISODES = Path(__file__).parent.parent / "fixtures" / "gui_episodes.json"

pytestmark = pytest.mark.usefixtures("need_docker")

SOLVABLE = "Create /app/out.txt containing the word ok."
SCRIPT = {
    "scenarios": [
        {
            "match": "/app/out.txt containing the word ok",
            "turns": [
                # the image names no WORKDIR: the agent works in / (as in Harbor)
                {"tool_calls": [{"name": "bash", "arguments": {
                    "command": "mkdir -p /app && echo ok > /app/out.txt"}}]},
                {"tool_calls": [{"name": "submit", "arguments": {}}]},
            ],
        },
        {"match": "*", "turns": [{"text": "I cannot do this."}]},
    ]
}
TEST_SH = (
    "#!/bin/sh\ngrep -qx ok /app/out.txt && echo 1 > /logs/verifier/reward.txt "
    "|| echo 0 > /logs/verifier/reward.txt\n"
)


def _task(folder: Path, instruction: str) -> None:
    (folder / "tests").mkdir(parents=True)
    (folder / "task.toml").write_text(
        'version = "1.0"\n[agent]\ntimeout_sec = 60\n[verifier]\ntimeout_sec = 30\n'
        '[environment]\ndocker_image = "debian:bookworm-slim"\nmemory_mb = 256\n'
    )
    (folder / "instruction.md").write_text(instruction + "\n")
    (folder / "tests" / "test.sh").write_text(TEST_SH)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("docs")
    tasks = root / "tasks"
    _task(tasks / "easy-task", SOLVABLE)
    _task(tasks / "medium-task", SOLVABLE)
    _task(tasks / "hard-task", "Prove that P != NP; write the proof to /app/out.txt.")
    _task(tasks / "benchmark" / "alpha", SOLVABLE)
    _task(tasks / "benchmark" / "beta", SOLVABLE)
    _task(tasks / "pdfbench" / "pdfbench_eyemed_01", SOLVABLE)
    _task(tasks / "pdfbench" / "pdfbench_other_01", SOLVABLE)
    return root


@pytest.fixture(scope="module")
def server() -> object:
    with MockLLMServer(script=SCRIPT) as running:
        yield running


def _run_example(
    code: str,
    workspace: Path,
    server: MockLLMServer,
    gemini: str | None = None,
    **more: str,
) -> str:
    env = {
        **os.environ,
        "ANTHROPIC_API_KEY": "sk-docs-example",
        "ANTHROPIC_BASE_URL": server.anthropic_base_url,
        "GEMINI_API_KEY": "docs-example",
        # Gemini's OpenAI-compatible wire, or (computer use) its native one
        "GEMINI_BASE_URL": gemini or server.openai_base_url,
        **more,
    }
    script = workspace / "example.py"
    script.write_text(code)
    done = subprocess.run(
        [sys.executable, str(script)], cwd=workspace, env=env, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-2000:]
    return done.stdout


def test_basic_usage(workspace: Path, server: MockLLMServer) -> None:
    out = _run_example(examples.BASIC_USAGE, workspace, server)
    assert "Passed: 6/7" in out  # the hard task is not solved by the scripted model


def test_discover_with_pattern(workspace: Path, server: MockLLMServer) -> None:
    out = _run_example(examples.DISCOVER, workspace, server)
    assert "1 ['pdfbench_eyemed_01']" in out


def test_basic_batch_run(workspace: Path, server: MockLLMServer) -> None:
    out = _run_example(examples.BASIC_BATCH_RUN, workspace, server)
    for line in ("Total: 2", "Passed: 2", "Failed: 0", "Mean reward: 1.000", "Duration: "):
        assert line in out


def test_progress_callback(workspace: Path, server: MockLLMServer) -> None:
    out = _run_example(examples.PROGRESS_CALLBACK, workspace, server)
    assert out.count("[PASS] ") == 6 and "[FAIL] hard-task: 0.00" in out


def test_analyzing_results(workspace: Path, server: MockLLMServer) -> None:
    out = _run_example(examples.ANALYZING_RESULTS, workspace, server)
    assert "PASSED:\n  alpha: " in out and "Min reward: 1.00" in out and "Median: 1.00" in out


def test_custom_task_selection(workspace: Path, server: MockLLMServer) -> None:
    out = _run_example(examples.CUSTOM_SELECTION, workspace, server)
    assert "Mean reward: 0.667" in out


def _summary(folder: Path) -> dict[str, object]:
    (path,) = folder.glob("batch_*/batch_summary.json")
    summary: dict[str, object] = json.loads(path.read_text())
    return summary


def test_comparing_models(tmp_path: Path) -> None:
    """The example compares the seed's default model, a computer-use one, with Claude
    on a GUI benchmark (a copy of examples/gui/browser-form): with their defaults
    both get the computer agent (the model, and the task's desktop, call for it) and
    both solve it, each on its own provider's computer-use wire."""
    need_desktop("docker")
    for name in ("alpha",):
        shutil.copytree(GUI_EXAMPLES / "browser-form", tmp_path / "tasks" / "benchmark" / name)
    with MockLLMServer(script=json.loads(GUI_EPISODES.read_text())) as gui:
        out = _run_example(examples.COMPARING_MODELS, tmp_path, gui, gemini=gui.gemini_base_url)
    assert "gemini/gemini-2.5-computer-use-preview-10-2025:" in out
    assert out.count("Passed: 1/1") == 2, out
    gemini = _summary(tmp_path / "results" / "gemini_gemini-2.5-computer-use-preview-10-2025")
    claude = _summary(tmp_path / "results" / "claude-sonnet-4-20250514")
    assert gemini["agent"] == "computer" and claude["agent"] == "computer"


def test_using_daytona(workspace: Path, server: MockLLMServer) -> None:
    """The seed's "Using Daytona": the real SDK, against the loopback Daytona."""
    with DaytonaFake(api_key="docs-daytona-key") as daytona:
        out = _run_example(
            examples.USING_DAYTONA,
            workspace,
            server,
            DAYTONA_API_KEY=daytona.api_key,
            DAYTONA_API_URL=daytona.api_url,
        )
        assert "Cloud execution: 1.000 mean reward" in out
        # the two pdfbench tasks, each in its own sandbox (a start that failed under load
        # and was retried makes one more, and it is gone too: checked below)
        assert daytona.creates >= 2
        assert not daytona.live() or all(b.state == "destroying" for b in daytona.live())


def test_saving_results_to_json(workspace: Path, server: MockLLMServer) -> None:
    _run_example(examples.SAVING_JSON, workspace, server)
    export = json.loads((workspace / "results.json").read_text())
    assert export["total_tasks"] == 7 and export["passed"] == 6
    hard = next(t for t in export["tasks"] if t["name"] == "hard-task")
    assert hard["status"] == "failed" and hard["reward"] == 0.0


def test_programmatic_pass_at_k(workspace: Path, server: MockLLMServer) -> None:
    out = _run_example(examples.PROGRAMMATIC_PASS_AT_K, workspace, server)
    assert "Passed: 18/21" in out
    assert "pass@3: 85.7%" in out and "Unique tasks: 7" in out
    assert out.count("Failed: hard-task (attempt ") == 3


def test_progress_callbacks_snippet(workspace: Path, server: MockLLMServer) -> None:
    out = _run_example(examples.PROGRESS_CALLBACKS_SNIPPET, workspace, server)
    assert "Completed: easy-task - passed" in out and "Completed: hard-task - failed" in out
