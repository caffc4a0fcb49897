"""A task's MCP servers and skills reach Claude Code through its own config: the real
client (installed from npm into the agent cache) calls a tool of the stdio MCP server
running inside the sandbox, and of an HTTP one on loopback (`--mcp-config`), and finds
the task's skill in its config folder's `skills/`, scripted by the Anthropic server on
loopback; the verifier gives 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helios.agents.installed.claude_code import ClaudeCodeAgent
from helios.testing.mock_llm import MockLLMServer

from .agent_installs import install
from .harbor_tasks import only_record, run_tasks, task, write
from .test_tool_agent_mcp import SECRET, SERVER, SKILL_MD, http_mcp_server

pytestmark = pytest.mark.usefixtures("need_bwrap")

MODEL = "anthropic/claude-scripted"
#: the network on (the server is on loopback) and memory for Claude Code's runtime
ENVIRONMENT = """
[agent]
timeout_sec = 120
[environment]
allow_internet = true
memory_mb = 1536
"""


@pytest.fixture(scope="module")
def claude_install() -> Path:
    return install(ClaudeCodeAgent)[0]


def _bash(command: str) -> dict[str, object]:
    return {"name": "Bash", "arguments": {"command": command, "description": "run"}}


def _run(
    tasks: Path, out: Path, script: dict[str, object]
) -> tuple[dict[str, object], str, str]:
    """The trial's record, every request the server got, and the first one."""
    with MockLLMServer(script=script) as server:
        batch = run_tasks(tasks, out, "local", agent="claude-code", model=MODEL,
                          base_url=server.anthropic_base_url, api_key="sk-ant-test")  # fmt: skip
        sent = json.dumps([r.body for r in server.requests])
        first = json.dumps(server.requests[0].body)
    return only_record(batch), sent, first


def test_claude_code_calls_a_tool_of_the_tasks_stdio_mcp_server(
    claude_install: Path, tmp_path: Path
) -> None:
    toml = ENVIRONMENT + """
    [[environment.mcp_servers]]
    name = "hello"
    transport = "stdio"
    command = "sh"
    args = ["/app/mcp_server.sh"]
    """
    test = f"""
    [ "$(cat /app/secret.txt)" = {SECRET} ] && echo 1 > /logs/verifier/reward.txt \\
      || echo 0 > /logs/verifier/reward.txt
    """
    instruction = "Call get_secret and write the word to /app/secret.txt\n"
    folder = task(tmp_path / "tasks", "hello-mcp", toml, solve=None, test=test,
                  instruction=instruction)  # fmt: skip
    write(folder / "environment" / "mcp_server.sh", SERVER)
    turns = [
        {"tool_calls": [{"name": "mcp__hello__get_secret", "arguments": {}}]},
        {"tool_calls": [_bash(f"echo {SECRET} > /app/secret.txt")]},
        {"text": "Done."},
    ]
    script = {"scenarios": [{"match": "*", "turns": turns}]}
    record, sent, first = _run(tmp_path / "tasks", tmp_path / "out", script)
    assert record["reward"] == 1.0, record["error"]
    # the server's tool was named to the model (Claude Code defers MCP tools: it lists
    # their names and loads their schemas when asked), and its result came back to it
    assert "mcp__hello__get_secret" in first
    assert f"The secret word is {SECRET}" in sent


def test_claude_code_calls_a_tool_of_the_tasks_http_mcp_server(
    claude_install: Path, tmp_path: Path
) -> None:
    """A streamable-HTTP server (the official `mcp` SDK's, on the host's loopback) goes
    into `--mcp-config` with its URL; the task has no network, so the agent's run gets a
    route to it, as to its model, through the trial's egress proxy."""
    test = f"""
    [ "$(cat /app/secret.txt)" = {SECRET} ] && echo 1 > /logs/verifier/reward.txt \\
      || echo 0 > /logs/verifier/reward.txt
    """
    turns = [
        {"tool_calls": [{"name": "mcp__remote__get_secret", "arguments": {}}]},
        {"tool_calls": [_bash(f"echo {SECRET} > /app/secret.txt")]},
        {"text": "Done."},
    ]
    script = {"scenarios": [{"match": "*", "turns": turns}]}
    with http_mcp_server() as url:
        toml = ENVIRONMENT.replace("allow_internet = true", "allow_internet = false") + f"""
        [[environment.mcp_servers]]
        name = "remote"
        transport = "streamable-http"
        url = "{url}"
        """
        task(tmp_path / "tasks", "http-mcp", toml, solve=None, test=test,
             instruction="Call get_secret and write the word to /app/secret.txt\n")  # fmt: skip
        record, sent, first = _run(tmp_path / "tasks", tmp_path / "out", script)
    assert record["reward"] == 1.0, record["error"]
    assert "mcp__remote__get_secret" in first
    assert f"The secret word is {SECRET}" in sent


def test_claude_code_finds_the_tasks_skills(claude_install: Path, tmp_path: Path) -> None:
    toml = ENVIRONMENT.replace("[environment]\n", '[environment]\nskills_dir = "/app/skills"\n')
    test = """
    [ "$(cat /app/greeting.txt)" = "Ahoy, Ada! (house style)" ] \\
      && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
    """
    dockerfile = "FROM debian:bookworm-slim\nWORKDIR /app\nCOPY skills /app/skills\n"
    folder = task(tmp_path / "tasks", "hello-skills", toml, solve=None, test=test,
                  dockerfile=dockerfile, instruction="Greet Ada.\n")  # fmt: skip
    write(folder / "environment" / "skills" / "greeting" / "SKILL.md", SKILL_MD)
    write(folder / "environment" / "skills" / "greeting" / "greet.sh",
          'printf "Ahoy, %s! (house style)\\n" "$1"\n')  # fmt: skip
    turns = [{"tool_calls": [_bash("sh /app/skills/greeting/greet.sh Ada > /app/greeting.txt")]},
             {"text": "Done."}]  # fmt: skip
    # matched on what Claude Code tells the model of its skills: the skill's description
    script = {"scenarios": [{"match": "How to greet a visitor the house way", "turns": turns},
                            {"match": "*", "turns": [{"text": "no skill"}]}]}  # fmt: skip
    record, _, _ = _run(tmp_path / "tasks", tmp_path / "out", script)
    assert record["reward"] == 1.0, record["error"]
