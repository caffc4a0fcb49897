"""OpenAI Chat Completions wire format for the mock model server, with the generic
computer tool: GUI steps are played as calls of a declared `computer` function whose
arguments are the canonical action, in the pixels of the last full screenshot (an
`image_url` part of a user message)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from aiohttp import web

from helios.testing.mock_gui import (
    Placed,
    data_url_payload,
    fill_answer,
    is_base64,
    place_all,
    screen_of,
    unavailable,
)
from helios.testing.mock_script import (
    Conversation,
    InvalidRequest,
    ToolCallSpec,
    Turn,
    Usage,
    prompt_tokens_of,
    required_model,
    split_chunks,
    sse_bytes,
    text_of,
    usage_for,
)

CONTEXT_LIMIT = 128_000

# status -> (error.type, error.code) as the real API sends them.
_ERROR_KINDS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}

_SYSTEM_ROLES = frozenset({"system", "developer"})


def _messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("'messages' must be a non-empty array")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise InvalidRequest(f"messages[{i}]: each message must be an object with a 'role'")
    return messages


def _unanswered(pending: list[str]) -> InvalidRequest:
    return InvalidRequest(
        "An assistant message with 'tool_calls' must be followed by tool messages responding to "
        f"each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        f"{', '.join(pending)}"
    )


def check_tool_history(messages: list[dict[str, Any]]) -> None:
    """Reject histories the real API rejects: unanswered tool calls and orphan tool results."""
    pending: list[str] = []
    for i, message in enumerate(messages):
        role = message["role"]
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                raise InvalidRequest(
                    f"Invalid parameter: messages[{i}] with role 'tool' must be a response to a "
                    f"preceding message with 'tool_calls' (tool_call_id {call_id!r})."
                )
            pending.remove(call_id)
            continue
        if pending:
            raise _unanswered(pending)
        if role == "assistant":
            pending = [str(c.get("id")) for c in message.get("tool_calls") or []]
    if pending:
        raise _unanswered(pending)


def _tool_names(tools: object) -> set[str]:
    if tools is None:
        return set()
    if not isinstance(tools, list):
        raise InvalidRequest("Invalid type for 'tools': expected an array")
    names: set[str] = set()
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise InvalidRequest(f"Missing required parameter: 'tools[{i}].function.name'.")
        names.add(function["name"])
    return names


def _image_payload(part: dict[str, Any], where: str) -> str | None:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else None
    if not isinstance(url, str) or not url:
        raise InvalidRequest(f"Missing required parameter: '{where}.image_url.url'.")
    if url.startswith("data:"):
        payload = data_url_payload(url)
        if payload is None or not is_base64(payload):
            raise InvalidRequest(f"Invalid '{where}.image_url.url': the data URL is not a "
                                 "base64 image.")  # fmt: skip
        return payload
    return None


def _zoom_only(message: dict[str, Any]) -> bool:
    """Whether every call of an assistant message is the generic tool's zoom."""
    calls = message.get("tool_calls") or []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        try:
            arguments = json.loads(function.get("arguments") or "{}") if isinstance(
                function, dict) else {}  # fmt: skip
        except ValueError:
            return False
        if not isinstance(arguments, dict) or arguments.get("action") != "zoom":
            return False
    return bool(calls)


def last_screenshot(messages: list[dict[str, Any]]) -> str | None:
    """The base64 of the last full screenshot (image parts after a turn of zoom calls are
    its crops); every image part is checked on the way."""
    return last_images(messages)[0]


def last_images(messages: list[dict[str, Any]]) -> tuple[str | None, str | None]:
    """(the last full screenshot, the last image of any kind: a zoom's crop too)."""
    last: str | None = None
    any_last: str | None = None
    zoomed = False
    for i, message in enumerate(messages):
        if message["role"] == "assistant":
            zoomed = _zoom_only(message)
            continue
        content = message.get("content")
        if message["role"] != "user" or not isinstance(content, list):
            continue
        for j, part in enumerate(content):
            if isinstance(part, dict) and part.get("type") == "image_url":
                payload = _image_payload(part, f"messages[{i}].content[{j}]")
                if payload is not None:
                    any_last = payload
                if payload is not None and not zoomed:
                    last = payload
        zoomed = False
    return last, any_last


