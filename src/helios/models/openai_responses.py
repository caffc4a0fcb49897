"""OpenAI Responses API (POST /v1/responses), with the computer tool.

The computer tool is `computer_use_preview` (the computer-use-preview model: one
`action` per call, the display size declared) or the GA `computer` tool (a batch of
`actions[]` per call, in the pixels of the screenshot sent). Both come back as
`computer_call` items, read as ToolCall(name="computer", id=<call_id>,
arguments={"action": …} or {"actions": […]}, plus "pending_safety_checks" when the
call has any). A message of role "tool" that answers one becomes a
`computer_call_output` with its screenshot (a data URL) and the checks it
acknowledges (`provider_state["acknowledged_safety_checks"]`, set by the computer
provider); any text of it follows as a user message, since the output has no text.

Stateless: every request carries the whole conversation (`input`), never
`previous_response_id`. The conversation Helios keeps is then the only state: a
retried or resumed turn needs nothing on the server, the last-K window
(`models/images.py`) bounds what each turn costs (with previous_response_id the
server keeps every screenshot in context until it truncates), and the test server
decides each reply from one request. The price is sending the K screenshots again
each turn. The output items of a reply (reasoning, message, calls) are kept in the
assistant message's `provider_state["output"]` and sent back verbatim, as the API requires
for reasoning items; they are resolved by id on OpenAI's side (`store` is left at
its default).
"""

from __future__ import annotations

import json
from typing import Any

from helios.models.base import GenerationConfig, ImageRef, Message, ModelResponse, ToolCall
from helios.models.errors import TransientError
from helios.models.http import EndpointClient
from helios.models.images import (
    OMITTED,
    PLACEHOLDER_PNG,
    ImageWindow,
    data_url,
    image_window,
    split_kept,
    wire_key,
)
from helios.models.openai_chat import bearer, openai_usage
from helios.models.reply_values import function_call, parts_response
from helios.models.routing import ModelSpec

WIRE = "responses"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: the name a computer call has as a ToolCall
COMPUTER = "computer"
#: the detail asked for images in messages (screens have small text)
IMAGE_DETAIL = "high"
PLACEHOLDER_URL = data_url(PLACEHOLDER_PNG)


def _input_image(image: ImageRef) -> dict[str, Any]:
    return {"type": "input_image", "image_url": data_url(image), "detail": IMAGE_DETAIL}


def _media(message: Message, kept: int) -> list[dict[str, Any]]:
    omitted, sent = split_kept(message, kept)
    return [{"type": "input_text", "text": OMITTED}] * omitted + [_input_image(i) for i in sent]


def _user_item(text: str, media: list[dict[str, Any]]) -> dict[str, Any]:
    texts = [{"type": "input_text", "text": text}] if text else []
    return {"type": "message", "role": "user", "content": texts + media}


def _assistant_items(message: Message) -> list[dict[str, Any]]:
    state = message.provider_state
    if isinstance(state, dict) and isinstance(state.get("output"), list):
        own: list[dict[str, Any]] = state["output"]
        return own  # this client's own output items: sent back as they came
    items: list[dict[str, Any]] = []
    if message.content:
        content = [{"type": "output_text", "text": message.content, "annotations": []}]
        items.append({"type": "message", "role": "assistant", "content": content,
                      "status": "completed"})  # fmt: skip
    for call in message.tool_calls:
        if call.name == COMPUTER:
            items.append({"type": "computer_call", "id": call.id, "call_id": call.id,
                          "status": "completed", **_native_call(call.arguments or {})})  # fmt: skip
        else:
            arguments = call.raw_arguments or json.dumps(call.arguments or {})
            items.append({"type": "function_call", "call_id": call.id, "name": call.name,
                          "arguments": arguments})  # fmt: skip
    return items


def _native_call(arguments: dict[str, Any]) -> dict[str, Any]:
    native: dict[str, Any] = {k: arguments[k] for k in ("action", "actions") if k in arguments}
    native["pending_safety_checks"] = arguments.get("pending_safety_checks") or []
    return native


def _computer_output(message: Message, kept: int) -> list[dict[str, Any]]:
    """A computer call's answer: its last screenshot (a placeholder image once it has
    left the window: the output has no text form), then any text and earlier images."""
    omitted, sent = split_kept(message, kept)
    url = data_url(sent[-1]) if sent else PLACEHOLDER_URL
    output: dict[str, Any] = {
        "type": "computer_call_output",
        "call_id": message.tool_call_id,
        "output": {"type": "computer_screenshot", "image_url": url},
    }
    state = message.provider_state if isinstance(message.provider_state, dict) else {}
    checks = state.get("acknowledged_safety_checks")
    if checks:
        output["acknowledged_safety_checks"] = checks
    items = [output]
    # The placeholder image stands for one omitted screenshot; any other is text.
    extra = [{"type": "input_text", "text": OMITTED}] * (omitted - (0 if sent else 1))
    extra += [_input_image(i) for i in sent[:-1]]
    if message.content or extra:
        items.append(_user_item(message.content, extra))
    return items


def _function_output(message: Message, kept: int) -> dict[str, Any]:
    output: str | list[dict[str, Any]] = message.content
    if message.images:
        texts = [{"type": "input_text", "text": message.content}] if message.content else []
        output = texts + _media(message, kept)
    return {"type": "function_call_output", "call_id": message.tool_call_id, "output": output}


