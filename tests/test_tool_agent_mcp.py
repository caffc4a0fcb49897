"""MCP servers and skills (Harbor's `[[environment.mcp_servers]]`, `skills_dir`) reach
the tool agent, end to end through the task door with the scripted model server: a
stdio server runs inside the sandbox (written in sh: the test image has no python3),
its tool is offered, called, and its result comes back as an observation."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from helios.tasks.summary import BatchResult
from helios.testing.mock_llm import MockLLMServer

from .harbor_tasks import only_record, provider, records_of, run_tasks, task, write

__all__ = ["provider"]

SERVER = (Path(__file__).parent / "data" / "mcp_server.sh").read_text()
# local copies the build context into the workdir: /app on both providers
DOCKERFILE = """\
FROM debian:bookworm-slim
WORKDIR /app
COPY mcp_server.sh /app/mcp_server.sh
"""
SECRET = "PAPAYA-42"


def mcp_toml(*args: str) -> str:
    listed = ", ".join(json.dumps(a) for a in ("/app/mcp_server.sh", *args))
    return f"""
version = "1.0"
[agent]
timeout_sec = 120
[verifier]
timeout_sec = 60
[[environment.mcp_servers]]
name = "hello"
transport = "stdio"
command = "sh"
args = [{listed}]
"""


def mcp_task(root: Path, name: str, *args: str, test: str, instruction: str) -> Path:
    folder = task(root, name, mcp_toml(*args), solve=None, test=test,
                  dockerfile=DOCKERFILE, instruction=instruction)  # fmt: skip
    write(folder / "environment" / "mcp_server.sh", SERVER)
    return folder


def steps_of(batch: BatchResult, record: dict[str, Any]) -> list[dict[str, Any]]:
    assert batch.output_dir is not None
    path = batch.output_dir / record["folder"] / "agent" / "trajectory.json"
    trajectory = json.loads(path.read_text())
    steps: list[dict[str, Any]] = trajectory["steps"]
    return steps


def observations(steps: list[dict[str, Any]]) -> list[str]:
    found = []
    for step in steps:
        for result in (step.get("observation") or {}).get("results", []):
            found.append(str(result.get("content")))
    return found


def test_hello_mcp_over_stdio_in_the_sandbox(provider: str, tmp_path: Path) -> None:
    test = f"""
    [ "$(cat /app/secret.txt)" = {SECRET} ] && echo 1 > /logs/verifier/reward.txt \\
      || echo 0 > /logs/verifier/reward.txt
    """
    instruction = "MCPHELLO: call get_secret and write the word to /app/secret.txt\n"
    mcp_task(tmp_path / "tasks", "hello-mcp", test=test, instruction=instruction)
    turns = [
        {"tool_calls": [{"name": "get_secret", "arguments": {}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": f"echo {SECRET} > /app/secret.txt"}}]},  # noqa: E501
        {"tool_calls": [{"name": "submit", "arguments": {}}]},
    ]
    script = {"scenarios": [{"match": "MCPHELLO", "turns": turns}]}
    out = tmp_path / "out"
    with MockLLMServer(script=script) as server:
        batch = run_tasks(
            tmp_path / "tasks", out, provider, agent="tool",
            model="openai-compatible/scripted", base_url=server.openai_base_url, api_key="k",
        )  # fmt: skip
        sent = json.dumps([r.body for r in server.requests])
    record = only_record(batch)
    assert record["reward"] == 1.0, record["error"]
    # the server's tool was offered to the model, and its result came back to it
    assert '"get_secret"' in sent and "[MCP server hello]" in sent
    assert f"The secret word is {SECRET}" in sent
    assert any(f"The secret word is {SECRET}" in o for o in observations(steps_of(batch, record)))


SKILL_MD = """\
---
name: greeting
description: How to greet a visitor the house way
---
# Greeting
Run `sh /app/skills/greeting/greet.sh NAME` and write its output to the file asked for.
"""


def test_hello_skills_reach_the_prompt_and_the_sandbox(provider: str, tmp_path: Path) -> None:
    toml = """
    version = "1.0"
    [agent]
    timeout_sec = 120
    [environment]
    skills_dir = "/app/skills"
    """
    dockerfile = "FROM debian:bookworm-slim\nWORKDIR /app\nCOPY skills /app/skills\n"
    test = """
    [ "$(cat /app/greeting.txt)" = "Ahoy, Ada! (house style)" ] \\
      && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
    """
    folder = task(tmp_path / "tasks", "hello-skills", toml, solve=None, test=test,
                  dockerfile=dockerfile, instruction="Greet Ada.\n")  # fmt: skip
    write(folder / "environment" / "skills" / "greeting" / "SKILL.md", SKILL_MD)
    write(folder / "environment" / "skills" / "greeting" / "greet.sh",
          'printf "Ahoy, %s! (house style)\\n" "$1"\n')  # fmt: skip
    turns = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "cat /app/skills/greeting/SKILL.md"}}]},  # noqa: E501
        {"tool_calls": [{"name": "bash", "arguments": {
            "command": "sh /app/skills/greeting/greet.sh Ada > /app/greeting.txt"}}]},
        {"tool_calls": [{"name": "submit", "arguments": {}}]},
    ]  # fmt: skip
    # matched on the system prompt: the skill's name and description are listed there
    match = "- greeting: How to greet a visitor the house way (/app/skills/greeting/SKILL.md)"
    script = {"scenarios": [{"match": match, "turns": turns}, {"match": "*", "turns": [{"text": "no"}]}]}  # noqa: E501
    with MockLLMServer(script=script) as server:
        batch = run_tasks(
            tmp_path / "tasks", tmp_path / "out", provider, agent="tool",
            model="openai-compatible/scripted", base_url=server.openai_base_url, api_key="k",
        )  # fmt: skip
    record = only_record(batch)
    assert record["reward"] == 1.0, record["error"]


HOSTILE = ("huge-list", "huge-result", "garbage", "silent")


def test_hostile_mcp_servers_are_bounded_tool_errors(need_bwrap: None, tmp_path: Path) -> None:
    for mode in HOSTILE:
        mcp_task(tmp_path / "tasks", mode, mode, test="echo 1 > /logs/verifier/reward.txt\n",
                 instruction=f"HOSTILE {mode}\n")  # fmt: skip
    turns = [
        {"tool_calls": [{"name": "get_secret", "arguments": {}}]},
        {"tool_calls": [{"name": "submit", "arguments": {}}]},
    ]
    script = {"scenarios": [{"match": "HOSTILE", "turns": turns}]}
    out = tmp_path / "out"
    with MockLLMServer(script=script) as server:
        batch = run_tasks(
            tmp_path / "tasks", out, "local", agent="tool", agent_settings={"mcp_timeout": 3},
            model="openai-compatible/scripted", base_url=server.openai_base_url, api_key="k",
        )  # fmt: skip
    records = records_of(batch)
    assert set(records) == set(HOSTILE)
    seen = {}
    for mode, record in records.items():
        assert record["reward"] == 1.0, (mode, record["error"])
        seen[mode] = observations(steps_of(batch, record))[0]
    # 300 tools listed: the first 64 are offered, so get_secret (the last) is not one
    assert "unknown tool 'get_secret'" in seen["huge-list"]
    # 2 MB of result: truncated to the tool output bound
    assert seen["huge-result"].startswith("aaaa") and len(seen["huge-result"]) < 20_000
    for mode in ("garbage", "silent"):
        assert "failed: no answer within 3 s" in seen[mode], seen[mode]


@contextlib.contextmanager
def http_mcp_server() -> Iterator[str]:
    """A streamable-HTTP MCP server on loopback, made with the `mcp` SDK: its URL."""
    import socket
    import threading

    import uvicorn
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("hello-http")

    @server.tool()
    def get_secret() -> str:
        """Returns the secret word"""
        return f"The secret word is {SECRET}"

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = uvicorn.Config(server.streamable_http_app(), host="127.0.0.1", port=port,
                            log_level="warning")  # fmt: skip
    web = uvicorn.Server(config)
    thread = threading.Thread(target=web.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not web.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the MCP server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        web.should_exit = True
        thread.join(timeout=10)


def test_an_http_mcp_server_is_reached_from_the_host(need_bwrap: None, tmp_path: Path) -> None:
    test = f"""
    [ "$(cat /app/secret.txt)" = {SECRET} ] && echo 1 > /logs/verifier/reward.txt \\
      || echo 0 > /logs/verifier/reward.txt
    """
    turns = [
        {"tool_calls": [{"name": "get_secret", "arguments": {}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": f"echo {SECRET} > /app/secret.txt"}}]},  # noqa: E501
        {"tool_calls": [{"name": "submit", "arguments": {}}]},
    ]
    script = {"scenarios": [{"match": "MCPHTTP", "turns": turns}]}
    with http_mcp_server() as url, MockLLMServer(script=script) as server:
        toml = f"""
        version = "1.0"
        [[environment.mcp_servers]]
        name = "remote"
        transport = "streamable-http"
        url = "{url}"
        """
        task(tmp_path / "tasks", "http-mcp", toml, solve=None, test=test,
             instruction="MCPHTTP: call get_secret and write the word to /app/secret.txt\n")
        batch = run_tasks(
            tmp_path / "tasks", tmp_path / "out", "local", agent="tool",
            model="openai-compatible/scripted", base_url=server.openai_base_url, api_key="k",
        )  # fmt: skip
        sent = json.dumps([r.body for r in server.requests])
    record = only_record(batch)
    assert record["reward"] == 1.0, record["error"]
    assert "[MCP server remote]" in sent and f"The secret word is {SECRET}" in sent


# -- ${VAR} from the host: only what --pass-env names, never a provider's key -----------


ENV_TOML = """
version = "1.0"
[environment.env]
TOKEN = "${H24_TOKEN}"
PLAIN = "${H24_OTHER:-fallback}"
"""


def test_host_variables_pass_only_when_named(tmp_path: Path) -> None:
    from helios.tasks.plan import load_tasks

    folder = task(tmp_path, "takes-env", ENV_TOML)
    (refused,) = load_tasks([folder]).unsupported
    assert refused.path == str(folder)
    (reason,) = refused.reasons
    assert reason == (
        "unsupported: environment.env.TOKEN (${H24_TOKEN} from the host: "
        "pass it with --pass-env H24_TOKEN (set on the host))"
    )
    (loaded,) = load_tasks([folder], host_env={"H24_TOKEN": "t0k"}).tasks
    assert loaded.sandbox_spec().env == {"TOKEN": "t0k", "PLAIN": "fallback"}
    # a provider's key: refused in the task even if it were passed
    key = task(tmp_path, "takes-key", '[environment.env]\nK = "${OPENAI_API_KEY}"\n')
    (refused,) = load_tasks([key], host_env={"OPENAI_API_KEY": "sk"}).unsupported
    assert "a model provider's key: Helios never passes one in" in refused.reasons[0]


def test_pass_env_refuses_a_provider_key_in_one_line(tmp_path: Path) -> None:
    from .cli_inprocess import helios_inprocess

    folder = task(tmp_path / "tasks", "takes-env", ENV_TOML)
    done = helios_inprocess("run", str(folder), "--agent", "oracle", "--provider", "local",
                            "--pass-env", "ANTHROPIC_API_KEY", cwd=tmp_path)  # fmt: skip
    assert done.returncode != 0
    line = "--pass-env ANTHROPIC_API_KEY: a model provider's key never reaches a sandbox"
    assert line in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
