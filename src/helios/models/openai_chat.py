"""OpenAI Chat Completions (OpenAI, OpenRouter, Gemini's compatible endpoint, vLLM & co).

Images (`Message.images`) go as `image_url` parts with data: URLs. A user message
carries its own; a tool message cannot (the wire's tool role is text), so the images
of a run of tool results follow it in one user message. Only the last `keep_images`
are sent (`models/images.py`).
"""

from __future__ import annotations

import json
from typing import Any

from helios.models.base import GenerationConfig, ImageRef, Message, ModelResponse
from helios.models.errors import TransientError
from helios.models.http import EndpointClient
from helios.models.images import OMITTED, data_url, image_window, split_kept, wire_key
from helios.models.reply_values import function_call, token_count
from helios.models.routing import ModelSpec
from helios.usage import Usage

WIRE = "openai"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: what introduces the screenshots of a run of tool results
TOOL_IMAGES_TEXT = "The screen after the calls above:"


def _image_part(image: ImageRef) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": data_url(image)}}


def media_parts(message: Message, kept: int) -> list[dict[str, Any]]:
    """The message's images as content parts: a text placeholder for each one not
    sent. Cached per number sent."""
    key = wire_key(WIRE + ":media", kept, message)
    cached = message.wire.get(key)
    if cached is None:
        omitted, sent = split_kept(message, kept)
        cached = [{"type": "text", "text": OMITTED}] * omitted + [_image_part(i) for i in sent]
        message.wire[key] = cached
    return cached


def to_wire(message: Message, kept: int | None = None) -> dict[str, Any]:
    """One message as the wire's message (a tool message's images are sent apart,
    see `assemble`); `kept`: how many of its images are sent (default all)."""
    kept = len(message.images) if kept is None else kept
    images = bool(message.images) and message.role not in ("tool", "assistant")
    key = wire_key(WIRE, kept, message) if images else WIRE
    cached = message.wire.get(key)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    wire: dict[str, Any]
    if images:
        text = [{"type": "text", "text": message.content}] if message.content else []
        wire = {"role": message.role, "content": text + media_parts(message, kept)}
    elif message.role == "tool":
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
    message.wire[key] = wire
    return wire


def assemble(messages: list[Message], keep_images: int | None) -> list[dict[str, Any]]:
    """The request's messages; the images of each run of tool results follow the run
    in one user message (a user message between tool results would be refused)."""
    window = image_window(messages, keep_images)
    wire: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        kept = window.kept(index, message)
        if pending and message.role != "tool":
            wire.append({"role": "user", "content": [_TOOL_IMAGES, *pending]})
            pending = []
        wire.append(to_wire(message, kept))
        if message.role == "tool" and message.images:
            pending.extend(media_parts(message, kept))
    if pending:
        wire.append({"role": "user", "content": [_TOOL_IMAGES, *pending]})
    return wire


_TOOL_IMAGES = {"type": "text", "text": TOOL_IMAGES_TEXT}


def _field(raw: Any, name: str) -> Any:
    return raw.get(name) if isinstance(raw, dict) else None


def bearer(spec: ModelSpec) -> dict[str, str]:
    """OpenAI's auth header (a local server may need none: any key passes)."""
    return {"Authorization": f"Bearer {spec.api_key or 'not-needed'}"}


def openai_usage(
    raw: Any, prompt_key: str = "prompt_tokens", completion_key: str = "completion_tokens"
) -> Usage:
    """A reply's usage as OpenAI reports it: the prompt's and the completion's counts
    under these keys (Chat Completions' by default; the Responses API's are
    `input_tokens` and `output_tokens`), each with its `<key>_details`. The cached
    prompt tokens are counted apart from the rest of the prompt."""
    if not isinstance(raw, dict):
        return Usage(calls=1)
    prompt = token_count(raw.get(prompt_key))
    cached = token_count(_field(raw.get(f"{prompt_key}_details"), "cached_tokens"))
    reasoning = _field(raw.get(f"{completion_key}_details"), "reasoning_tokens")
    return Usage(
        input_tokens=max(0, prompt - cached),
        cache_read_tokens=cached,
        output_tokens=token_count(raw.get(completion_key)),
        reasoning_tokens=token_count(reasoning),
        calls=1,
    )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts, as some compatible servers send
        return "".join(str(_field(part, "text") or "") for part in content)
    return ""


class OpenAIChatModel(EndpointClient):
    path = "/chat/completions"

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__(spec, DEFAULT_BASE_URL, bearer(spec))

    def _request(
        self, messages: list[Message], tools: list[dict[str, Any]], config: GenerationConfig
    ) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self._spec.model,
            "messages": assemble(messages, config.keep_images),
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
            calls.append(function_call(call.get("id"), function.get("name"), arguments))
        message = Message(
            role="assistant",
            content=_text(raw.get("content")),
            tool_calls=calls,
            reasoning=str(reasoning) if reasoning else None,
        )
        return ModelResponse(
            message=message,
            usage=openai_usage(response.get("usage")),
            finish_reason=str(choice.get("finish_reason") or "stop"),
            model=str(response.get("model") or self.name),
        )
