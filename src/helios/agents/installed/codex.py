"""`codex`: OpenAI's Codex CLI, installed from npm, run headless.

`codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox
PROMPT < /dev/null` (with stdin left open it waits for EOF). Codex ignores
`OPENAI_BASE_URL`: the endpoint is a custom provider in the `config.toml` of a
private `CODEX_HOME`, written inside the sandbox before it starts (`base_url`,
`env_key`, `wire_api = "responses"`: Codex speaks only the Responses API, streamed).
That config also turns off its plugins, apps, update check, analytics, web search,
sub-agents and goals, so it contacts no host but the model's. The npm package
ships a static native binary (`@openai/codex-linux-x64`, beside `rg` and its
resources): the sandbox needs no Node and no particular libc.

Its `exec --json` log (one JSON event a line: `thread.started`, `turn.started`,
`item.started` / `item.completed` with an `agent_message`, `reasoning`,
`command_execution`, `file_change`, `mcp_tool_call`, `web_search` or `todo_list`,
and `turn.completed` with the tokens) becomes the trajectory; the tokens are priced
from Helios's price table (Codex reports no cost).
"""

from __future__ import annotations

import json
import platform
import shlex
from typing import Any, ClassVar

from helios.agents.base import AgentContext
from helios.agents.installed.base import InstalledAgent, counts, json_record
from helios.errors import ConfigError
from helios.models.base import Message, ToolCall
from helios.models.routing import ModelSpec
from helios.usage import Usage

_ARCH = {"x86_64": ("x64", "x86_64"), "aarch64": ("arm64", "aarch64"),
         "arm64": ("arm64", "aarch64")}  # fmt: skip
_NPM_ARCH, _TRIPLE_ARCH = _ARCH.get(platform.machine(), _ARCH["x86_64"])
#: Codex's private home inside the sandbox (its config, sessions and state); not
#: under /tmp, where Codex refuses to make its helpers' PATH aliases (`apply_patch`)
CODEX_HOME = "/var/tmp/.helios-codex"
#: the provider's name in config.toml
PROVIDER = "helios"
#: what the config turns off: each would contact a host on the internet at start, or
#: offer the model a tool that needs one (the default, measured: a DNS query at start)
QUIET = """check_for_update_on_startup = false
web_search = "disabled"

[analytics]
enabled = false

[agents]
enabled = false

[features]
plugins = false
apps = false
goals = false
"""


class CodexAgent(InstalledAgent):
    name: ClassVar[str] = "codex"
    package: ClassVar[str] = "@openai/codex"
    default_version: ClassVar[str] = "0.171.0"
    payload: ClassVar[str] = (
        f"node_modules/@openai/codex-linux-{_NPM_ARCH}/vendor/{_TRIPLE_ARCH}-unknown-linux-musl"
    )
    key_variable: ClassVar[str] = "OPENAI_API_KEY"

    def command(self, instruction: str, model: ModelSpec, home: str) -> str:
        argv = [f"{home}/bin/codex", "exec", "--json", "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox", "--", instruction]  # fmt: skip
        config = shlex.quote(config_toml(model, key_variable=self.key_variable))
        return (f'mkdir -p "$CODEX_HOME" && printf %s {config} > "$CODEX_HOME/config.toml" && '
                f'PATH="$PATH:{home}/codex-path" exec {shlex.join(argv)} < /dev/null')  # fmt: skip

    def environment(self, model: ModelSpec) -> dict[str, str]:
        if model.api not in ("openai", "responses") or model.provider == "gemini":
            raise ConfigError(f"codex speaks OpenAI's Responses API; {model.qualified} does "
                              "not (use an openai/, openrouter/ or openai-compatible/ model)",
                              field="--model")  # fmt: skip
        env = {"CODEX_HOME": CODEX_HOME}
        if model.api_key:
            env[self.key_variable] = model.api_key
        return env

    def convert(self, log: str, ctx: AgentContext) -> list[Message]:
        usage = Usage()
        messages = exec_json_messages(log, usage)
        if ctx.services is not None:  # Codex reports tokens, not their cost
            model = ctx.services.spec.qualified
            for reply in messages:
                if reply.usage is not None:
                    ctx.services.prices.price_usage(model, reply.usage)
            ctx.services.prices.price_usage(model, usage)
        ctx.usage.add(usage)
        return messages


