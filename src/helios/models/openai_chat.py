"""OpenAI Chat Completions (OpenAI, OpenRouter, Gemini's compatible endpoint, vLLM & co)."""

from __future__ import annotations

import json
from typing import Any

import openai
from openai.types.chat import ChatCompletion

from helios.models.base import GenerationConfig, Message, ModelResponse, ToolCall
from helios.models.errors import TransientError
from helios.models.routing import ModelSpec
from helios.models.sdk_errors import post_body
from helios.usage import Usage

WIRE = "openai"


def to_wire(message: Message) -> dict[str, Any]:
    cached = message.wire.get(WIRE)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    wire: dict[str, Any]
    if message.role == "tool":
        wire = {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    elif message.role == "assistant":
        wire = {"role": "assistant", "content": message.content or None}
        if message.tool_calls:
            wire["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": call.raw_arguments or json.dumps(call.arguments or {}),
                    },
                }
                for call in message.tool_calls
            ]
    else:
        wire = {"role": message.role, "content": message.content}
    message.wire[WIRE] = wire
    return wire


def _parse_arguments(raw: str) -> dict[str, Any] | None:
    try:
        parsed = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _usage(raw: Any) -> Usage:
    if raw is None:
        return Usage(calls=1)
    prompt = int(getattr(raw, "prompt_tokens", 0) or 0)
    prompt_details = getattr(raw, "prompt_tokens_details", None)
    cached = int(getattr(prompt_details, "cached_tokens", 0) or 0)
    completion_details = getattr(raw, "completion_tokens_details", None)
    return Usage(
        input_tokens=max(0, prompt - cached),
        cache_read_tokens=cached,
        output_tokens=int(getattr(raw, "completion_tokens", 0) or 0),
        reasoning_tokens=int(getattr(completion_details, "reasoning_tokens", 0) or 0),
        calls=1,
    )


class OpenAIChatModel:
    def __init__(self, spec: ModelSpec) -> None:
        self.name = spec.model
        self.provider = spec.provider
        self._spec = spec
        self._client = openai.AsyncOpenAI(
            api_key=spec.api_key or "not-needed",
            base_url=spec.base_url,
            max_retries=0,  # retries belong to Helios
            http_client=openai.DefaultAioHttpClient(),
        )

    def _request(
        self, messages: list[Message], tools: list[dict[str, Any]], config: GenerationConfig
    ) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self._spec.model,
            "messages": [to_wire(m) for m in messages],
        }
        if tools:
            request["tools"] = tools
        # OpenAI's reasoning models only take max_completion_tokens; others know max_tokens.
        token_key = "max_completion_tokens" if self.provider == "openai" else "max_tokens"
        if not config.omit_max_tokens:
            request[token_key] = config.max_tokens
        if config.temperature is not None:
            request["temperature"] = config.temperature
        extra: dict[str, Any] = {}
        if self.provider == "openrouter":
            if config.reasoning_effort == "none":
                extra["reasoning"] = {"enabled": False}
            elif config.reasoning_effort is not None:
                extra["reasoning"] = {"effort": config.reasoning_effort}
            if config.openrouter_provider:
                extra["provider"] = config.openrouter_provider
        elif config.reasoning_effort is not None:
            request["reasoning_effort"] = config.reasoning_effort
        request.update(extra)
        return request

    async def generate(
        self, messages: list[Message], tools: list[dict[str, Any]], config: GenerationConfig
    ) -> ModelResponse:
        body = self._request(messages, tools, config)
        response = await post_body(
            self._client, openai, "/chat/completions", ChatCompletion, body, config.timeout
        )
        return self._parse(response)

    def _parse(self, response: Any) -> ModelResponse:
        if not getattr(response, "choices", None):
            raise TransientError("malformed response: no choices")
        choice = response.choices[0]
        raw = choice.message
        extra = getattr(raw, "model_extra", None) or {}
        reasoning = extra.get("reasoning_content") or extra.get("reasoning")
        calls = [
            ToolCall(
                id=call.id,
                name=call.function.name,
                arguments=_parse_arguments(call.function.arguments or ""),
                raw_arguments=call.function.arguments or "",
            )
            for call in (raw.tool_calls or [])
            if getattr(call, "function", None) is not None
        ]
        message = Message(
            role="assistant",
            content=raw.content or "",
            tool_calls=calls,
            reasoning=str(reasoning) if reasoning else None,
        )
        return ModelResponse(
            message=message,
            usage=_usage(getattr(response, "usage", None)),
            finish_reason=str(choice.finish_reason or "stop"),
            model=str(getattr(response, "model", "") or self.name),
        )

    async def close(self) -> None:
        await self._client.close()
