"""ACP agents (`--agent acp:…`, helios.agents.installed.acp): a small agent speaking
the Agent Client Protocol on stdio (tests/data/acp_agent.py, standard library only)
runs inside the sandbox, driven by Helios's one ACP client over the sandbox's exec,
calls the scripted model server, runs the shell command it is told to, and the
verifier gives 1; its session updates become the ATIF trajectory."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from helios import ParallelRunner
from helios.agents.installed.acp import ACPSource, acp_log_messages, parse_acp
from helios.agents.registry import agent_class, agent_version, create_agent
from helios.errors import ConfigError
from helios.testing.mock_llm import MockLLMServer
from helios.trajectories.atif import validate_trajectory
from helios.usage import Usage

EXAMPLE = Path(__file__).parents[1] / "examples" / "tasks" / "hello-file"
AGENT = Path(__file__).parent / "data" / "acp_agent.py"
KEY = "sk-helios-acp-test-key-0123456789"
WRITE = "printf 'Hello, Helios!\\n' > /app/hello.txt"
SCRIPT = {"scenarios": [{"match": "*", "turns": [
    {"tool_calls": [{"name": "bash", "arguments": {"command": WRITE}}]},
    {"text": "Done."}]}]}  # fmt: skip
#: the test agent needs a python3 in the image (the local sandbox shows the host's)
DOCKERFILE = """\
FROM debian:bookworm-slim
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends python3 \\
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
"""


def _task(tmp_path: Path, internet: bool = True) -> Path:
    task = tmp_path / "tasks" / "hello-file"
    shutil.copytree(EXAMPLE, task)
    toml = task / "task.toml"
    if internet:
        toml.write_text(toml.read_text().replace("allow_internet = false", "allow_internet = true"))
    (task / "environment" / "Dockerfile").write_text(DOCKERFILE)
    return task


def _run(
    tmp_path: Path, provider: str, script: dict[str, Any] = SCRIPT, internet: bool = True
) -> tuple[Path, Any]:
    with MockLLMServer(script=script) as server:
        runner = ParallelRunner(
            [_task(tmp_path, internet)], output_dir=str(tmp_path / "out"), provider=provider,
            model="openai-compatible/scripted", agent=f"acp:bin:{AGENT}",
            base_url=server.openai_base_url, api_key=KEY, show_progress=False,
        )  # fmt: skip
        batch = asyncio.run(runner.run())
    (result_file,) = batch.output_dir.glob("*/result.json")
    return result_file.parent, json.loads(result_file.read_text())


def _check_solved(trial: Path, result: dict[str, Any]) -> None:
    assert result["reward"] == 1.0, (result.get("error"), result.get("agent_error"),
                                     (trial / "agent" / "acp.stderr").read_text())  # fmt: skip
    trajectory = json.loads((trial / "agent" / "trajectory.json").read_text())
    assert validate_trajectory(trajectory) == []
    calls = [c for s in trajectory["steps"] for c in s.get("tool_calls") or []]
    assert [(c["function_name"], c["arguments"]) for c in calls] == [("bash", {"command": WRITE})]
    observed = [r for s in trajectory["steps"]
                for r in (s.get("observation") or {}).get("results", [])]  # fmt: skip
    assert observed, trajectory["steps"]
    assert any("Done." in str(s.get("message")) for s in trajectory["steps"])
    assert trajectory["final_metrics"]["total_prompt_tokens"] > 0
    log = (trial / "agent" / "acp.log").read_text()
    assert '"sessionUpdate": "tool_call"' in log and '"allowed": true' in log
    for path in trial.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path


@pytest.mark.usefixtures("need_bwrap")
def test_an_acp_agent_solves_a_task_on_local(tmp_path: Path) -> None:
    _check_solved(*_run(tmp_path, "local"))


@pytest.mark.parametrize("provider", ["local", "docker"])
def test_an_acp_agent_of_a_no_network_task_reaches_its_model_alone(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    provider: str,
) -> None:  # fmt: skip
    """allow_internet = false: the agent's run gets a route to the model's endpoint
    only (the trial's egress proxy), as every installed agent's does."""
    request.getfixturevalue("need_bwrap" if provider == "local" else "need_docker")
    monkeypatch.setenv("HELIOS_DOCKER_BUILD_NETWORK", "host")  # apt for python3
    _check_solved(*_run(tmp_path, provider, internet=False))


@pytest.mark.usefixtures("need_docker")
def test_an_acp_agent_solves_a_task_on_docker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HELIOS_DOCKER_NETWORK", "host")  # the server is on loopback
    monkeypatch.setenv("HELIOS_DOCKER_BUILD_NETWORK", "host")  # apt for python3
    _check_solved(*_run(tmp_path, "docker"))


@pytest.mark.usefixtures("need_bwrap")
def test_an_acp_agent_that_dies_or_hangs_is_an_agent_error_and_the_trial_is_scored(
    tmp_path: Path,
) -> None:
    dies = tmp_path / "dies.sh"
    dies.write_text("#!/bin/sh\necho 'cannot start: no model' >&2\nexit 3\n")
    hangs = tmp_path / "hangs.sh"
    hangs.write_text("#!/bin/sh\nexec sleep 600\n")
    for script in (dies, hangs):
        script.chmod(0o755)
    task = _task(tmp_path)
    toml = task / "task.toml"
    template = toml.read_text()
    for script in (dies, hangs):
        # the hang meets a 4 s timeout; the death is seen long before 60 s (at 4 s, a
        # loaded machine's start of the agent took it to the timeout first)
        timeout = "4.0" if script is hangs else "60.0"
        toml.write_text(template.replace("timeout_sec = 120.0", f"timeout_sec = {timeout}"))
        with MockLLMServer(script=SCRIPT) as server:
            runner = ParallelRunner(
                [task], output_dir=str(tmp_path / script.stem), provider="local",
                model="openai-compatible/scripted", agent=f"acp:bin:{script}",
                base_url=server.openai_base_url, api_key=KEY, show_progress=False,
            )  # fmt: skip
            batch = asyncio.run(runner.run())
        (result_file,) = batch.output_dir.glob("*/result.json")
        result = json.loads(result_file.read_text())
        assert result["reward"] == 0.0 and result["error"] is None, result["error"]
        stderr = (result_file.parent / "agent" / "acp.stderr").read_text()
        if script is dies:
            assert result["agent_error"]["type"] == "ACPError"
            assert "cannot start: no model" in stderr and "exit code 3" in stderr
        else:
            assert result["agent_error"]["type"] == "AgentTimeout"
            assert "timed out" in stderr


#: Claude Code's ACP agent escapes a `!` in its Bash commands: octal spares it one
PUBLISHED_WRITE = "printf 'Hello, Helios\\041\\n' > /app/hello.txt"


@pytest.mark.usefixtures("need_bwrap")
def test_a_published_acp_agent_solves_a_task_on_local(tmp_path: Path) -> None:
    """Zed's Claude Code ACP agent (npm), installed into the host's agent cache and
    run by the sandbox's node (the host's, on local) against the scripted Anthropic
    server: the same client, no adapter. The task's stdio MCP server goes to its
    session; it starts it in the sandbox and calls its tool."""
    if shutil.which("node") is None:
        pytest.skip("no node on this host")  # the local sandbox shows the host's
    task = _task(tmp_path)
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace("memory_mb = 512", "memory_mb = 2048") + (
        '[[environment.mcp_servers]]\nname = "hello"\ncommand = "sh"\n'
        'args = ["/app/mcp_server.sh"]\n'))  # fmt: skip
    shutil.copy(Path(__file__).parent / "data" / "mcp_server.sh", task / "environment")
    call = {"name": "Bash", "arguments": {"command": PUBLISHED_WRITE, "description": "write"}}
    turns = [{"tool_calls": [{"name": "mcp__hello__get_secret", "arguments": {}}]},
             {"tool_calls": [call]}, {"text": "Done."}]  # fmt: skip
    with MockLLMServer(script={"scenarios": [{"match": "*", "turns": turns}]}) as server:
        runner = ParallelRunner(
            [task], output_dir=str(tmp_path / "out"), provider="local",
            model="anthropic/claude-scripted", agent="acp:claude-code",
            base_url=server.anthropic_base_url, api_key=KEY, show_progress=False,
        )  # fmt: skip
        batch = asyncio.run(runner.run())
        sent = json.dumps([r.body for r in server.requests])
    (result_file,) = batch.output_dir.glob("*/result.json")
    trial, result = result_file.parent, json.loads(result_file.read_text())
    assert result["reward"] == 1.0, (result.get("error"), result.get("agent_error"))
    assert "The secret word is PAPAYA-42" in sent  # the MCP tool's result, to the model
    trajectory = json.loads((trial / "agent" / "trajectory.json").read_text())
    calls = [c for s in trajectory["steps"] for c in s.get("tool_calls") or []]
    assert [c["arguments"].get("command") for c in calls] == [None, PUBLISHED_WRITE]


def _wheel(folder: Path, name: str, version: str, module: str) -> Path:
    """A wheel of one module with a console script `name` calling its `main`."""
    import base64
    import hashlib
    import zipfile

    dist = f"{name.replace('-', '_')}-{version}"
    files = {
        f"{module}.py": AGENT.read_text(),
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: helios-tests\n"
                                   "Root-Is-Purelib: true\nTag: py3-none-any\n",
        f"{dist}.dist-info/entry_points.txt": f"[console_scripts]\n{name} = {module}:main\n",
    }  # fmt: skip
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    files[f"{dist}.dist-info/RECORD"] = "\n".join([*record, f"{dist}.dist-info/RECORD,,"]) + "\n"
    wheel = folder / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


@pytest.mark.usefixtures("need_bwrap")
def test_an_acp_agent_from_a_python_package_solves_a_task_on_local(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`acp:pip:PKG@VERSION`: installed with pip into the agent cache (here from a
    local wheel: pip's own settings point it there) and run by its console script."""
    (tmp_path / "wheels").mkdir()
    _wheel(tmp_path / "wheels", "helios-acp-test-agent", "0.1.0", "helios_acp_test_agent")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "wheels"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    # a cache the sandbox's users can reach (pytest's tmp_path is closed to them)
    cache = Path(tempfile.mkdtemp(prefix="helios-acp-test-", dir="/var/tmp"))
    cache.chmod(0o755)
    monkeypatch.setenv("HELIOS_AGENT_CACHE", str(cache))
    try:
        with MockLLMServer(script=SCRIPT) as server:
            runner = ParallelRunner(
                [_task(tmp_path)], output_dir=str(tmp_path / "out"), provider="local",
                model="openai-compatible/scripted", agent="acp:pip:helios-acp-test-agent@0.1.0",
                base_url=server.openai_base_url, api_key=KEY, show_progress=False,
            )  # fmt: skip
            batch = asyncio.run(runner.run())
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    (result_file,) = batch.output_dir.glob("*/result.json")
    trial, result = result_file.parent, json.loads(result_file.read_text())
    _check_solved(trial, result)
    install = json.loads((trial / "agent" / "install.json").read_text())
    assert install["package"] == "helios-acp-test-agent==0.1.0" and install["cached"] is False