def _items(message: Message, kept: int, computer_calls: set[str]) -> list[dict[str, Any]]:
    """The input items of one message, converted once (per number of its images
    sent) and cached."""
    key = wire_key(WIRE, kept, message)
    cached = message.wire.get(key)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    items: list[dict[str, Any]]
    if message.role == "assistant":
        items = _assistant_items(message)
    elif message.role == "tool":
        if message.tool_call_id in computer_calls:
            items = _computer_output(message, kept)
        else:
            items = [_function_output(message, kept)]
    elif message.images:
        items = [_user_item(message.content, _media(message, kept))]
    else:
        items = [{"type": "message", "role": message.role, "content": message.content}]
    message.wire[key] = items
    return items


def assemble(messages: list[Message], window: ImageWindow) -> list[dict[str, Any]]:
    """The request's input items (system messages go to `instructions`)."""
    items: list[dict[str, Any]] = []
    computer_calls: set[str] = set()
    for index, message in enumerate(messages):
        if message.role == "system":
            continue
        if message.role == "assistant":
            computer_calls.update(c.id for c in message.tool_calls if c.name == COMPUTER)
        items.extend(_items(message, window.kept(index, message), computer_calls))
    return items


def wire_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool as the Responses API declares it; a Chat Completions function tool
    (`{"type": "function", "function": {...}}`) is flattened."""
    function = tool.get("function")
    if tool.get("type") == "function" and isinstance(function, dict):
        return {"type": "function", **function}
    return tool


def _computer_call(item: dict[str, Any]) -> ToolCall:
    arguments: dict[str, Any] = {}
    if isinstance(item.get("actions"), list):
        arguments["actions"] = item["actions"]
    elif isinstance(item.get("action"), dict):
        arguments["action"] = item["action"]
    else:
        raise ValueError("a computer call without an action")
    checks = item.get("pending_safety_checks")
    if checks:
        if not isinstance(checks, list):
            raise ValueError("pending_safety_checks is not a list")
        arguments["pending_safety_checks"] = checks
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise ValueError("a computer call without a call_id")
    return ToolCall(call_id, COMPUTER, arguments, json.dumps(arguments))


def _texts(item: dict[str, Any], kinds: tuple[str, ...], key: str) -> list[str]:
    parts = item.get(key)
    if not isinstance(parts, list):
        return []
    return [str(p.get("text") or "") for p in parts
            if isinstance(p, dict) and p.get("type") in kinds]  # fmt: skip


class OpenAIResponsesModel(EndpointClient):
    path = "/responses"

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__(spec, DEFAULT_BASE_URL, bearer(spec))

    def _request(
        self, messages: list[Message], tools: list[dict[str, Any]], config: GenerationConfig
    ) -> dict[str, Any]:
        window = image_window(messages, config.keep_images)
        request: dict[str, Any] = {"model": self._spec.model, "input": assemble(messages, window)}
        instructions = "\n\n".join(m.content for m in messages if m.role == "system")
        if instructions:
            request["instructions"] = instructions
        if tools:
            request["tools"] = [wire_tool(t) for t in tools]
            if any(t.get("type") == "computer_use_preview" for t in tools):
                request["truncation"] = "auto"  # required with computer_use_preview
        if not config.omit_max_tokens:
            request["max_output_tokens"] = config.max_tokens
        if config.temperature is not None:
            request["temperature"] = config.temperature
        if config.reasoning_effort is not None:
            request["reasoning"] = {"effort": config.reasoning_effort, "summary": "auto"}
        return request

    def _parse(self, response: dict[str, Any]) -> ModelResponse:
        output = response.get("output")
        if not isinstance(output, list):
            raise TransientError("malformed response: no output")
        if response.get("status") == "failed":
            error = response.get("error")
            detail = error.get("message") if isinstance(error, dict) else error
            raise TransientError(f"the response failed: {str(detail)[:300]}")
        texts: list[str] = []
        reasoning: list[str] = []
        calls: list[ToolCall] = []
        for item in output:
            kind = item.get("type")
            if kind == "message":
                texts.extend(_texts(item, ("output_text", "refusal"), "content"))
            elif kind == "reasoning":
                reasoning.extend(_texts(item, ("summary_text",), "summary"))
            elif kind == "computer_call":
                calls.append(_computer_call(item))
            elif kind == "function_call":
                calls.append(function_call(item.get("call_id"), item.get("name"),
                                           item.get("arguments")))  # fmt: skip
        return parts_response(
            texts, reasoning, calls, {"output": output},
            usage=openai_usage(response.get("usage"), "input_tokens", "output_tokens"),
            finish_reason=self._finish(response, calls),
            model=str(response.get("model") or self.name),
        )  # fmt: skip

    @staticmethod
    def _finish(response: dict[str, Any], calls: list[ToolCall]) -> str:
        details = response.get("incomplete_details")
        if response.get("status") == "incomplete":
            reason = details.get("reason") if isinstance(details, dict) else None
            return "length" if reason == "max_output_tokens" else str(reason or "incomplete")
        return "tool_calls" if calls else "stop"
