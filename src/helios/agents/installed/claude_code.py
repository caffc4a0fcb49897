"""`claude-code`: Anthropic's Claude Code, installed from npm, run headless.

`claude -p INSTRUCTION --output-format stream-json --verbose
--dangerously-skip-permissions --model MODEL`, with `ANTHROPIC_BASE_URL` and
`ANTHROPIC_API_KEY`; `IS_SANDBOX=1` lets it skip permissions as root. The npm
package ships a native binary (`@anthropic-ai/claude-code-linux-x64`): the
sandbox needs no Node, only glibc. Its stream-json log (one JSON record a line:
`system`, `assistant`, `user` with tool results, a final `result` with the
turns, tokens and cost) becomes the trajectory. The task's MCP servers reach it
through `--mcp-config` (its tools are `mcp__SERVER__TOOL`): a stdio one it starts
in the sandbox, an HTTP one (SSE or streamable HTTP) it calls at its URL from the
sandbox; its skills (`skills_dir`) reach it as the config folder's `skills/`.
"""

from __future__ import annotations

import json
import platform
import posixpath
import shlex
from typing import TYPE_CHECKING, Any, ClassVar

from helios.agents.base import AgentContext, AgentOutcome
from helios.agents.installed.base import InstalledAgent, content_text, counts, json_record
from helios.environments.base import Environment
from helios.errors import ConfigError, EnvironmentError_
from helios.models.base import Message, ToolCall
from helios.models.routing import ModelSpec
from helios.usage import Usage

if TYPE_CHECKING:
    from helios.agents.mcp_tools import MCPServer

_ARCH = {"x86_64": "x64", "aarch64": "arm64", "arm64": "arm64"}


#: Claude Code's config folder in the sandbox (its skills are under `skills/`)
CONFIG_DIR = "/tmp/.helios-claude"


