"""Anthropic Messages API."""

from __future__ import annotations

import json
from typing import Any

from helios.models.base import GenerationConfig, Message, ModelResponse, ToolCall
from helios.models.errors import TransientError
from helios.models.http import JsonEndpoint
from helios.models.reply_values import token_count
from helios.models.routing import ModelSpec
from helios.usage import Usage

WIRE = "anthropic"
DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
#: thinking budgets per reasoning effort (tokens)
THINKING_BUDGET = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 32000}
STOP_REASONS = {"tool_use": "tool_calls", "end_turn": "stop", "max_tokens": "length"}


def _blocks(message: Message) -> list[dict[str, Any]]:
    """The content blocks of one message, converted once and cached."""
    cached = message.wire.get(WIRE)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    blocks: list[dict[str, Any]] = []
    if message.role == "tool":
        blocks.append(
            {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": message.content or "(no output)",
                "is_error": message.is_error,
            }
        )
    else:
        if message.role == "assistant" and isinstance(message.provider_state, list):
            blocks.extend(message.provider_state)  # thinking blocks, signed: send back as-is
        if message.content:
            blocks.append({"type": "text", "text": message.content})
        for call in message.tool_calls:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call.id,
                    "name": call.name,
                    "input": call.arguments or {},
                }
            )
    message.wire[WIRE] = blocks
    return blocks


def assemble(messages: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """System text plus alternating turns; tool results and following user text merge."""
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
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


class AnthropicModel:
    def __init__(self, spec: ModelSpec) -> None:
        self.name = spec.model
        self.provider = spec.provider
        self._spec = spec
        # Retries belong to Helios (models/retry.py); the endpoint makes one attempt.
        self._endpoint = JsonEndpoint(
            spec.base_url or DEFAULT_BASE_URL,
            {"x-api-key": spec.api_key or "", "anthropic-version": API_VERSION},
        )

    def _request(
        self, messages: list[Message], tools: list[dict[str, Any]], config: GenerationConfig
    ) -> dict[str, Any]:
        system, turns = assemble(messages)
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

    async def generate(
        self, messages: list[Message], tools: list[dict[str, Any]], config: GenerationConfig
    ) -> ModelResponse:
        body = self._request(messages, tools, config)
        return await self._endpoint.call("/v1/messages", body, config.timeout, self._parse)

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
        message = Message(
            role="assistant",
            content="".join(texts),
            tool_calls=calls,
            reasoning="\n".join(thinking) or None,
            provider_state=state or None,
        )
        reason = str(response.get("stop_reason") or "end_turn")
        return ModelResponse(
            message=message,
            usage=_usage(response.get("usage")),
            finish_reason=STOP_REASONS.get(reason, reason),
            model=str(response.get("model") or self.name),
        )

    async def close(self) -> None:
        await self._endpoint.close()
