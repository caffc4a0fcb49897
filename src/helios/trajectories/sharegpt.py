"""Render a Helios conversation as Hermes ShareGPT `conversations` (the datagen door).

The format is the one Hermes's batch runner writes and models are trained on:

- turn 0 is a system turn with the Hermes function-calling preamble, listing the
  offered tools inside `<tools>`;
- then the human turn (the prompt);
- each gpt turn is `<think>\\n…\\n</think>\\n` (empty when there was no reasoning),
  then the content, then one `<tool_call>\\n{"name", "arguments"}\\n</tool_call>` per call;
- consecutive tool results merge into one tool turn of `<tool_response>` blocks,
  whose `content` is embedded as JSON when it parses as JSON.

The set-up messages (the ephemeral system prompt and the prefill) are never written.
Images (`Message.images`, a computer agent's screenshots) are left out: a Hermes row
is text, and its consumers have no place for them; the text around them stays.
Reasoning comes from `Message.reasoning` (native thinking: OpenRouter's `reasoning`,
vLLM/DeepSeek's `reasoning_content`, Anthropic thinking) or from `<think>` /
`<REASONING_SCRATCHPAD>` blocks inside the content, which are lifted out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from helios.models.base import Message, ToolCall
from helios.models.tools import ToolSpec
from helios.safe_json import JsonValueError, dumps, parse_json

# The preamble is a format, not prose: its wording is what models are trained on.
_PREAMBLE_HEAD = (
    "You are a function calling AI model. You are provided with function signatures within "
    "<tools> </tools> XML tags. You may call one or more functions to assist with the user "
    "query. If available tools are not relevant in assisting with user query, just respond in "
    "natural conversational language. Don't make assumptions about what values to plug into "
    "functions. After calling & executing the functions, you will be provided with function "
    "results within <tool_response> </tool_response> XML tags. Here are the available tools:\n"
)
_PREAMBLE_TAIL = (
    "For each function call return a JSON object, with the following pydantic model json "
    "schema for each:\n"
    "{'title': 'FunctionCall', 'type': 'object', 'properties': {'name': {'title': 'Name', "
    "'type': 'string'}, 'arguments': {'title': 'Arguments', 'type': 'object'}}, 'required': "
    "['name', 'arguments']}\n"
    "Each function call should be enclosed within <tool_call> </tool_call> XML tags.\n"
    "Example:\n<tool_call>\n{'name': <function-name>,'arguments': <args-dict>}\n</tool_call>"
)

_INLINE_REASONING = re.compile(r"<(think|REASONING_SCRATCHPAD)>(.*?)(?:</\1>|$)", re.DOTALL)


def system_preamble(tools: Sequence[ToolSpec]) -> str:
    """Turn 0: the Hermes function-calling preamble with `tools` inside <tools>."""
    listing = json.dumps([tool.to_hermes() for tool in tools])
    return f"{_PREAMBLE_HEAD}<tools>\n{listing}\n</tools>\n{_PREAMBLE_TAIL}"


@dataclass(frozen=True, slots=True)
class SplitReply:
    reasoning: str
    content: str


def split_reasoning(message: Message) -> SplitReply:
    """The turn's reasoning (native, else lifted from inline tags) and its remaining content."""
    content = message.content or ""
    lifted: list[str] = []
    if "<think>" in content or "<REASONING_SCRATCHPAD>" in content:
        lifted = [m.group(2).strip() for m in _INLINE_REASONING.finditer(content)]
        content = _INLINE_REASONING.sub("", content)
    native = (message.reasoning or "").strip()
    reasoning = "\n".join(part for part in [native, *lifted] if part)
    return SplitReply(reasoning, content.strip())


def has_reasoning(message: Message) -> bool:
    if message.reasoning and message.reasoning.strip():
        return True
    content = message.content or ""
    return ("<think>" in content or "<REASONING_SCRATCHPAD>" in content) and bool(
        split_reasoning(message).reasoning
    )


def _think(reasoning: str) -> str:
    return f"<think>\n{reasoning}\n</think>\n" if reasoning else "<think>\n</think>\n"


def _call_block(call: ToolCall) -> str:
    arguments = call.arguments if isinstance(call.arguments, dict) else {}
    body = dumps({"name": call.name, "arguments": arguments}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>\n"


def gpt_value(message: Message) -> str:
    reply = split_reasoning(message)
    text = _think(reply.reasoning)
    if not message.tool_calls:
        return (text + reply.content).strip()
    if reply.content:
        text += reply.content + "\n"
    text += "".join(_call_block(call) for call in message.tool_calls)
    return text.rstrip()


def _tool_content(content: str) -> Any:
    stripped = content.strip()
    if stripped.startswith(("{", "[")):
        try:  # what a tool printed: hostile text, strictly parsed
            return parse_json(stripped)
        except JsonValueError:
            return content
    return content


def _tool_response(message: Message, names: dict[str, str]) -> str:
    call_id = message.tool_call_id or ""
    body = dumps(
        {
            "tool_call_id": call_id,
            "name": names.get(call_id, "unknown"),
            "content": _tool_content(message.content),
        },
        ensure_ascii=False,
    )
    return f"<tool_response>\n{body}\n</tool_response>"


def to_sharegpt(
    conversation: Sequence[Message],
    *,
    prompt: str,
    tools: Sequence[ToolSpec],
    setup_messages: int,
) -> list[dict[str, str]]:
    """The Hermes `conversations` list for one prompt's conversation.

    `setup_messages` counts the leading messages that are never written (system
    prompt and prefill); the message after them is the prompt itself.
    """
    turns: list[dict[str, str]] = [
        {"from": "system", "value": system_preamble(tools)},
        {"from": "human", "value": prompt},
    ]
    names: dict[str, str] = {}
    pending_tools: list[str] = []

    def flush_tools() -> None:
        if pending_tools:
            turns.append({"from": "tool", "value": "\n".join(pending_tools)})
            pending_tools.clear()

    for message in conversation[setup_messages + 1 :]:
        if message.role == "tool":
            pending_tools.append(_tool_response(message, names))
            continue
        flush_tools()
        if message.role == "assistant":
            names.update({call.id: call.name for call in message.tool_calls})
            turns.append({"from": "gpt", "value": gpt_value(message)})
        elif message.role == "user":
            turns.append({"from": "human", "value": message.content})
    flush_tools()
    return turns