def config_toml(model: ModelSpec, *, key_variable: str) -> str:
    """Codex's config.toml for `model`: a custom provider at the model's endpoint
    over the Responses API, and everything that would reach another host off."""
    provider = {"name": PROVIDER, "base_url": model.url,
                "wire_api": "responses"}  # fmt: skip
    if model.api_key:
        provider["env_key"] = key_variable
    # a JSON string is a valid TOML basic string
    lines = [f"model = {json.dumps(model.model)}", f"model_provider = {json.dumps(PROVIDER)}",
             QUIET, f"[model_providers.{PROVIDER}]"]  # fmt: skip
    lines += [f"{key} = {json.dumps(value)}" for key, value in provider.items()]
    return "\n".join(lines) + "\n"


def exec_json_messages(log: str, usage: Usage) -> list[Message]:
    """Codex's `exec --json` events as Helios messages; the tokens of each
    `turn.completed` are added to `usage`, and set on the turn's last reply (Codex
    counts tokens per turn, not per model call).

    Codex does not say which model reply an item came from: an item of the model's
    (its text, its reasoning, a tool call) joins the assistant message before it
    unless a tool result came between, and each finished tool call is followed by
    its result."""
    messages: list[Message] = []
    turn_start = 0
    for line in log.splitlines():
        event = json_record(line)
        if event is None:
            continue
        kind = event.get("type")
        item = event.get("item")
        if kind == "item.completed" and isinstance(item, dict):
            _add_item(messages, item)
        elif kind == "turn.started":
            turn_start = len(messages)
        elif kind == "turn.completed":
            turn = _usage(event.get("usage") or {})
            replies = [m for m in messages[turn_start:] if m.role == "assistant"]
            turn.calls = len(replies)
            if replies:
                replies[-1].usage = turn.model_copy()
            usage.add(turn)
    return messages


def _reply(messages: list[Message], *, for_text: bool) -> Message:
    """The assistant message an item of the model's joins: the last one, unless a
    tool result came after it (or, for text, it already called a tool)."""
    last = messages[-1] if messages else None
    if last is None or last.role != "assistant" or (for_text and last.tool_calls):
        last = Message("assistant")
        messages.append(last)
    return last


def _add_item(messages: list[Message], item: dict[str, Any]) -> None:
    kind = item.get("type")
    item_id = str(item.get("id") or "")
    if kind == "agent_message":
        reply = _reply(messages, for_text=True)
        reply.content += ("\n" if reply.content else "") + str(item.get("text") or "")
    elif kind == "reasoning":
        reply = _reply(messages, for_text=True)
        reply.reasoning = (reply.reasoning or "") + str(item.get("text") or "")
    elif kind in _TOOLS:
        name, arguments, result, failed = _TOOLS[kind](item)
        _reply(messages, for_text=False).tool_calls.append(ToolCall(item_id, name, arguments))
        messages.append(Message("tool", result, tool_call_id=item_id, is_error=failed))


def _command(item: dict[str, Any]) -> tuple[str, dict[str, Any], str, bool]:
    exit_code = item.get("exit_code")
    output = str(item.get("aggregated_output") or "")
    failed = item.get("status") == "failed" or (isinstance(exit_code, int) and exit_code != 0)
    if exit_code is not None:
        separator = "\n" if output and not output.endswith("\n") else ""
        output += f"{separator}[exit code {exit_code}]"
    return "command_execution", {"command": item.get("command")}, output, failed


def _file_change(item: dict[str, Any]) -> tuple[str, dict[str, Any], str, bool]:
    changes = item.get("changes") or []
    done = "; ".join(f"{c.get('kind')} {c.get('path')}" for c in changes if isinstance(c, dict))
    return "file_change", {"changes": changes}, done, item.get("status") == "failed"


def _mcp_call(item: dict[str, Any]) -> tuple[str, dict[str, Any], str, bool]:
    arguments = item.get("arguments")
    error = item.get("error")
    result = json.dumps(error if error else item.get("result"))
    name = f"{item.get('server')}.{item.get('tool')}"
    return name, arguments if isinstance(arguments, dict) else {}, result, bool(error)


def _web_search(item: dict[str, Any]) -> tuple[str, dict[str, Any], str, bool]:
    return "web_search", {"query": item.get("query")}, "", False


def _todo_list(item: dict[str, Any]) -> tuple[str, dict[str, Any], str, bool]:
    return "todo_list", {"items": item.get("items") or []}, "", False


_TOOLS = {"command_execution": _command, "file_change": _file_change,
          "mcp_tool_call": _mcp_call, "web_search": _web_search,
          "todo_list": _todo_list}  # fmt: skip


def _usage(raw: dict[str, Any]) -> Usage:
    count = counts(raw)
    cached = count("cached_input_tokens")
    return Usage(input_tokens=max(0, count("input_tokens") - cached), cache_read_tokens=cached,
                 cache_write_tokens=count("cache_write_input_tokens"),
                 output_tokens=count("output_tokens"),
                 reasoning_tokens=count("reasoning_output_tokens"))  # fmt: skip
