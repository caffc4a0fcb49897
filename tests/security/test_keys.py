"""API keys never reach a sandbox, and never any output file (on daytona, its
own key neither).

Helios's own environment holds keys; a scripted bash turn prints everything a
sandboxed process can read (its environment, /proc/1/environ, every
/proc/*/environ). Neither the model's key nor any other key may appear in the
sandbox, in trajectory.json, in result.json or in any other file of the run.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from helios import ParallelRunner
from helios.environments.registry import create_environment
from helios.environments.spec import SandboxSpec
from helios.testing.mock_llm import MockLLMServer

from ..conftest import TaskMaker
from ..daytona_helpers import KEY as DAYTONA_KEY
from ..daytona_helpers import daytona

__all__ = ["daytona"]  # the fixture, asked for by name

MODEL_KEY = "sk-model-canary-" + uuid.uuid4().hex
OTHER_KEY = "sk-ant-other-canary-" + uuid.uuid4().hex
PRINT_EVERYTHING = (
    "env; echo ---; tr '\\0' '\\n' < /proc/1/environ; echo ---; "
    "for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done"
)
SCRIPT = {
    "scenarios": [
        {"match": "*", "turns": [
            {"tool_calls": [{"name": "bash", "arguments": {"command": PRINT_EVERYTHING}}]},
            {"tool_calls": [{"name": "submit", "arguments": {}}]},
        ]},
    ]
}  # fmt: skip


@pytest.fixture
def keys_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", MODEL_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", OTHER_KEY)


def _provider(request: pytest.FixtureRequest, provider: str) -> None:
    """The provider's engine (daytona: the loopback Daytona, its key in the environment)."""
    fixture = {"docker": "need_docker", "daytona": "daytona"}.get(provider, "need_bwrap")
    request.getfixturevalue(fixture)


@pytest.mark.usefixtures("keys_in_environment")
@pytest.mark.parametrize("provider", ["local", "docker", "daytona"])
def test_a_bash_turn_that_prints_the_environment_leaks_no_key(
    provider: str, make_task: TaskMaker, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    _provider(request, provider)
    make_task("print-env")
    with MockLLMServer(script=SCRIPT, require_key=MODEL_KEY) as server:
        runner = ParallelRunner(
            tmp_path / "tasks", model="openai/gpt-4o", base_url=server.openai_base_url,
            provider=provider, output_dir=tmp_path / "out", show_progress=False,
        )  # fmt: skip
        batch = asyncio.run(runner.run())
    assert batch.passed == 1, batch.results
    assert runner.run_dir is not None
    files = [p for p in runner.run_dir.rglob("*") if p.is_file()]
    trajectory = next(p for p in files if p.name == "trajectory.json").read_text()
    assert "LANG=" in trajectory or "PATH=" in trajectory  # the turn ran and was kept
    assert {p.name for p in files} >= {"trajectory.json", "result.json", "results.jsonl"}
    for path in files:
        text = path.read_text(errors="replace")
        assert MODEL_KEY not in text and OTHER_KEY not in text, path
        assert DAYTONA_KEY not in text, path


@pytest.mark.usefixtures("keys_in_environment")
@pytest.mark.parametrize("provider", ["local", "docker", "daytona"])
def test_no_key_in_any_process_environment_of_the_sandbox(
    provider: str, request: pytest.FixtureRequest
) -> None:
    _provider(request, provider)
    spec = SandboxSpec(image="debian:bookworm-slim", env={"DECLARED": "by-the-task"})
    env = create_environment(provider, spec, trial_id=uuid.uuid4().hex[:8], run_id="keys")

    async def go() -> str:
        await env.start()
        try:
            # a process left running from an earlier exec, then everything readable
            await env.exec("nohup sleep 30 >/dev/null 2>&1 &")
            seen = await env.exec(PRINT_EVERYTHING, cwd="/")
            return seen.stdout
        finally:
            await env.stop()

    seen = asyncio.run(go())
    assert "DECLARED=by-the-task" in seen  # what the task declares is there
    assert MODEL_KEY not in seen and OTHER_KEY not in seen and DAYTONA_KEY not in seen
    assert "API_KEY" not in seen
