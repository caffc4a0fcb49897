"""Anthropic Messages wire format for the mock model server (its computer tool:
:mod:`helios.testing.mock_computer_anthropic`)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from aiohttp import web

from helios.testing.mock_computer_anthropic import check_tools, gui_blocks, last_images
from helios.testing.mock_script import (
    Conversation,
    InvalidRequest,
    Turn,
    Usage,
    prompt_tokens_of,
    required_model,
    split_chunks,
    sse_bytes,
    text_of,
    usage_for,
)

CONTEXT_LIMIT = 200_000
THINKING_SIGNATURE = "x"

_ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def _blocks(message: Mapping[str, Any], kind: str) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == kind]


def _messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("messages: at least one message is required")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise InvalidRequest(f"messages.{i}.role: Input should be 'user' or 'assistant'")
    return messages


def check_tool_history(messages: list[dict[str, Any]]) -> None:
    """Every tool_use must be answered by a tool_result in the very next (user) message."""
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        ids = [str(b.get("id")) for b in _blocks(message, "tool_use")]
        following = messages[i + 1] if i + 1 < len(messages) else {}
        answered = {str(b.get("tool_use_id")) for b in _blocks(following, "tool_result")}
        missing = [tool_id for tool_id in ids if tool_id not in answered]
        if missing:
            raise InvalidRequest(
                f"messages.{i + 1}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                "corresponding `tool_result` block in the next message."
            )
        extra = answered - set(ids)
        if extra:
            raise InvalidRequest(
                f"messages.{i + 1}: unexpected `tool_use_id` found in `tool_result` blocks: "
                f"{', '.join(sorted(extra))}. Each `tool_result` block must have a corresponding "
                "`tool_use` block in the previous message."
            )


def parse_request(
    body: Mapping[str, Any], *, strict_history: bool, headers: Mapping[str, str] | None = None,
    path_model: str | None = None,
) -> Conversation:  # fmt: skip
    """Validate the request as far as the real API would and reduce it to a Conversation."""
    model = required_model(body, "model: Field required")
    if not isinstance(body.get("max_tokens"), int):
        raise InvalidRequest("max_tokens: Field required")
    messages = _messages(body)
    if strict_history:
        check_tool_history(messages)
    context = check_tools(body.get("tools"), headers or {})
    screenshot, last_image, _ = last_images(messages)
    first_user = next((m for m in messages if m["role"] == "user"), {})
    return Conversation(
        model=model,
        haystack=f"{text_of(body.get('system'))}\n{text_of(first_user.get('content'))}",
        assistant_turns=sum(1 for m in messages if m["role"] == "assistant"),
        prompt_tokens=prompt_tokens_of(body.get("system"), messages, body.get("tools")),
        stream=bool(body.get("stream")),
        screenshot=screenshot,
        last_image=last_image,
        context=context,
    )


def api_key(headers: Mapping[str, str]) -> str | None:
    if "x-api-key" in headers:
        return headers["x-api-key"]
    auth = headers.get("authorization", "")
    return auth[len("Bearer ") :] if auth.startswith("Bearer ") else None


def _error_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_mock"}


def error_response(status: int, message: str, *, retry_after: float | None = None) -> web.Response:
    kind = _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    headers = {"request-id": "req_mock"}
    if retry_after is not None:
        # HTTP header names are case-insensitive: this one header is both Retry-After and
        # retry-after. Sending two would make clients join them into "1, 1" and fail to parse.
        headers["retry-after"] = f"{retry_after:g}"
    return web.json_response(_error_body(kind, message), status=status, headers=headers)


def context_overflow_response(conv: Conversation) -> web.Response:
    tokens = CONTEXT_LIMIT + conv.prompt_tokens
    message = f"prompt is too long: {tokens} tokens > {CONTEXT_LIMIT} maximum"
    return web.json_response(_error_body("invalid_request_error", message), status=400)


def malformed_response(*, stream: bool) -> web.Response:
    """A 200 whose body is cut off mid-JSON, like a proxy that dropped the tail."""
    broken = '{"id": "msg_broken", "type": "message", "role": "assistant", "content": [{"type":'
    if stream:
        return web.Response(
            body=sse_bytes(broken, "message_start"), content_type="text/event-stream"
        )
    return web.Response(text=broken, content_type="application/json")


def _content_blocks(conv: Conversation, turn: Turn, turn_index: int) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if turn.reply_reasoning is not None:
        blocks.append(
            {"type": "thinking", "thinking": turn.reply_reasoning, "signature": THINKING_SIGNATURE}
        )
    if turn.reply_text is not None:
        blocks.append({"type": "text", "text": turn.reply_text})
    for i, call in enumerate(turn.reply_tool_calls):
        # bad_arguments is ignored here: Anthropic's `input` is always a parsed object.
        blocks.append(
            {
                "type": "tool_use",
                "id": f"toolu_{turn_index}_{i}",
                "name": call.name,
                "input": dict(call.arguments),
            }
        )
    if turn.reply_gui:
        blocks.extend(gui_blocks(conv, turn, turn_index))
    return blocks


def _stop_reason(turn: Turn, blocks: list[dict[str, Any]]) -> str:
    if turn.truncated:
        return "max_tokens"
    return "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"


def _usage(usage: Usage, *, output_tokens: int | None = None) -> dict[str, Any]:
    # Anthropic's input_tokens excludes cache reads; OpenAI's prompt_tokens includes them.
    return {
        "input_tokens": usage.prompt_tokens - usage.cached_tokens,
        "output_tokens": usage.completion_tokens if output_tokens is None else output_tokens,
        "cache_read_input_tokens": usage.cached_tokens,
        "cache_creation_input_tokens": 0,
    }


def message_body(conv: Conversation, turn: Turn, turn_index: int) -> dict[str, Any]:
    blocks = _content_blocks(conv, turn, turn_index)
    return {
        "id": f"msg_mock_{turn_index}",
        "type": "message",
        "role": "assistant",
        "model": conv.model,
        "content": blocks,
        "stop_reason": _stop_reason(turn, blocks),
        "stop_sequence": None,
        "usage": _usage(usage_for(turn, conv.prompt_tokens)),
    }


def _block_events(index: int, block: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """content_block_start / *_delta / content_block_stop for one finished block."""
    kind = block["type"]
    if kind == "thinking":
        start: dict[str, Any] = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [
            {"type": "thinking_delta", "thinking": p} for p in split_chunks(block["thinking"])
        ]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif kind == "text":
        start = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": p} for p in split_chunks(block["text"])]
    else:
        start = {**block, "input": {}}
        pieces = split_chunks(json.dumps(block["input"]))
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces]
    yield {"type": "content_block_start", "index": index, "content_block": start}
    for delta in deltas:
        yield {"type": "content_block_delta", "index": index, "delta": delta}
    yield {"type": "content_block_stop", "index": index}


def _stream_events(conv: Conversation, turn: Turn, turn_index: int) -> Iterator[dict[str, Any]]:
    body = message_body(conv, turn, turn_index)
    usage = usage_for(turn, conv.prompt_tokens)
    start = {**body, "content": [], "stop_reason": None, "usage": _usage(usage, output_tokens=1)}
    yield {"type": "message_start", "message": start}
    for index, block in enumerate(body["content"]):
        yield from _block_events(index, block)
    yield {
        "type": "message_delta",
        "delta": {"stop_reason": body["stop_reason"], "stop_sequence": None},
        "usage": {"output_tokens": usage.completion_tokens},
    }
    yield {"type": "message_stop"}


async def reply(
    request: web.Request, conv: Conversation, turn: Turn, turn_index: int
) -> web.StreamResponse:
    if not conv.stream:
        return web.json_response(message_body(conv, turn, turn_index))
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    for event in _stream_events(conv, turn, turn_index):
        await response.write(sse_bytes(event, event["type"]))
    await response.write_eof()
    return response
