"""Installed agents mini-swe-agent (PyPI) and Gemini CLI (npm): each real client,
installed once into the host's agent cache at its pinned version, solves the example
task against the scripted server on loopback (Chat Completions for mini-swe-agent,
Gemini's streamed generateContent for Gemini CLI); and their logs' conversion."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from helios import ParallelRunner
from helios.agents.installed.gemini_cli import MARKER, GeminiCliAgent
from helios.agents.installed.gemini_cli import stream_json_messages as gemini_messages
from helios.agents.installed.mini_swe_agent import (
    MISSING_PYTHON,
    PYTHON,
    MiniSweAgent,
    trajectory_messages,
)
from helios.agents.registry import create_agent
from helios.errors import ConfigError
from helios.models.routing import ModelSpec
from helios.testing.mock_llm import MockLLMServer
from helios.trajectories.atif import validate_trajectory
from helios.usage import Usage
from tests.agent_installs import install
from tests.waiting import wait_until

EXAMPLE = Path(__file__).parents[1] / "examples" / "tasks" / "hello-file"
KEY = "sk-helios-test-key-0123456789abcdef"
WRITE = "printf 'Hello, Helios!\\n' > /app/hello.txt"
#: mini-swe-agent stops when a command's output starts with this line
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
#: the example image with a python3 for mini-swe-agent (Debian's, as Helios's own 3.11)
PYTHON_IMAGE = (
    "FROM debian:bookworm-slim\n"
    "RUN apt-get update && apt-get install -y --no-install-recommends python3 "
    "&& rm -rf /var/lib/apt/lists/*\nWORKDIR /app\n"
)


def _task(tmp_path: Path, dockerfile: str | None = None, *, network: bool = True) -> Path:
    """hello-file with the network on (the agent reaches the server on loopback), or
    off (it reaches the server through the trial's egress proxy, and nothing else)."""
    task = tmp_path / "tasks" / "hello-file"
    shutil.copytree(EXAMPLE, task)
    toml = task / "task.toml"
    internet = f"allow_internet = {'true' if network else 'false'}"
    # the example's 512 MB is enough for both (Claude Code's runtime needs 1 GiB)
    toml.write_text(toml.read_text().replace("allow_internet = false", internet))
    if dockerfile is not None:
        (task / "environment" / "Dockerfile").write_text(dockerfile)
    return task


def _mini_script() -> dict[str, Any]:
    bash = [{"name": "bash", "arguments": {"command": c}} for c in (WRITE, SUBMIT)]
    return {"scenarios": [{"match": "*", "turns": [
        {"text": "I write the file.", "tool_calls": [bash[0]]},
        {"text": "Submitting.", "tool_calls": [bash[1]]},
        {"text": "Done."}]}]}  # fmt: skip


def _gemini_script() -> dict[str, Any]:
    call = {"name": "run_shell_command", "arguments": {"command": WRITE}}
    return {"scenarios": [{"match": "*", "turns": [
        {"text": "I write the file.", "tool_calls": [call]}, {"text": "Done."}]}]}  # fmt: skip


def _run(tmp_path: Path, task: Path, agent: str, provider: str) -> tuple[Path, dict[str, Any]]:
    script = _mini_script() if agent == "mini-swe-agent" else _gemini_script()
    with MockLLMServer(script=script) as server:
        model, url = ("openai/mini-scripted", server.openai_base_url) if agent == (
            "mini-swe-agent") else ("gemini/gemini-scripted", server.gemini_base_url)  # fmt: skip
        runner = ParallelRunner(
            [task], output_dir=str(tmp_path / "out"), model=model, agent=agent,
            base_url=url, api_key=KEY, show_progress=False, provider=provider,
        )  # fmt: skip
        batch = asyncio.run(runner.run())
        served = server.stats["served_ok"]
    (result_file,) = batch.output_dir.glob("*/result.json")
    result = json.loads(result_file.read_text())
    assert served >= 2, (served, result.get("error"))
    return result_file.parent, result


def _check_solved(trial: Path, result: dict[str, Any], agent: str, tool: str) -> None:
    assert result["reward"] == 1.0, (result.get("error"), _stderr(trial, agent))
    trajectory = json.loads((trial / "agent" / "trajectory.json").read_text())
    assert validate_trajectory(trajectory) == []
    calls = [c for s in trajectory["steps"] for c in s.get("tool_calls") or []]
    assert calls and calls[0]["function_name"] == tool
    assert trajectory["final_metrics"]["total_prompt_tokens"] > 0
    assert trajectory["final_metrics"]["total_completion_tokens"] > 0
    for path in trial.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path


def _stderr(trial: Path, agent: str) -> str:
    path = trial / "agent" / f"{agent}.stderr"
    return path.read_text()[-2000:] if path.is_file() else ""


@pytest.fixture(scope="session")
def mini_install() -> Path:
    """mini-swe-agent from PyPI in the host's agent cache (tests/agent_installs.py
    installs it ahead of the suite, else here)."""
    return install(MiniSweAgent)[0]


@pytest.fixture(scope="session")
def gemini_install() -> Path:
    """Gemini CLI and Node's build from npm in the host's agent cache."""
    return install(GeminiCliAgent)[0]


# -- the real clients -----------------------------------------------------------------
@pytest.mark.usefixtures("need_bwrap")
def test_mini_swe_agent_solves_a_task_on_local(mini_install: Path, tmp_path: Path) -> None:
    if not Path(f"/usr/bin/python{PYTHON}").exists():  # the local sandbox shows the host's /usr
        pytest.skip(f"no /usr/bin/python{PYTHON} (Helios's Python) for the sandbox")
    trial, result = _run(tmp_path, _task(tmp_path, network=False), "mini-swe-agent", "local")
    _check_solved(trial, result, "mini-swe-agent", "bash")
    config = json.loads((trial / "config.json").read_text())
    assert config["agent_version"] == MiniSweAgent.default_version
    log = json.loads((trial / "agent" / "mini-swe-agent.log").read_text())
    assert log["info"]["exit_status"] == "Submitted"


@pytest.mark.slow  # the image gets Debian's python3; the 700 MB install is uploaded
@pytest.mark.usefixtures("need_docker")
def test_mini_swe_agent_solves_a_task_on_docker(
    mini_install: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the example image has no Python: this one adds Debian's python3 (3.11, as Helios's)
    if PYTHON != "3.11":
        pytest.skip(f"Debian bookworm's python3 is 3.11, not Helios's {PYTHON}")
    # a task without network: the model's calls go through the trial's egress proxy
    monkeypatch.setenv("HELIOS_DOCKER_BUILD_NETWORK", "host")
    task = _task(tmp_path, PYTHON_IMAGE, network=False)
    trial, result = _run(tmp_path, task, "mini-swe-agent", "docker")
    _check_solved(trial, result, "mini-swe-agent", "bash")


def test_mini_swe_agent_says_in_one_line_that_the_image_has_no_python(tmp_path: Path) -> None:
    # its command run where no python3.X is found (an image without one)
    spec = ModelSpec("openai", "m", "openai", "http://127.0.0.1:9/v1", "k")
    command = MiniSweAgent().command("do it", spec, "/opt/h")
    done = subprocess.run(["/bin/sh", "-c", command], env={"PATH": str(tmp_path)},
                          capture_output=True, text=True, timeout=30)  # fmt: skip
    assert done.returncode == 127 and done.stdout == ""
    assert done.stderr.strip() == MISSING_PYTHON
    assert MISSING_PYTHON.startswith(f"mini-swe-agent needs python{PYTHON} in the sandbox")


@pytest.mark.usefixtures("need_bwrap")
def test_gemini_cli_solves_a_task_on_local(gemini_install: Path, tmp_path: Path) -> None:
    trial, result = _run(tmp_path, _task(tmp_path, network=False), "gemini-cli", "local")
    _check_solved(trial, result, "gemini-cli", "run_shell_command")
    log = (trial / "agent" / "gemini-cli.log").read_text()
    assert '"type":"result"' in log and '"status":"success"' in log


@pytest.mark.usefixtures("need_docker")
def test_gemini_cli_solves_a_task_on_docker(gemini_install: Path, tmp_path: Path) -> None:
    # the example image has no Node: the install carries Node's own build; a task
    # without network: the model's calls go through the trial's egress proxy
    trial, result = _run(tmp_path, _task(tmp_path, network=False), "gemini-cli", "docker")
    _check_solved(trial, result, "gemini-cli", "run_shell_command")


# -- the logs to ATIF --------------------------------------------------------------------
MINI_TRAJECTORY = {
    "info": {"model_stats": {"instance_cost": 0.0, "api_calls": 2}, "exit_status": "Submitted"},
    "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Please solve this issue: write the file"},
        {"role": "assistant", "content": "I write it.", "tool_calls": [
            {"id": "c0", "type": "function",
             "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}],
         "extra": {"cost": 0.002, "response": {"model": "m-1", "usage": {
             "prompt_tokens": 100, "completion_tokens": 7,
             "prompt_tokens_details": {"cached_tokens": 40}}}}},
        {"role": "tool", "tool_call_id": "c0", "content": "{\"returncode\": 2}",
         "extra": {"returncode": 2}},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "function": {"name": "bash", "arguments": "not json"}}],
         "extra": {"response": {"usage": {"prompt_tokens": 120, "completion_tokens": 3}}}},
        {"role": "exit", "content": "", "extra": {"exit_status": "Submitted"}},
    ],
}  # fmt: skip


