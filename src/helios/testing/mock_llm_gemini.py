"""Gemini's generateContent (POST /v1beta/models/{model}:generateContent) for the mock
model server, with the `computer_use` tool; and its streamed form,
`:streamGenerateContent?alt=sse` (what Gemini CLI calls), whose reply is a series of
server-sent events, each a GenerateContentResponse: the text in pieces, then the
function calls whole with the finish reason; every event carries the usage so far.

Checked as the real API does: `contents` of user and model turns with parts; inline
images as base64; the declared tools (`computerUse` with its environment, function
declarations); each model turn's function calls answered, in the next turn, by as
many function responses of the same names; a function call that asked for a safety
confirmation answered with `safety_acknowledgement`; and a model turn with function
calls sent back with its thought signature. Keys are accepted in camelCase or
snake_case, as Google's JSON parser does; replies use camelCase.

The last full screenshot is the image in the last function response that is not a
zoom's; GUI steps are played from it by `mock_computer_gemini`. Errors have Google's shape: a 429
carries its wait as RetryInfo in the body, not as Retry-After; a wrong key is a 400
with reason API_KEY_INVALID.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from aiohttp import web

from helios.testing.mock_computer_gemini import check_tools, get_field, gui_parts
from helios.testing.mock_gui import is_base64
from helios.testing.mock_script import (
    Conversation,
    InvalidRequest,
    Turn,
    Usage,
    prompt_tokens_of,
    split_chunks,
    sse_bytes,
    usage_for,
)

CONTEXT_LIMIT = 1_048_576
_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
           404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE",
           504: "DEADLINE_EXCEEDED"}  # fmt: skip
#: what the mock's model turns carry as their thought signature
SIGNATURE = base64.b64encode(b"mock-thought-signature").decode()


# ----- errors --------------------------------------------------------------------------------


def _error(status: int, message: str, details: list[dict[str, Any]] | None = None) -> web.Response:
    body: dict[str, Any] = {"code": status, "message": message,
                            "status": _STATUS.get(status, "UNKNOWN")}  # fmt: skip
    if details:
        body["details"] = details
    return web.json_response({"error": body}, status=status)


def error_response(status: int, message: str, *, retry_after: float | None = None) -> web.Response:
    if status == 401:  # Google's answer to a wrong key
        info = {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
                "domain": "googleapis.com"}  # fmt: skip
        return _error(400, "API key not valid. Please pass a valid API key.", [info])
    details = None
    if retry_after is not None:
        details = [{"@type": "type.googleapis.com/google.rpc.RetryInfo",
                    "retryDelay": f"{retry_after:g}s"}]  # fmt: skip
    return _error(status, message, details)


def context_overflow_response(conv: Conversation) -> web.Response:
    tokens = CONTEXT_LIMIT + conv.prompt_tokens
    return _error(400, f"The input token count ({tokens}) exceeds the maximum number of tokens "
                       f"allowed ({CONTEXT_LIMIT}).")  # fmt: skip


def malformed_response(*, stream: bool) -> web.Response:
    """A 200 whose body is cut off mid-JSON, like a proxy that dropped the tail."""
    broken = '{"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {'
    if stream:
        return web.Response(body=sse_bytes(broken), content_type="text/event-stream")
    return web.Response(text=broken, content_type="application/json")


def api_key(headers: Mapping[str, str]) -> str | None:
    return headers.get("x-goog-api-key")


# ----- the request ---------------------------------------------------------------------------


def _contents(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        raise InvalidRequest("* GenerateContentRequest.contents: contents is not specified")
    for i, content in enumerate(contents):
        if not isinstance(content, dict):
            raise InvalidRequest(f"Invalid value at 'contents[{i}]': expected an object")
        if content.get("role", "user") not in ("user", "model"):
            raise InvalidRequest(f"Please use a valid role: user, model (contents[{i}]).")
        parts = content.get("parts")
        if not isinstance(parts, list) or not parts or not all(isinstance(p, dict) for p in parts):
            raise InvalidRequest(f"* GenerateContentRequest.contents[{i}].parts: contents.parts "
                                 "must not be empty.")  # fmt: skip
    return contents


def _image(blob: object, where: str) -> str:
    mime = get_field(blob, "mimeType") if isinstance(blob, dict) else None
    if not isinstance(blob, dict) or not str(mime or "").startswith("image/"):
        raise InvalidRequest(f"Invalid value at '{where}.inline_data.mime_type'")
    data = blob.get("data")
    if not is_base64(data):
        raise InvalidRequest(f"Invalid value at '{where}.inline_data.data' (TYPE_BYTES), "
                             "Base64 decoding failed")  # fmt: skip
    return str(data)


def _calls(content: dict[str, Any]) -> list[dict[str, Any]]:
    calls = []
    for part in content["parts"]:
        call = get_field(part, "functionCall")
        if call is not None:
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                raise InvalidRequest("Invalid value at 'function_call.name'")
            calls.append(call)
    return calls


def _check_signature(content: dict[str, Any], i: int) -> None:
    first = next(p for p in content["parts"] if get_field(p, "functionCall") is not None)
    if not get_field(first, "thoughtSignature"):
        raise InvalidRequest(
            f"Function call is missing a thought_signature in functionCall parts "
            f"(contents[{i}]). This is required for tools to work correctly; return the "
            "model's parts as they came."
        )


def _check_answers(calls: list[dict[str, Any]], content: dict[str, Any] | None, i: int) -> None:
    responses = [get_field(p, "functionResponse") for p in (content or {}).get("parts", [])]
    responses = [r for r in responses if r is not None]
    if (content or {}).get("role", "user") != "user" or len(responses) != len(calls):
        raise InvalidRequest(
            "Please ensure that the number of function response parts is equal to the number "
            f"of function call parts of the function call turn (contents[{i}])."
        )
    for call, response in zip(calls, responses, strict=True):
        if not isinstance(response, dict) or response.get("name") != call["name"]:
            raise InvalidRequest(f"contents[{i + 1}]: a function response's name does not "
                                 f"match its call {call['name']!r}.")  # fmt: skip
        decision = (call.get("args") or {}).get("safety_decision")
        if isinstance(decision, dict) and decision.get("decision") == "require_confirmation":
            answer = response.get("response")
            given = answer.get("safety_acknowledgement") if isinstance(answer, dict) else None
            if str(given).lower() != "true":
                raise InvalidRequest(f"contents[{i + 1}]: the call {call['name']!r} required a "
                                     "safety confirmation: its response must carry "
                                     "safety_acknowledgement.")  # fmt: skip


def _screens(content: dict[str, Any], i: int) -> list[str]:
    """The full screenshots of a user turn (checked): its images and its function
    responses' images, except a zoom's."""
    found: list[str] = []
    for j, part in enumerate(content["parts"]):
        where = f"contents[{i}].parts[{j}]"
        blob = get_field(part, "inlineData")
        if blob is not None:
            found.append(_image(blob, where))
        response = get_field(part, "functionResponse")
        if isinstance(response, dict):
            inner = response.get("parts") or []
            images = [_image(get_field(p, "inlineData"), f"{where}.function_response")
                      for p in inner if isinstance(p, dict)]  # fmt: skip
            if response.get("name") != "zoom":
                found.extend(images)
    return found


def _walk(contents: list[dict[str, Any]], strict: bool) -> str | None:
    """Check the turns; the last full screenshot."""
    screenshot: str | None = None
    for i, content in enumerate(contents):
        if content.get("role", "user") == "user":
            screens = _screens(content, i)
            screenshot = screens[-1] if screens else screenshot
            continue
        calls = _calls(content)
        if not calls:
            continue
        _check_signature(content, i)
        following = contents[i + 1] if i + 1 < len(contents) else None
        if following is not None or strict:
            _check_answers(calls, following, i)
    return screenshot


def _text(content: object) -> str:
    parts = content.get("parts") if isinstance(content, dict) else None
    return "\n".join(str(p.get("text")) for p in parts or [] if isinstance(p, dict) and "text" in p)


def parse_request(
    body: Mapping[str, Any], *, strict_history: bool, headers: Mapping[str, str] | None = None,
    path_model: str | None = None,
) -> Conversation:  # fmt: skip
    """Validate the request as far as the real API would and reduce it to a Conversation."""
    contents = _contents(body)
    context = check_tools(body.get("tools"))
    screenshot = _walk(contents, strict_history)
    system = get_field(body, "systemInstruction")
    first_user = next((c for c in contents if c.get("role", "user") == "user"), {})
    return Conversation(
        model=path_model or "gemini-mock",
        haystack=f"{_text(system)}\n{_text(first_user)}",
        assistant_turns=sum(1 for c in contents if c.get("role") == "model"),
        prompt_tokens=prompt_tokens_of(system, contents, body.get("tools")),
        screenshot=screenshot,
        context=context,
    )


def parse_stream_request(
    body: Mapping[str, Any], *, strict_history: bool, headers: Mapping[str, str] | None = None,
    path_model: str | None = None,
) -> Conversation:  # fmt: skip
    """`:streamGenerateContent`: the same request, answered with server-sent events."""
    conv = parse_request(body, strict_history=strict_history, headers=headers,
                         path_model=path_model)  # fmt: skip
    return replace(conv, stream=True)


# ----- the reply -----------------------------------------------------------------------------


def _usage(usage: Usage) -> dict[str, Any]:
    return {
        "promptTokenCount": usage.prompt_tokens,
        "candidatesTokenCount": usage.completion_tokens - usage.reasoning_tokens,
        "thoughtsTokenCount": usage.reasoning_tokens,
        "cachedContentTokenCount": usage.cached_tokens,
        "totalTokenCount": usage.prompt_tokens + usage.completion_tokens,
    }


def response_body(conv: Conversation, turn: Turn, t: int) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if turn.reply_reasoning is not None:
        parts.append({"text": turn.reply_reasoning, "thought": True})
    calls, answer = gui_parts(conv, turn) if turn.reply_gui else ([], "")
    calls += [{"functionCall": {"name": c.name, "args": dict(c.arguments)}}
              for c in turn.reply_tool_calls]  # fmt: skip
    text = "\n".join(x for x in (turn.reply_text, answer) if x)
    if text:
        parts.append({"text": text})
    if calls:
        calls[0] = {**calls[0], "thoughtSignature": SIGNATURE}
    parts += calls
    candidate = {
        "content": {"role": "model", "parts": parts or [{"text": ""}]},
        "finishReason": "MAX_TOKENS" if turn.truncated else "STOP",
        "index": 0,
    }
    return {
        "candidates": [candidate],
        "usageMetadata": _usage(usage_for(turn, conv.prompt_tokens)),
        "modelVersion": conv.model,
        "responseId": f"mock-{t}-{int(time.time())}",
    }


def _stream_events(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The whole reply as the events the real API streams: each text part in pieces
    (a thought's pieces keep `thought`), then the function calls with the finish
    reason; the usage rides on every event (the last one's is the total)."""
    (candidate,) = body["candidates"]
    parts = candidate["content"]["parts"]
    head = {k: v for k, v in body.items() if k != "candidates"}
    events: list[dict[str, Any]] = []
    for part in parts:
        if "text" not in part or not part["text"]:
            continue
        for piece in split_chunks(part["text"]):
            content = {"role": "model", "parts": [{**part, "text": piece}]}
            events.append({**head, "candidates": [{"content": content, "index": 0}]})
    calls = [p for p in parts if "text" not in p]
    last = {"role": "model", "parts": calls or [{"text": ""}]}
    events.append({**head, "candidates": [{**candidate, "content": last}]})
    return events


async def reply(
    request: web.Request, conv: Conversation, turn: Turn, turn_index: int
) -> web.StreamResponse:
    body = response_body(conv, turn, turn_index)
    if not conv.stream:
        return web.json_response(body)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache"})  # fmt: skip
    await response.prepare(request)
    for event in _stream_events(body):
        await response.write(sse_bytes(event))
    await response.write_eof()
    return response