def parse_request(
    body: Mapping[str, Any], *, strict_history: bool, headers: Mapping[str, str] | None = None,
    path_model: str | None = None,
) -> Conversation:  # fmt: skip
    """Validate the request as far as the real API would and reduce it to a Conversation."""
    model = required_model(body, "you must provide a model parameter")
    messages = _messages(body)
    if strict_history:
        check_tool_history(messages)
    names = _tool_names(body.get("tools"))
    system = "\n".join(text_of(m.get("content")) for m in messages if m["role"] in _SYSTEM_ROLES)
    first_user = next((m for m in messages if m["role"] == "user"), {})
    options = body.get("stream_options")
    screenshot, last_image = last_images(messages)
    return Conversation(
        model=model,
        haystack=f"{system}\n{text_of(first_user.get('content'))}",
        assistant_turns=sum(1 for m in messages if m["role"] == "assistant"),
        prompt_tokens=prompt_tokens_of(messages, body.get("tools")),
        stream=bool(body.get("stream")),
        include_usage=isinstance(options, dict) and bool(options.get("include_usage")),
        screenshot=screenshot,
        last_image=last_image,
        context={"names": names},
    )


def api_key(headers: Mapping[str, str]) -> str | None:
    auth = headers.get("authorization", "")
    return auth[len("Bearer ") :] if auth.startswith("Bearer ") else None


def error_response(status: int, message: str, *, retry_after: float | None = None) -> web.Response:
    default = ("server_error", None) if status >= 500 else ("invalid_request_error", None)
    kind, code = _ERROR_KINDS.get(status, default)
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    headers = {"x-request-id": "req_mock"}
    if retry_after is not None:
        headers["retry-after"] = f"{retry_after:g}"
    return web.json_response(body, status=status, headers=headers)


def context_overflow_response(conv: Conversation) -> web.Response:
    tokens = CONTEXT_LIMIT + conv.prompt_tokens
    message = (
        f"This model's maximum context length is {CONTEXT_LIMIT} tokens. However, your messages "
        f"resulted in {tokens} tokens. Please reduce the length of the messages."
    )
    body = {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }
    return web.json_response(body, status=400)


def malformed_response(*, stream: bool) -> web.Response:
    """A 200 whose body is cut off mid-JSON, like a proxy that dropped the tail."""
    broken = '{"id": "chatcmpl-broken", "object": "chat.completion", "choices": [{"index": 0,'
    if stream:
        return web.Response(body=sse_bytes(broken), content_type="text/event-stream")
    return web.Response(text=broken, content_type="application/json")


def _tool_call(turn_index: int, i: int, call: ToolCallSpec) -> dict[str, Any]:
    return {
        "id": f"call_{turn_index}_{i}",
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments_json(allow_bad=True)},
    }


def _finish_reason(turn: Turn) -> str:
    if turn.truncated:
        return "length"
    return "tool_calls" if turn.reply_tool_calls else "stop"


