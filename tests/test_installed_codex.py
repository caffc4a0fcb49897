"""The `codex` installed agent (helios.agents.installed.codex): the real Codex CLI,
installed from npm once into the host's agent cache, solving the example task
against the scripted server's Responses API (streamed) on loopback; its `exec
--json` log read into messages and usage."""

from __future__ import annotations

import asyncio
import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from helios import ParallelRunner
from helios.agents.installed.codex import CodexAgent, config_toml, exec_json_messages
from helios.agents.registry import create_agent
from helios.errors import ConfigError
from helios.models.routing import ModelSpec
from helios.testing.mock_llm import MockLLMServer
from helios.trajectories.atif import validate_trajectory
from helios.usage import Usage
from tests.agent_installs import install

EXAMPLE = Path(__file__).parents[1] / "examples" / "tasks" / "hello-file"
MODEL = "openai/gpt-scripted"
KEY = "sk-codex-helios-test-key-0123456789"
WRITE = "printf 'Hello, Helios!\\n' > /app/hello.txt"
#: Codex 0.171's shell tool: a Responses function call of `exec_command` with `cmd`; the
#: scenario is found by the task's text (Codex sends it after its own instructions)
SCRIPT = {"scenarios": [{"match": "Create the file `/app/hello.txt`", "turns": [
    {"reasoning": "The file is one printf away.",
     "tool_calls": [{"name": "exec_command", "arguments": {"cmd": WRITE}}]},
    {"text": "Done."}]}]}  # fmt: skip


@pytest.fixture(scope="session")
def codex_install() -> Path:
    """Codex from npm in the host's agent cache: installed once (by
    tests/agent_installs.py ahead of the suite, else here), then found."""
    return install(CodexAgent)[0]


def _task(tmp_path: Path) -> Path:
    """hello-file as it is, without network: the agent reaches the server on the
    host's loopback through the trial's egress proxy, and nothing else."""
    task = tmp_path / "tasks" / "hello-file"
    shutil.copytree(EXAMPLE, task)
    return task


def _solve(tmp_path: Path, provider: str) -> tuple[Path, dict[str, Any], MockLLMServer]:
    with MockLLMServer(script=SCRIPT) as server:
        runner = ParallelRunner(
            [_task(tmp_path)], output_dir=str(tmp_path / "out"), model=MODEL, agent="codex",
            base_url=server.openai_base_url, api_key=KEY, provider=provider,
            show_progress=False,
        )  # fmt: skip
        batch = asyncio.run(runner.run())
    (result_file,) = batch.output_dir.glob("*/result.json")
    return result_file.parent, json.loads(result_file.read_text()), server


def _check_solved(trial: Path, result: dict[str, Any], server: MockLLMServer) -> None:
    assert result["reward"] == 1.0, result.get("error")
    trajectory = json.loads((trial / "agent" / "trajectory.json").read_text())
    assert validate_trajectory(trajectory) == []
    assert trajectory["agent"]["version"] == CodexAgent.default_version
    calls = [c for s in trajectory["steps"] for c in s.get("tool_calls") or []]
    assert [c["function_name"] for c in calls] == ["command_execution"]
    assert "/app/hello.txt" in calls[0]["arguments"]["command"]
    assert trajectory["final_metrics"]["total_prompt_tokens"] > 0
    assert trajectory["final_metrics"]["total_completion_tokens"] > 0
    # Codex asked over the streamed Responses API, and nowhere else
    assert server.stats["per_path"] == {"/v1/responses": 2}
    assert server.stats["streamed"] == 2
    assert all(r.headers.get("authorization") == f"Bearer {KEY}" for r in server.requests)
    log = (trial / "agent" / "codex.log").read_text()
    assert '"type":"turn.completed"' in log
    # its home is one where it makes the PATH aliases of its helpers (apply_patch)
    assert "could not create PATH aliases" not in (trial / "agent" / "codex.stderr").read_text()
    for path in trial.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path


# -- the log to ATIF ---------------------------------------------------------------
EVENTS = [
    {"type": "thread.started", "thread_id": "t"},
    {"type": "item.completed", "item": {"id": "item_0", "type": "error",
                                        "message": "Model metadata not found."}},
    {"type": "turn.started"},
    {"type": "item.completed", "item": {"id": "item_1", "type": "reasoning", "text": "Think."}},
    {"type": "item.started", "item": {"id": "item_2", "type": "command_execution",
                                      "command": "ls", "status": "in_progress"}},
    {"type": "item.completed", "item": {"id": "item_2", "type": "command_execution",
                                        "command": "bash -lc ls", "aggregated_output": "a.txt\n",
                                        "exit_code": 0, "status": "completed"}},
    {"type": "item.completed", "item": {"id": "item_3", "type": "command_execution",
                                        "command": "false", "aggregated_output": "",
                                        "exit_code": 1, "status": "failed"}},
    {"type": "item.completed", "item": {"id": "item_5", "type": "file_change",
                                        "changes": [{"path": "/app/a.txt", "kind": "add"}],
                                        "status": "completed"}},
    {"type": "item.completed", "item": {"id": "item_6", "type": "mcp_tool_call", "server": "docs",
                                        "tool": "search", "arguments": {"q": "x"},
                                        "result": {"content": []}, "error": None,
                                        "status": "completed"}},
    {"type": "item.completed", "item": {"id": "item_4", "type": "agent_message", "text": "Done."}},
    {"type": "turn.completed", "usage": {"input_tokens": 300, "cached_input_tokens": 100,
                                         "output_tokens": 20, "reasoning_output_tokens": 5}},
]  # fmt: skip