# -- names, versions, the log -------------------------------------------------------------
def test_acp_names_say_where_the_agent_comes_from() -> None:
    assert parse_acp("acp:npm:@scope/agent@1.2.3") == ACPSource("npm", "@scope/agent", "1.2.3")
    assert parse_acp("acp:npm:@scope/agent").version == "latest"
    assert parse_acp("acp:pip:some-agent==0.4") == ACPSource("pip", "some-agent", "0.4")
    gemini = parse_acp("acp:gemini@0.60.0")
    assert (gemini.package, gemini.version, gemini.args) == (
        "@google/gemini-cli", "0.60.0", ("--experimental-acp",))
    assert parse_acp(f"acp:bin:{AGENT}").kind == "bin"
    for bad in ("acp:nope", "acp:apt:x", "acp:bin:/no/such/file", "acp:npm:bad name"):
        with pytest.raises(ConfigError):
            parse_acp(bad)
    # one class per name; --agent-version pins another release, recorded in the identity
    assert agent_class("acp:npm:x@1") is agent_class("acp:npm:x@1")
    assert agent_version("acp:npm:x@1", {}) == "1"
    assert agent_version("acp:npm:x@1", {"version": "2"}) == "2"
    assert create_agent("acp:npm:x@1", version="2").identity()["package"] == "x@2"


