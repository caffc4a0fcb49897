"""The `openhands` installed agent (helios.agents.installed.openhands): OpenHands
from PyPI (with the host's Python 3.13, bundled), installed once into the host's
agent cache, solving the example task against the scripted server's Chat
Completions on loopback; its events and metrics read into messages and usage."""

from __future__ import annotations

import asyncio
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from helios import ParallelRunner
from helios.agents.installed import python_runtime
from helios.agents.installed.cache import InstallError, Package, ensure_installed
from helios.agents.installed.openhands import OpenHandsAgent, event_messages
from helios.agents.registry import create_agent
from helios.errors import ConfigError
from helios.models.routing import ModelSpec
from helios.testing.mock_llm import MockLLMServer
from helios.trajectories.atif import validate_trajectory
from helios.usage import Usage
from tests.agent_installs import install

EXAMPLE = Path(__file__).parents[1] / "examples" / "tasks" / "hello-file"
MODEL = "openai/gpt-scripted"
KEY = "sk-openhands-helios-test-key-0123456789"
WRITE = "printf 'Hello, Helios!\\n' > /app/hello.txt"
#: what the agent's commands see: neither the variables that ran OpenHands's Python
#: nor the key
PROBE = WRITE + ' && echo "vars=[$PYTHONHOME$PYTHONPATH$LD_LIBRARY_PATH$HELIOS_OPENHANDS_API_KEY]"'
#: OpenHands's shell tool: `terminal` with `command`
SCRIPT = {"scenarios": [{"match": "*", "turns": [
    {"reasoning": "The file is one printf away.",
     "tool_calls": [{"name": "terminal", "arguments": {"command": PROBE}}]},
    {"text": "Done."}]}]}  # fmt: skip


# -- the log to ATIF -------------------------------------------------------------------
def _event(kind: str, **fields: Any) -> str:
    return json.dumps({"type": "event", "event": {"kind": kind, **fields}})


def _text(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


def _action(call: str, command: str) -> str:
    arguments = json.dumps({"command": command})
    return _event("ActionEvent", source="agent", llm_response_id="r1", reasoning_content="Hm.",
                  thought=_text("Two commands."), tool_name="terminal", tool_call_id=call,
                  tool_call={"id": call, "name": "terminal", "arguments": arguments})  # fmt: skip


LOG = "\n".join([
    _event("SystemPromptEvent", source="agent"),
    _event("MessageEvent", source="user", llm_message={"role": "user", "content": _text("go")}),
    _action("c1", "true"), _action("c2", "false"),  # one reply's two calls
    _event("ObservationEvent", source="environment", tool_call_id="c1",
           observation={"content": _text("ok"), "exit_code": 0, "is_error": False}),
    _event("ObservationEvent", source="environment", tool_call_id="c2",
           observation={"content": _text(""), "exit_code": 1, "is_error": False}),
    _event("MessageEvent", source="agent", llm_response_id="r2",
           timestamp="2026-01-02T03:04:05+00:00",
           llm_message={"role": "assistant", "content": _text("Done.")}),
    "OpenHands noise",
    json.dumps({"type": "metrics", "metrics": {"accumulated_cost": 0.0, "token_usages": [
        {"response_id": "r1", "prompt_tokens": 700, "completion_tokens": 20,
         "cache_read_tokens": 100, "reasoning_tokens": 3},
        {"response_id": "r2", "prompt_tokens": 750, "completion_tokens": 2}]}}),
])  # fmt: skip


def test_the_events_become_replies_with_their_tokens_and_tool_results() -> None:
    usage = Usage()
    messages = event_messages(LOG, usage)
    assert [m.role for m in messages] == ["assistant", "tool", "tool", "assistant"]
    first = messages[0]
    assert (first.content, first.reasoning) == ("Two commands.", "Hm.")
    assert [(c.id, c.name, c.arguments) for c in first.tool_calls] == [
        ("c1", "terminal", {"command": "true"}), ("c2", "terminal", {"command": "false"})]
    assert first.usage is not None and first.usage.input_tokens == 700
    assert [(m.tool_call_id, m.is_error) for m in messages[1:3]] == [("c1", False), ("c2", True)]
    assert messages[3].content == "Done." and messages[3].usage is not None
    assert messages[3].created == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC).timestamp()
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens,
            usage.reasoning_tokens, usage.calls) == (1450, 22, 100, 3, 2)  # fmt: skip


