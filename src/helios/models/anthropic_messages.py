"""Anthropic Messages API, with images and the computer-use tool.

Images (`Message.images`) go as base64 image blocks after the text of a user message
or inside a tool_result; only the last `keep_images` are sent (`models/images.py`).
A request that declares a native `computer_*` tool carries the beta header of that
tool's version; the computer tool's calls come back as ordinary tool_use blocks,
ToolCall(name="computer", arguments=<the tool's input>).
"""

from __future__ import annotations

import json
from typing import Any

from helios.models.base import GenerationConfig, ImageRef, Message, ModelResponse, ToolCall
from helios.models.errors import TransientError
from helios.models.http import EndpointClient
from helios.models.images import OMITTED, ImageWindow, b64, image_window, split_kept, wire_key
from helios.models.reply_values import parts_response, token_count
from helios.models.routing import PUBLIC_URLS, ModelSpec
from helios.usage import Usage

WIRE = "anthropic"
DEFAULT_BASE_URL = PUBLIC_URLS["anthropic"]
API_VERSION = "2023-06-01"
#: thinking budgets per reasoning effort (tokens)
THINKING_BUDGET = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 32000}
STOP_REASONS = {"tool_use": "tool_calls", "end_turn": "stop", "max_tokens": "length"}
#: the beta each version of the computer tool needs (its other tools, bash and the
#: text editor, come with it)
COMPUTER_BETAS = {
    "computer_20241022": "computer-use-2024-10-22",
    "computer_20250124": "computer-use-2025-01-24",
    "computer_20251124": "computer-use-2025-11-24",
}


def _image_block(image: ImageRef) -> dict[str, Any]:
    source = {"type": "base64", "media_type": image.media_type, "data": b64(image)}
    return {"type": "image", "source": source}


def _media(message: Message, kept: int) -> list[dict[str, Any]]:
    """The message's images as blocks: a placeholder for each one not sent."""
    omitted, sent = split_kept(message, kept)
    return [{"type": "text", "text": OMITTED}] * omitted + [_image_block(i) for i in sent]


def _blocks(message: Message, kept: int) -> list[dict[str, Any]]:
    """The content blocks of one message, converted once (per number of its images
    sent) and cached."""
    key = wire_key(WIRE, kept, message)
    cached = message.wire.get(key)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    blocks: list[dict[str, Any]] = []
    if message.role == "tool":
        text = message.content or ("" if message.images else "(no output)")
        content: str | list[dict[str, Any]] = text
        if message.images:
            texts = [{"type": "text", "text": text}] if text else []
            content = texts + _media(message, kept)
        blocks.append(
            {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": content,
                "is_error": message.is_error,
            }
        )
    else:
        if message.role == "assistant" and isinstance(message.provider_state, list):
            blocks.extend(message.provider_state)  # thinking blocks, signed: send back as-is
        if message.content:
            blocks.append({"type": "text", "text": message.content})
        if message.images:
            blocks.extend(_media(message, kept))
        for call in message.tool_calls:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call.id,
                    "name": call.name,
                    "input": call.arguments or {},
                }
            )
    message.wire[key] = blocks
    return blocks


def assemble(
    messages: list[Message], window: ImageWindow | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """System text plus alternating turns; tool results and following user text merge.
    `window` says which images are sent (default: all)."""
    window = window or image_window(messages, None)
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    turns: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message, window.kept(index, message))
        if turns and turns[-1]["role"] == role:
            turns[-1] = {"role": role, "content": [*turns[-1]["content"], *blocks]}
        else:
            turns.append({"role": role, "content": blocks})
    return system, turns


def _usage(raw: Any) -> Usage:
    raw = raw if isinstance(raw, dict) else {}
    return Usage(
        input_tokens=token_count(raw.get("input_tokens")),
        output_tokens=token_count(raw.get("output_tokens")),
        cache_read_tokens=token_count(raw.get("cache_read_input_tokens")),
        cache_write_tokens=token_count(raw.get("cache_creation_input_tokens")),
        calls=1,
    )


def computer_beta(tools: list[dict[str, Any]]) -> str | None:
    """The `anthropic-beta` header a request with these tools needs, if any."""
    for tool in tools:
        beta = COMPUTER_BETAS.get(str(tool.get("type") or ""))
        if beta is not None:
            return beta
    return None


class AnthropicModel(EndpointClient):
    path = "/v1/messages"

    def __init__(self, spec: ModelSpec) -> None:
        headers = {"x-api-key": spec.api_key or "", "anthropic-version": API_VERSION}
        super().__init__(spec, DEFAULT_BASE_URL, headers)

    def _request(
        self, messages: list[Message], tools: list[dict[str, Any]], config: GenerationConfig
    ) -> dict[str, Any]:
        system, turns = assemble(messages, image_window(messages, config.keep_images))
        request: dict[str, Any] = {
            "model": self._spec.model,
            "messages": turns,
            "max_tokens": config.max_tokens,
        }
        if system:
            request["system"] = system
        if tools:
            request["tools"] = tools
        budget = THINKING_BUDGET.get(config.reasoning_effort or "")
        if budget:
            # The budget must stay below max_tokens; thinking forbids a temperature.
            request["max_tokens"] = max(config.max_tokens, budget + 1024)
            request["thinking"] = {"type": "enabled", "budget_tokens": budget}
        elif config.temperature is not None:
            request["temperature"] = config.temperature
        return request

    def _headers(self, tools: list[dict[str, Any]]) -> dict[str, str] | None:
        beta = computer_beta(tools)
        return {"anthropic-beta": beta} if beta else None

    def _parse(self, response: dict[str, Any]) -> ModelResponse:
        content = response.get("content")
        if not isinstance(content, list):
            raise TransientError("malformed response: no content")
        texts: list[str] = []
        thinking: list[str] = []
        state: list[dict[str, Any]] = []
        calls: list[ToolCall] = []
        for block in content:
            kind = block.get("type", "")
            if kind == "text":
                texts.append(str(block.get("text") or ""))
            elif kind == "thinking":
                thinking.append(str(block.get("thinking") or ""))
                state.append({"type": "thinking", "thinking": block.get("thinking", ""),
                              "signature": block.get("signature", "")})  # fmt: skip
            elif kind == "redacted_thinking":
                state.append({"type": "redacted_thinking", "data": block.get("data", "")})
            elif kind == "tool_use":
                raw_input = block.get("input")
                arguments = raw_input if isinstance(raw_input, dict) else None
                calls.append(ToolCall(str(block.get("id") or ""), str(block.get("name") or ""),
                                      arguments, json.dumps(raw_input)))  # fmt: skip
        reason = str(response.get("stop_reason") or "end_turn")
        return parts_response(
            texts, thinking, calls, state or None,
            usage=_usage(response.get("usage")),
            finish_reason=STOP_REASONS.get(reason, reason),
            model=str(response.get("model") or self.name),
        )  # fmt: skip