def test_session_updates_become_messages_and_usage() -> None:
    def text(kind: str, said: str) -> dict[str, Any]:
        return {"update": {"sessionUpdate": kind, "content": {"type": "text", "text": said}}}

    records = [
        text("agent_thought_chunk", "hm"),
        text("agent_message_chunk", "I "),
        text("agent_message_chunk", "will"),
        {"update": {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "bash",
                    "rawInput": {}}},
        # announced again, with its input (Claude Code's ACP agent does so)
        {"update": {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "`ls`",
                    "kind": "execute", "rawInput": {"command": "ls"}}},
        {"permission": {"toolCallId": "c1"}, "allowed": True},
        {"update": {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "failed",
                    "content": [{"type": "content", "content": {"type": "text", "text": "no"}}]}},
        text("agent_message_chunk", "ok"),
        {"update": {"sessionUpdate": "usage_update", "used": 5, "size": 9,
                    "cost": {"amount": 0.25, "currency": "USD"}}},
        {"prompt_response": {"stopReason": "end_turn",
                             "usage": {"inputTokens": 30, "outputTokens": 4, "totalTokens": 34}}},
    ]  # fmt: skip
    usage = Usage()
    log = "".join(json.dumps(r) + "\n" for r in records) + "torn"
    messages = acp_log_messages(log, usage)
    assert [m.role for m in messages] == ["assistant", "tool", "assistant"]
    assert (messages[0].content, messages[0].reasoning) == ("I will", "hm")
    assert [(c.id, c.name, c.arguments) for c in messages[0].tool_calls] == [
        ("c1", "bash", {"command": "ls"})]
    assert messages[1].is_error and messages[1].content == "no"
    assert (usage.input_tokens, usage.output_tokens, usage.calls) == (30, 4, 2)
    assert usage.cost_usd == pytest.approx(0.25)