def test_mini_swe_agents_trajectory_becomes_messages_with_each_replys_tokens() -> None:
    usage = Usage()
    messages = trajectory_messages(json.dumps(MINI_TRAJECTORY), usage)
    assert [m.role for m in messages] == ["assistant", "tool", "assistant"]
    first = messages[0]
    assert first.content == "I write it." and first.model == "m-1"
    assert [(c.id, c.name, c.arguments) for c in first.tool_calls] == [
        ("c0", "bash", {"command": "ls"})
    ]
    assert first.usage is not None and first.usage.cache_read_tokens == 40
    assert first.usage.cost_usd == pytest.approx(0.002)
    assert messages[1].tool_call_id == "c0" and messages[1].is_error
    assert messages[2].tool_calls[0].arguments is None
    assert (usage.input_tokens, usage.output_tokens, usage.calls) == (220, 10, 2)
    assert usage.cost_usd is None and "no cost" in str(usage.cost_unknown_reason)
    assert trajectory_messages("the run died before writing it", Usage()) == []


GEMINI_STREAM = [
    {"type": "init", "session_id": "s", "model": "gemini-scripted"},
    {"type": "message", "role": "user", "content": "write the file"},
    {"type": "message", "role": "assistant", "content": "I write ", "delta": True},
    {"type": "message", "role": "assistant", "content": "it.", "delta": True},
    {"type": "tool_use", "tool_name": "run_shell_command", "tool_id": "t0",
     "parameters": {"command": "ls"}},
    {"type": "tool_result", "tool_id": "t0", "status": "success", "output": "a.txt"},
    {"type": "tool_use", "tool_name": "run_shell_command", "tool_id": "t1",
     "parameters": {"command": "false"}},
    {"type": "tool_result", "tool_id": "t1", "status": "error",
     "error": {"type": "exit", "message": "exit 1"}},
    {"type": "message", "role": "assistant", "content": "Done.", "delta": True},
    {"type": "result", "status": "success",
     "stats": {"input_tokens": 900, "output_tokens": 12, "cached": 30, "tool_calls": 2}},
]  # fmt: skip
#: the chat recording printed after the log: each reply's tokens (a reply is
#: recorded again once its calls are answered)
RECORDING = [
    {"sessionId": "s", "kind": "main"},
    {"id": "u0", "type": "user", "content": [{"text": "write the file"}]},
    {"id": "r0", "type": "gemini", "model": "g-1", "tokens": {"input": 300, "output": 4}},
    {"id": "r0", "type": "gemini", "model": "g-1", "tokens": {"input": 300, "output": 5,
                                                             "thoughts": 2, "cached": 10}},
    {"$set": {"lastUpdated": "now"}},
    {"id": "r1", "type": "gemini", "tokens": {"input": 310, "output": 3}},
    {"id": "r2", "type": "gemini", "tokens": {"input": 290, "output": 2}},
]  # fmt: skip