def test_exec_json_becomes_calls_results_and_the_turns_usage() -> None:
    usage = Usage()
    log = "\n".join(json.dumps(e) for e in EVENTS) + "\nWARNING: not json\n"
    messages = exec_json_messages(log, usage)
    assert [m.role for m in messages] == ["assistant", "tool"] * 4 + ["assistant"]
    assert messages[0].reasoning == "Think."
    assert [(c.id, c.name, c.arguments) for c in messages[0].tool_calls] == [
        ("item_2", "command_execution", {"command": "bash -lc ls"})
    ]
    assert messages[1].tool_call_id == "item_2" and messages[1].content == "a.txt\n[exit code 0]"
    assert not messages[1].is_error and messages[3].is_error
    patch, mcp = messages[4].tool_calls[0], messages[6].tool_calls[0]
    assert (patch.name, messages[5].content) == ("file_change", "add /app/a.txt")
    assert (mcp.name, mcp.arguments, messages[7].is_error) == ("docs.search", {"q": "x"}, False)
    assert messages[-1].content == "Done." and not messages[-1].tool_calls
    # the turn's tokens are on its last reply, and in the total
    assert messages[-1].usage is not None and messages[-1].usage.output_tokens == 20
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens,
            usage.reasoning_tokens, usage.calls) == (200, 100, 20, 5, 5)  # fmt: skip


def test_the_config_names_the_endpoint_and_turns_off_what_reaches_other_hosts() -> None:
    import tomllib

    spec = ModelSpec("openai", 'gpt-"q"', "openai", "http://127.0.0.1:9/v1", api_key=KEY)
    config = tomllib.loads(config_toml(spec, key_variable="OPENAI_API_KEY"))
    assert config["model"] == 'gpt-"q"' and config["model_provider"] == "helios"
    assert config["model_providers"]["helios"] == {
        "name": "helios", "base_url": "http://127.0.0.1:9/v1", "wire_api": "responses",
        "env_key": "OPENAI_API_KEY"}  # fmt: skip
    assert KEY not in config_toml(spec, key_variable="OPENAI_API_KEY")
    assert config["check_for_update_on_startup"] is False
    assert config["features"]["plugins"] is False and config["features"]["apps"] is False
    assert create_agent("codex").identity()["package"] == "@openai/codex@0.171.0"
    assert CodexAgent().endpoint(replace(spec, base_url=None)) == "https://api.openai.com/v1"
    with pytest.raises(ConfigError, match="Responses API"):
        CodexAgent().environment(ModelSpec("anthropic", "claude", "anthropic", None))


# -- the scripted server's streamed Responses API, as the OpenAI SDK reads it ------------
def test_the_scripted_server_streams_responses_the_sdk_accumulates() -> None:
    import openai

    tools: list[Any] = [
        {"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
        {"type": "namespace", "name": "agents", "description": "d", "tools": [
            {"type": "function", "name": "spawn", "parameters": {"type": "object"}}]},
        {"type": "web_search", "external_web_access": True},
    ]  # fmt: skip
    with MockLLMServer(script=SCRIPT) as server:
        client = openai.OpenAI(base_url=server.openai_base_url, api_key="k")
        opening = "Create the file `/app/hello.txt`"
        with client.responses.stream(model="gpt-scripted", input=opening, tools=tools) as stream:
            kinds = [event.type for event in stream]
            first = stream.get_final_response()
        call = first.output[-1]
        assert call.type == "function_call" and json.loads(call.arguments) == {"cmd": WRITE}
        assert first.output[0].type == "reasoning" and first.usage and first.usage.input_tokens
        assert kinds[:2] == ["response.created", "response.in_progress"]
        assert kinds[-1] == "response.completed"
        assert "response.function_call_arguments.delta" in kinds
        history: list[Any] = [{"role": "user", "content": opening},
                              *[item.model_dump(exclude_none=True) for item in first.output],
                              {"type": "function_call_output", "call_id": call.call_id,
                               "output": "ok"}]  # fmt: skip
        with client.responses.stream(model="gpt-scripted", input=history) as stream:
            assert stream.get_final_response().output_text == "Done."


# -- the real client ------------------------------------------------------------------
@pytest.mark.usefixtures("need_bwrap")
def test_codex_solves_a_task_on_local(codex_install: Path, tmp_path: Path) -> None:
    _check_solved(*_solve(tmp_path, "local"))


@pytest.mark.usefixtures("need_docker")
def test_codex_solves_a_task_on_docker(codex_install: Path, tmp_path: Path) -> None:
    # the install is baked into an image derived from the task's
    _check_solved(*_solve(tmp_path, "docker"))
