"""Scripted GUI episodes end to end: `helios batch examples/gui` with the computer
agent, on each provider's computer-use wire (the mock model server plays the same
episode as Gemini's, Anthropic's, OpenAI's Responses or a generic JSON-action
model's native calls, aiming by colour), driving a real Xvfb + Chromium on docker
and on local, and reaching reward 1 through each task's own verifier (which reads
the live browser's title, and /logs/agent/final_answer.txt)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
from pathlib import Path

import pytest

from helios import ParallelRunner
from helios.models.retry import RetryPolicy
from helios.tasks.summary import BatchResult
from helios.testing.mock_llm import MockLLMServer
from helios.trajectories import ATIF_MULTIMODAL_VERSION, validate_trajectory

from .conftest import helios_cmd
from .desktop_helpers import GUI_EXAMPLES, need_desktop

KEY = "sk-helios-gui-test-5ecret"
SCRIPT = Path(__file__).parent / "fixtures" / "gui_episodes.json"
GEMINI = "gemini/gemini-2.5-computer-use-preview-10-2025"
#: model → (the URL attribute of the mock it is reached on)
WIRES = {
    "anthropic/claude-opus-4-5": "anthropic_base_url",  # computer_20251124, with zoom
    "openai/computer-use-preview": "openai_base_url",  # Responses, computer_use_preview
    "openai-compatible/scripted-vision": "openai_base_url",  # generic JSON actions
}


@pytest.fixture(scope="module")
def server() -> object:
    with MockLLMServer(script=json.loads(SCRIPT.read_text()), require_key=KEY) as running:
        yield running


def _check_outputs(run: Path, tasks: set[str]) -> None:
    """Each trial: a v1.6 trajectory that validates, its screenshots as files it
    references (each once), the final screen; no image data in any JSON file."""
    seen = set()
    for trajectory in run.glob("*/agent/trajectory.json"):
        folder = trajectory.parent
        doc = json.loads(trajectory.read_text())
        assert validate_trajectory(doc) == [], trajectory
        assert doc["schema_version"] == ATIF_MULTIMODAL_VERSION
        paths = {
            part["source"]["path"]
            for step in doc["steps"]
            for part in _parts(step)
            if part["type"] == "image"
        }
        files = {f"images/{p.name}" for p in (folder / "images").iterdir()}
        assert paths and paths == files - {"images/final.png"}, folder
        assert (folder / "images" / "final.png").read_bytes().startswith(b"\x89PNG")
        seen.add(folder.parent.name.split("_", 1)[1])
    assert seen == tasks
    some_png = next(run.glob("*/agent/images/final.png")).read_bytes()
    encoded = base64.b64encode(some_png).decode()[:60]
    for path in run.rglob("*.json*"):
        text = path.read_text(errors="replace")
        assert "base64," not in text and encoded not in text and KEY not in text, path


def _parts(step: dict[str, object]) -> list[dict[str, object]]:
    message = step["message"]
    parts = list(message) if isinstance(message, list) else []
    observation = step.get("observation") or {}
    for result in observation.get("results", []):  # type: ignore[attr-defined]
        if isinstance(result.get("content"), list):
            parts += result["content"]
    return parts


def _passed(batch: BatchResult) -> None:
    assert batch.total_tasks == batch.passed, [(r.name, r.error) for r in batch.results]
    assert batch.output_dir is not None
    rows = [json.loads(x) for x in (batch.output_dir / "results.jsonl").read_text().splitlines()]
    assert [(r["reward"], r["agent_error"]) for r in rows] == [(1.0, None)] * len(rows)


def test_gemini_the_seeds_default_model_fills_the_form(
    server: MockLLMServer, tmp_path: Path
) -> None:
    """As a user types it, with the computer agent chosen for the model. Gemini's
    predefined functions have no double or right click, so its episode is the form.
    On docker only: as WIRE_CASES below, a wire's code does not depend on the
    provider (the local desktop runs Gemini-less wires here and in
    tests/test_harbor_computer_task.py, which also names `--agent computer`)."""
    need_desktop("docker")
    done = subprocess.run(
        helios_cmd("batch", str(GUI_EXAMPLES), "-p", "**/browser-form/task.toml", "-m", GEMINI,
                   "--base-url", server.gemini_base_url, "--api-key", KEY,
                   "--provider", "docker", "-o", str(tmp_path), "-q"),
        capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run,) = tmp_path.glob("batch_*")
    summary = json.loads((run / "batch_summary.json").read_text())
    assert summary["passed"] == 1 and summary["agent"] == "computer", summary
    _check_outputs(run, {"browser-form"})


#: each wire on one provider, and each provider under one wire at least (and the
#: generic wire on local in tests/test_harbor_computer_task.py): the wire's
#: code does not depend on the provider, nor the desktop's on the wire (the suite's
#: time: each case is a desktop and two Chromium episodes)
WIRE_CASES = [("anthropic/claude-opus-4-5", "docker"), ("openai/computer-use-preview", "local"),
              ("openai-compatible/scripted-vision", "docker")]  # fmt: skip


@pytest.mark.parametrize(("model", "provider"), WIRE_CASES)
def test_every_wire_passes_both_gui_examples(
    provider: str, model: str, server: MockLLMServer, tmp_path: Path
) -> None:
    need_desktop(provider)
    runner = ParallelRunner(
        GUI_EXAMPLES, model=model, base_url=getattr(server, WIRES[model]), api_key=KEY,
        # one at a time: two Chromiums on two busy cores can starve Xvfb enough to
        # split a double click
        provider=provider, n_concurrent=1, output_dir=tmp_path, show_progress=False,
        retry_policy=RetryPolicy(max_attempts=3, base_delay=0.05, max_delay=0.2),
    )  # fmt: skip
    batch = asyncio.run(runner.run())
    _passed(batch)
    assert runner.agent == "computer"  # the tasks have desktops
    assert batch.output_dir is not None
    _check_outputs(batch.output_dir, {"browser-form", "click-calibration"})