def _usage(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": usage.reasoning_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _message(turn: Turn, turn_index: int) -> dict[str, Any]:
    calls = turn.reply_tool_calls
    # The real API sends content null alongside tool calls, and "" for an empty reply.
    content = turn.reply_text if turn.reply_text is not None else (None if calls else "")
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if turn.reply_reasoning is not None:
        message["reasoning_content"] = turn.reply_reasoning
    if calls:
        message["tool_calls"] = [_tool_call(turn_index, i, c) for i, c in enumerate(calls)]
    return message


def completion_body(conv: Conversation, turn: Turn, turn_index: int) -> dict[str, Any]:
    choice = {
        "index": 0,
        "message": _message(turn, turn_index),
        "finish_reason": _finish_reason(turn),
        "logprobs": None,
    }
    return {
        "id": f"chatcmpl-mock-{turn_index}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": conv.model,
        "system_fingerprint": "fp_mock",
        "choices": [choice],
        "usage": _usage(usage_for(turn, conv.prompt_tokens)),
    }


def _stream_deltas(turn: Turn, turn_index: int) -> Iterator[dict[str, Any]]:
    """The message as the sequence of deltas the real API streams."""
    yield {"role": "assistant", "content": ""}
    for piece in split_chunks(turn.reply_reasoning or ""):
        yield {"reasoning_content": piece}
    for piece in split_chunks(turn.reply_text or ""):
        yield {"content": piece}
    for i, call in enumerate(turn.reply_tool_calls):
        head = _tool_call(turn_index, i, call)
        head["function"] = {"name": call.name, "arguments": ""}
        yield {"tool_calls": [{"index": i, **head}]}
        for piece in split_chunks(call.arguments_json(allow_bad=True)):
            yield {"tool_calls": [{"index": i, "function": {"arguments": piece}}]}


async def stream_completion(
    request: web.Request, conv: Conversation, turn: Turn, turn_index: int
) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    base = {
        "id": f"chatcmpl-mock-{turn_index}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": conv.model,
        "system_fingerprint": "fp_mock",
    }

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
        return sse_bytes({**base, "choices": [choice]})

    for delta in _stream_deltas(turn, turn_index):
        await response.write(chunk(delta))
    await response.write(chunk({}, _finish_reason(turn)))
    if conv.include_usage:
        usage = _usage(usage_for(turn, conv.prompt_tokens))
        await response.write(sse_bytes({**base, "choices": [], "usage": usage}))
    await response.write(sse_bytes("[DONE]"))
    await response.write_eof()
    return response


def computer_arguments(placed: Placed) -> dict[str, Any]:
    """One canonical step as the generic computer tool's arguments (desktop pixels)."""
    step = placed.step
    data: dict[str, Any] = {"action": step.action}
    point = placed.point
    if step.action == "scroll" and point is None:
        point = placed.centre
    if point is not None and step.action in ("click", "move", "scroll"):
        data.update(x=point[0], y=point[1])
    if step.action == "click":
        data.update(button=step.button, count=step.count)
    if step.modifiers and step.action in ("click", "scroll"):
        data["modifiers"] = list(step.modifiers)
    extra: dict[str, dict[str, Any]] = {
        "drag": {"path": [list(p) for p in placed.path]},
        "scroll": {"dx": step.dx, "dy": step.dy},
        "type": {"text": step.text},
        "key": {"keys": list(step.keys)},
        "hold_key": {"keys": list(step.keys), "seconds": step.seconds},
        "wait": {"seconds": step.seconds},
        "zoom": {"region": list(placed.region or ())},
        "navigate": {"url": step.url},
        "done": {"answer": step.answer},
        "bash": {"command": step.command},
    }
    data.update(extra.get(step.action, {}))
    return data


def with_gui_calls(conv: Conversation, turn: Turn) -> Turn:
    """The turn with its GUI steps as calls of the declared `computer` function."""
    if not turn.reply_gui:
        return turn
    if "computer" not in conv.context.get("names", ()):
        raise unavailable(turn.reply_gui[0], "openai", "no computer function declared")
    calls: list[ToolCallSpec] = []
    for placed in place_all(turn.reply_gui, screen_of(conv.screenshot)):
        step = placed.step
        if step.action == "type" and placed.point is not None:
            click = {"action": "click", "x": placed.point[0], "y": placed.point[1]}
            calls.append(ToolCallSpec("computer", click))
        if step.action == "type" and step.clear:
            calls += [ToolCallSpec("computer", {"action": "key", "keys": keys})
                      for keys in (["ctrl", "a"], ["BackSpace"])]  # fmt: skip
        arguments = computer_arguments(placed)
        if step.action == "done":
            arguments["answer"] = fill_answer(step, conv.last_image)
        calls.append(ToolCallSpec("computer", arguments))
        if step.action == "type" and step.enter:
            calls.append(ToolCallSpec("computer", {"action": "key", "keys": ["Return"]}))
    return replace(turn, tool_calls=(*turn.tool_calls, *calls), gui=())


async def reply(
    request: web.Request, conv: Conversation, turn: Turn, turn_index: int
) -> web.StreamResponse:
    turn = with_gui_calls(conv, turn)
    if conv.stream:
        return await stream_completion(request, conv, turn, turn_index)
    return web.json_response(completion_body(conv, turn, turn_index))