def test_the_key_travels_only_in_the_environment_and_the_version_is_pinned() -> None:
    spec = ModelSpec("openai", "gpt-x", "openai", "http://127.0.0.1:9/v1", api_key=KEY)
    agent = create_agent("openhands", version="1.10.0")
    assert agent.identity()["package"] == "openhands-ai==1.10.0"
    assert create_agent("openhands").identity()["package"] == "openhands-ai==1.11.0"
    assert KEY not in agent.command("write hello", spec, agent.home)
    env = agent.environment(spec)
    assert env[OpenHandsAgent.key_variable] == KEY
    assert env["HELIOS_OPENHANDS_BASE_URL"] == "http://127.0.0.1:9/v1"
    with pytest.raises(ConfigError, match="OpenAI's API"):
        agent.environment(ModelSpec("anthropic", "claude", "anthropic", None))


def test_a_python_the_host_lacks_is_an_install_error_that_says_so(tmp_path: Path) -> None:
    assert python_runtime.find("2.1") is None
    with pytest.raises(InstallError, match=r"needs Python 2\.1.*pyenv install 2\.1"):
        asyncio.run(ensure_installed("x", Package("pip", "x", "1", python="2.1"),
                                     root=tmp_path))  # fmt: skip


# -- the real client --------------------------------------------------------------------
@pytest.fixture(scope="session")
def openhands_install() -> Path:
    """OpenHands from PyPI in the host's agent cache: installed once (by
    tests/agent_installs.py ahead of the suite, else here), then found."""
    if python_runtime.find(OpenHandsAgent.python_version) is None:
        pytest.skip(f"no Python {OpenHandsAgent.python_version} on this host for OpenHands")
    return install(OpenHandsAgent)[0]


@pytest.mark.slow  # OpenHands's imports take seconds on a loaded machine
@pytest.mark.parametrize("provider", [
    pytest.param("local", marks=pytest.mark.bwrap),
    # the install baked into an image derived from the task's (1.5 GB: built once, then
    # found by its key), its bundled Python 3.13 beside the image's own
    pytest.param("docker", marks=pytest.mark.docker),
])  # fmt: skip
def test_openhands_solves_a_task(openhands_install: Path, provider: str, tmp_path: Path,
                                 request: pytest.FixtureRequest) -> None:  # fmt: skip
    request.getfixturevalue("need_bwrap" if provider == "local" else "need_docker")
    # hello-file as it is, without network: OpenHands reaches the server on the
    # host's loopback through the trial's egress proxy, and nothing else
    task = tmp_path / "tasks" / "hello-file"
    shutil.copytree(EXAMPLE, task)
    # OpenHands's imports alone take 5 s of CPU: 8 s on an idle machine, 45 s at a load of 20
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace("[agent]\ntimeout_sec = 120.0", "[agent]\n"
                                             "timeout_sec = 300.0"))  # fmt: skip
    assert "timeout_sec = 300.0" in toml.read_text()
    with MockLLMServer(script=SCRIPT) as server:
        runner = ParallelRunner(
            [task], output_dir=str(tmp_path / "out"), model=MODEL, agent="openhands",
            base_url=server.openai_base_url, api_key=KEY, provider=provider,
            show_progress=False,
        )  # fmt: skip
        batch = asyncio.run(runner.run())
        stats = server.stats
    (result_file,) = batch.output_dir.glob("*/result.json")
    trial, result = result_file.parent, json.loads(result_file.read_text())
    stderr = trial / "agent" / "openhands.stderr"
    assert result["reward"] == 1.0, (result.get("error"), stderr.read_text()[-3000:])
    config = json.loads((trial / "config.json").read_text())
    assert config["agent_version"] == OpenHandsAgent.default_version
    trajectory = json.loads((trial / "agent" / "trajectory.json").read_text())
    assert validate_trajectory(trajectory) == []
    calls = [c for s in trajectory["steps"] for c in s.get("tool_calls") or []]
    assert [(c["function_name"], c["arguments"]) for c in calls] == [
        ("terminal", {"command": PROBE})
    ]
    seen = trajectory["steps"][1]["observation"]["results"][0]["content"]
    assert "vars=[]" in seen, seen
    agent_steps = [s for s in trajectory["steps"] if s["source"] == "agent"]
    assert agent_steps[0]["reasoning_content"] == "The file is one printf away."
    assert agent_steps[-1]["message"] == "Done."
    assert trajectory["final_metrics"]["total_prompt_tokens"] > 0
    assert result["usage"]["calls"] == 2
    assert stats["per_path"].get("/v1/chat/completions") == 2
    for path in trial.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path