class ClaudeCodeAgent(InstalledAgent):
    name: ClassVar[str] = "claude-code"
    #: the task's MCP servers (stdio, and HTTP: SSE or streamable) go in an
    #: `--mcp-config` file, its skills into the config folder's `skills/`, both
    #: written in the sandbox before it starts
    takes: ClassVar[frozenset[str]] = frozenset({"mcp", "mcp-http", "skills"})
    package: ClassVar[str] = "@anthropic-ai/claude-code"
    default_version: ClassVar[str] = "2.1.332"
    payload: ClassVar[str] = (
        f"node_modules/@anthropic-ai/claude-code-linux-{_ARCH.get(platform.machine(), 'x64')}"
    )
    key_variable: ClassVar[str] = "ANTHROPIC_API_KEY"

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        self._more: list[str] = []
        self._urls: list[str] = []

    async def run(self, instruction: str, env: Environment, ctx: AgentContext) -> AgentOutcome:
        self._more = await _configure(env, ctx)
        self._urls = [s.url for s in ctx.mcp_servers if s.url]
        return await super().run(instruction, env, ctx)

    def more_routes(self) -> list[str]:
        """The task's HTTP MCP servers, which it calls from the sandbox."""
        return list(self._urls)

    def command(self, instruction: str, model: ModelSpec, home: str) -> str:
        argv = [f"{home}/claude", "-p", instruction, "--output-format", "stream-json", "--verbose",
                "--dangerously-skip-permissions", "--model", model.model, *self._more]  # fmt: skip
        return shlex.join(argv) + " < /dev/null"

    def environment(self, model: ModelSpec) -> dict[str, str]:
        if model.api != "anthropic":
            raise ConfigError(f"claude-code speaks Anthropic's Messages API; {model.qualified} "
                              "does not (use an anthropic/ model)", field="--model")  # fmt: skip
        env = {
            "IS_SANDBOX": "1",
            "CLAUDE_CONFIG_DIR": CONFIG_DIR,
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        if model.base_url:
            env["ANTHROPIC_BASE_URL"] = model.base_url
        if model.api_key:
            env[self.key_variable] = model.api_key
        return env

    def convert(self, log: str, ctx: AgentContext) -> list[Message]:
        return stream_json_messages(log, ctx.usage)


async def _configure(env: Environment, ctx: AgentContext) -> list[str]:
    """Write the task's MCP servers and skills where Claude Code reads them; the
    arguments that point it there. The folder is left open to the agent's user."""
    script = [f"mkdir -p {CONFIG_DIR}"]
    more: list[str] = []
    servers = {s.name: _mcp_entry(s) for s in ctx.mcp_servers}
    if servers:
        config = json.dumps({"mcpServers": servers})
        script.append(f"printf '%s' {shlex.quote(config)} > {CONFIG_DIR}/mcp.json")
        more = ["--mcp-config", f"{CONFIG_DIR}/mcp.json"]
    if ctx.skills_dir is not None:
        source = posixpath.join(ctx.workdir, ctx.skills_dir)
        script.append(f"mkdir -p {CONFIG_DIR}/skills && "
                      f"cp -R {shlex.quote(source)}/. {CONFIG_DIR}/skills/")  # fmt: skip
    if len(script) == 1:
        return []
    script.append(f"chmod -R a+rwX {CONFIG_DIR}")
    done = await env.exec(" && ".join(script), cwd="/", timeout=60)
    if not done.ok:
        raise EnvironmentError_(f"cannot write Claude Code's MCP servers and skills: "
                                f"{done.stderr.strip()[-300:]}")  # fmt: skip
    return more


def _mcp_entry(server: MCPServer) -> dict[str, Any]:
    """One server in Claude Code's `--mcp-config`: a command it starts (stdio), or a
    URL it calls, over SSE (`transport = "sse"`) or streamable HTTP (any other)."""
    if server.stdio:
        return {"command": server.command, "args": list(server.args)}
    return {"type": "sse" if server.transport == "sse" else "http", "url": server.url}


def stream_json_messages(log: str, usage: Usage) -> list[Message]:
    """Claude Code's stream-json as Helios messages; the final `result` record's
    tokens and cost are added to `usage`. Records of one model reply (Claude Code
    writes one per content block, with the same message id) become one message."""
    messages: list[Message] = []
    last_id: str | None = None
    calls = 0
    for line in log.splitlines():
        record = json_record(line)
        if record is None:
            continue
        kind = record.get("type")
        body = record.get("message") or {}
        if kind == "assistant" and isinstance(body, dict):
            if body.get("id") != last_id or not messages or messages[-1].role != "assistant":
                messages.append(Message("assistant", model=body.get("model")))
                last_id, calls = body.get("id"), calls + 1
            _add_blocks(messages[-1], body.get("content") or [])
            messages[-1].usage = _usage(body.get("usage") or {})
        elif kind == "user" and isinstance(body, dict):
            last_id = None
            for block in body.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    messages.append(Message("tool", content_text(block.get("content")),
                                            tool_call_id=block.get("tool_use_id"),
                                            is_error=bool(block.get("is_error"))))  # fmt: skip
        elif kind == "result":
            total = _usage(record.get("usage") or {})
            cost = record.get("total_cost_usd")
            total.cost_usd = float(cost) if isinstance(cost, int | float) else None
            if total.cost_usd is None:
                total.mark_cost_unknown("claude-code reported no cost")
            total.calls = calls
            usage.add(total)
    return messages


def _add_blocks(message: Message, blocks: list[Any]) -> None:
    for block in blocks:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            message.content += str(block.get("text") or "")
        elif block.get("type") == "thinking":
            message.reasoning = (message.reasoning or "") + str(block.get("thinking") or "")
        elif block.get("type") == "tool_use":
            arguments = block.get("input")
            message.tool_calls.append(ToolCall(
                id=str(block.get("id") or ""), name=str(block.get("name") or ""),
                arguments=arguments if isinstance(arguments, dict) else None,
            ))  # fmt: skip


def _usage(raw: dict[str, Any]) -> Usage:
    count = counts(raw)
    return Usage(input_tokens=count("input_tokens"), output_tokens=count("output_tokens"),
                 cache_read_tokens=count("cache_read_input_tokens"),
                 cache_write_tokens=count("cache_creation_input_tokens"))  # fmt: skip
