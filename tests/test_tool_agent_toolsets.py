"""The door chooses the tool agent's tools: a toolset without `submit` ends on a
plain answer, and the agent never tells the model to call a tool it lacks."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from helios import ParallelRunner
from helios.agents.tool_agent import EMPTY_REPLY_NUDGE, EMPTY_REPLY_NUDGE_NO_SUBMIT
from helios.testing.mock_llm import MockLLMServer

from .conftest import TaskMaker

SCRIPT = {"scenarios": [{"match": "*", "turns": [
    {"empty": True},
    {"tool_calls": [{"name": "terminal", "arguments": {"command": "touch /app/ok"}}]},
    {"text": "Done: /app/ok exists."},
]}]}  # fmt: skip


@pytest.mark.usefixtures("need_bwrap")
def test_hermes_terminal_toolset_without_submit(make_task: TaskMaker, tmp_path: Path) -> None:
    make_task("t", test="test -e /app/ok && echo 1 > /logs/verifier/reward.txt || "
              "echo 0 > /logs/verifier/reward.txt\n")  # fmt: skip
    with MockLLMServer(script=SCRIPT) as server:
        runner = ParallelRunner(
            tmp_path / "tasks", model="openai-compatible/x", base_url=server.openai_base_url,
            provider="local", output_dir=tmp_path / "out", show_progress=False,
            agent_settings={"toolsets": ["terminal"]},
        )  # fmt: skip
        batch = asyncio.run(runner.run())
        tools_offered = server.requests[0].body["tools"]
    assert batch.passed == 1 and batch.results[0].error is None
    assert [t["function"]["name"] for t in tools_offered] == ["terminal"]
    trajectory = json.loads(
        (batch.output_dir / batch.results[0].folder / "agent" / "trajectory.json").read_text()
    )
    users = [s["message"] for s in trajectory["steps"] if s["source"] == "user"]
    assert EMPTY_REPLY_NUDGE_NO_SUBMIT in users and EMPTY_REPLY_NUDGE not in users