def test_an_agent_stopped_at_its_timeout_has_its_log_salvaged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The base's run with a sandbox whose command times out: the agent is stopped
    2 s before its timeout (not the usual tenth), its `salvage` command then prints
    the file it had written, which becomes its messages; the ending is AgentTimeout."""
    from types import SimpleNamespace
    from typing import cast

    from helios.agents.base import AgentContext
    from helios.agents.installed.cache import Installed
    from helios.environments.base import ExecResult
    from helios.environments.null import NullEnvironment
    from helios.environments.spec import SandboxSpec

    calls: list[tuple[str, float | None]] = []
    partial = {"messages": MINI_TRAJECTORY["messages"][:4]}  # a reply and its result

    class Stopped(NullEnvironment):
        async def mount_readonly(self, host: Path, dst: str) -> bool:
            return True

        async def exec(self, command: str, **kwargs: Any) -> ExecResult:
            calls.append((command, kwargs.get("timeout")))
            if len(calls) == 1:  # the agent: killed at its timeout, nothing printed
                return ExecResult("", "working...", -9, timed_out=True)
            return ExecResult(json.dumps(partial), "", 0)

    async def installed(self: Any) -> tuple[Installed, Path]:
        return Installed(tmp_path, 0.0), tmp_path

    monkeypatch.setattr(MiniSweAgent, "_install", installed)
    spec = ModelSpec("openai", "m", "openai", None, "k")
    ctx = AgentContext(logs_dir=tmp_path / "agent", timeout=10.0,
                       services=cast(Any, SimpleNamespace(spec=spec)))  # fmt: skip
    env = Stopped(SandboxSpec(network=True), trial_id="t", run_id="r")
    outcome = asyncio.run(MiniSweAgent().run("write the file", env, ctx))
    assert outcome.error is not None and outcome.error.type == "AgentTimeout"
    (_, budget), (salvage, _) = calls
    assert budget is not None and 7.5 < budget <= 8.0  # stopped 2 s before, not 1 s
    assert salvage == MiniSweAgent().salvage("/opt/h")
    assert [m.role for m in outcome.conversation] == ["user", "assistant", "tool"]
    assert outcome.conversation[1].tool_calls[0].arguments == {"command": "ls"}
    assert ctx.usage.input_tokens == 100
    assert '"messages"' in (tmp_path / "agent" / "mini-swe-agent.log").read_text()
    assert "timed out" in (tmp_path / "agent" / "mini-swe-agent.stderr").read_text()


def test_gemini_clis_stream_json_becomes_one_message_per_reply_with_the_run_tokens() -> None:
    usage = Usage()
    log = "\n".join(json.dumps(r) for r in GEMINI_STREAM) + "\nRipgrep is not available\n"
    recording = "\n".join(json.dumps(r) for r in RECORDING)
    messages = gemini_messages(f"{log}{MARKER}\n{recording}\n", usage)
    assert [m.role for m in messages] == ["assistant", "tool", "assistant", "tool", "assistant"]
    assert messages[0].content == "I write it."
    assert [(c.id, c.arguments) for c in messages[0].tool_calls] == [("t0", {"command": "ls"})]
    assert messages[1].content == "a.txt" and not messages[1].is_error
    assert messages[3].is_error and "exit 1" in messages[3].content
    assert messages[4].content == "Done."
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens) == (900, 12, 30)
    assert usage.calls == 3 and usage.cost_usd is None
    first = messages[0].usage
    assert first is not None and messages[0].model == "g-1"
    assert (first.input_tokens, first.output_tokens, first.reasoning_tokens) == (300, 7, 2)
    assert [m.usage.input_tokens for m in messages if m.usage] == [300, 310, 290]
    # without the recording (a run cut short) the replies carry no tokens of their own
    assert all(m.usage is None for m in gemini_messages(log, Usage()))


def test_the_scripted_server_streams_gemini_replies_as_server_sent_events() -> None:
    # what Gemini CLI calls: the text in pieces, then the calls whole, usage on each event
    call = {"name": "run_shell_command", "arguments": {"command": "ls"}}
    turn = {"text": "I write the file now.", "tool_calls": [call]}
    script = {"scenarios": [{"match": "*", "turns": [turn]}]}
    body = {"contents": [{"role": "user", "parts": [{"text": "go"}]}]}  # fmt: skip
    with MockLLMServer(script=script) as server:
        request = urllib.request.Request(
            f"{server.gemini_base_url}/v1beta/models/g-1:streamGenerateContent?alt=sse",
            data=json.dumps(body).encode(), headers={"Content-Type": "application/json"},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.headers["Content-Type"].startswith("text/event-stream")
            raw = response.read().decode()
        # counted once the server's handler returns, which may be after the client read it
        wait_until(lambda: server.stats["streamed"] == 1, "the reply counted as streamed")
        server.set_faults(fail_sequence=["malformed"])  # a cut-off body is an event too
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.headers["Content-Type"].startswith("text/event-stream")
            assert response.read().startswith(b'data: {"candidates"')
    events = [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: ")]
    assert len(events) > 2
    parts = [p for e in events for p in e["candidates"][0]["content"]["parts"]]
    assert "".join(p.get("text", "") for p in parts) == "I write the file now."
    (call,) = [p for p in parts if "functionCall" in p]
    assert call["functionCall"] == {"name": "run_shell_command", "args": {"command": "ls"}}
    assert call["thoughtSignature"]
    assert events[-1]["candidates"][0]["finishReason"] == "STOP"
    assert all(e["usageMetadata"]["promptTokenCount"] > 0 for e in events)


# -- the command lines ----------------------------------------------------------------------
def test_each_agent_takes_only_the_models_whose_wire_it_speaks() -> None:
    anthropic = ModelSpec("anthropic", "claude-x", "anthropic", None, "k")
    with pytest.raises(ConfigError, match="Chat Completions"):
        MiniSweAgent().environment(anthropic)
    with pytest.raises(ConfigError, match="gemini/ model"):
        GeminiCliAgent().environment(anthropic)
    gemini = ModelSpec("gemini", "gemini-x", "openai", "http://127.0.0.1:9/v1beta/openai/", "k")
    env = GeminiCliAgent().environment(gemini)
    assert env["GOOGLE_GEMINI_BASE_URL"] == "http://127.0.0.1:9"
    assert env["GEMINI_API_KEY"] == "k" and env["HOME"].startswith("/tmp/")
    command = GeminiCliAgent().command("do it", gemini, "/opt/h")
    assert '"selectedType": "gemini-api-key"' in command and "--yolo" in command
    assert create_agent("gemini-cli").identity()["package"] == "@google/gemini-cli@0.61.0"
    assert create_agent("mini-swe-agent", version="2.4.5").identity()["package"] == (
        "mini-swe-agent==2.4.5"
    )
