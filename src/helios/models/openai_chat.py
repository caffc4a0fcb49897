"""OpenAI Chat Completions (OpenAI, OpenRouter, Gemini's compatible endpoint, vLLM & co)."""

from __future__ import annotations

import json
from typing import Any

from helios.models.base import GenerationConfig, Message, ModelResponse, ToolCall
from helios.models.errors import TransientError
from helios.models.http import JsonEndpoint
from helios.models.reply_values import parse_arguments, token_count
from helios.models.routing import ModelSpec
from helios.usage import Usage

WIRE = "openai"
DEFAULT_BASE_URL = "https://api.openai.com/v1"


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


def _field(raw: Any, name: str) -> Any:
    return raw.get(name) if isinstance(raw, dict) else None


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage(calls=1)
    prompt = token_count(raw.get("prompt_tokens"))
    cached = token_count(_field(raw.get("prompt_tokens_details"), "cached_tokens"))
    reasoning = _field(raw.get("completion_tokens_details"), "reasoning_tokens")
    return Usage(
        input_tokens=max(0, prompt - cached),
        cache_read_tokens=cached,
        output_tokens=token_count(raw.get("completion_tokens")),
        reasoning_tokens=token_count(reasoning),
        calls=1,
    )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts, as some compatible servers send
        return "".join(str(_field(part, "text") or "") for part in content)
    return ""


class OpenAIChatModel:
    def __init__(self, spec: ModelSpec) -> None:
        self.name = spec.model
        self.provider = spec.provider
        self._spec = spec
        # Retries belong to Helios (models/retry.py); the endpoint makes one attempt.
        self._endpoint = JsonEndpoint(
            spec.base_url or DEFAULT_BASE_URL,
            {"Authorization": f"Bearer {spec.api_key or 'not-needed'}"},
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
        return await self._endpoint.call("/chat/completions", body, config.timeout, self._parse)

    def _parse(self, response: dict[str, Any]) -> ModelResponse:
        choices = response.get("choices")
        if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
            raise TransientError("malformed response: no choices")
        choice = choices[0]
        raw = choice.get("message") or {}
        reasoning = raw.get("reasoning_content") or raw.get("reasoning")
        calls = []
        for call in raw.get("tool_calls") or []:
            function = _field(call, "function")
            if not isinstance(function, dict):
                # dropping it would lose a call the model made: ask again instead
                raise TransientError("malformed response: a tool call without a function")
            arguments = function.get("arguments") or ""
            arguments = arguments if isinstance(arguments, str) else json.dumps(arguments)
            calls.append(
                ToolCall(
                    id=str(call.get("id") or ""),
                    name=str(function.get("name") or ""),
                    arguments=parse_arguments(arguments),
                    raw_arguments=arguments,
                )
            )
        message = Message(
            role="assistant",
            content=_text(raw.get("content")),
            tool_calls=calls,
            reasoning=str(reasoning) if reasoning else None,
        )
        return ModelResponse(
            message=message,
            usage=_usage(response.get("usage")),
            finish_reason=str(choice.get("finish_reason") or "stop"),
            model=str(response.get("model") or self.name),
        )

    async def close(self) -> None:
        await self._endpoint.close()
