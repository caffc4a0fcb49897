"""OpenAI Responses API (POST /v1/responses) for the mock model server, with the computer
tool.

Checked as the real API does: `model` and `input`; every `computer_call` and
`function_call` in the input answered by an output with its call_id, a computer call's
output carrying a screenshot and acknowledging every pending safety check of its call;
the ids of the model's items; and each computer call that came with a reasoning item
sent back with it (the reasoning item of its turn, by id). The model's turns in `input`
are counted as runs of its items. The computer tool: `mock_computer_responses`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

from aiohttp import web

from helios.testing import mock_llm_openai
from helios.testing.mock_computer_responses import check_tools, gui_output
from helios.testing.mock_gui import data_url_payload, is_base64
from helios.testing.mock_script import (
    Conversation,
    InvalidRequest,
    Turn,
    Usage,
    prompt_tokens_of,
    required_model,
    split_chunks,
    sse_bytes,
    usage_for,
)

CONTEXT_LIMIT = 128_000
_MODEL_ITEMS = frozenset({"reasoning", "computer_call", "function_call"})
_OUTPUTS = {"computer_call_output": "computer_call", "function_call_output": "function_call"}
#: how the ids of the model's items begin (the API refuses others)
_ID_PREFIXES = {"computer_call": "cu", "function_call": "fc", "reasoning": "rs", "message": "msg"}

api_key = mock_llm_openai.api_key
error_response = mock_llm_openai.error_response


def context_overflow_response(conv: Conversation) -> web.Response:
    message = ("Your input exceeds the context window of this model. Please adjust your input "
               "and try again.")  # fmt: skip
    body = {"error": {"message": message, "type": "invalid_request_error", "param": "input",
                      "code": "context_length_exceeded"}}  # fmt: skip
    return web.json_response(body, status=400)


def malformed_response(*, stream: bool) -> web.Response:
    """A 200 whose body is cut off mid-JSON, like a proxy that dropped the tail."""
    broken = '{"id": "resp_broken", "object": "response", "status": "completed", "output": [{'
    if stream:
        return web.Response(
            body=sse_bytes('{"type": "response.created", "response": {', "response.created"),
            content_type="text/event-stream",
        )
    return web.Response(text=broken, content_type="application/json")


# ----- the request ---------------------------------------------------------------------------


def _is_model_item(item: dict[str, Any]) -> bool:
    kind = item.get("type")
    return kind in _MODEL_ITEMS or (kind in (None, "message") and item.get("role") == "assistant")


def _items(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    raw = body.get("input")
    if isinstance(raw, str):
        return [{"type": "message", "role": "user", "content": raw}]
    if not isinstance(raw, list) or not raw:
        raise InvalidRequest("Missing required parameter: 'input'.")
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise InvalidRequest(f"Invalid type for 'input[{i}]': expected an object.")
        kind = item.get("type", "message")
        if kind == "message" and item.get("role") not in ("user", "assistant", "system",
                                                           "developer"):  # fmt: skip
            raise InvalidRequest(f"Invalid value for 'input[{i}].role'.")
        if kind not in ("message", "reasoning", *_OUTPUTS, *_OUTPUTS.values()):
            raise InvalidRequest(f"Invalid value: '{kind}'. Supported values are: 'message', "
                                 "'reasoning', 'computer_call', 'computer_call_output', "
                                 "'function_call' and 'function_call_output'.")  # fmt: skip
    return raw


def _screenshot_payload(item: dict[str, Any], i: int) -> str:
    output = item.get("output")
    if not isinstance(output, dict) or output.get("type") != "computer_screenshot":
        raise InvalidRequest(f"Missing required parameter: 'input[{i}].output'; a computer "
                             "call's output is a computer_screenshot.")  # fmt: skip
    payload = data_url_payload(output.get("image_url"))
    if payload is None or not is_base64(payload):
        raise InvalidRequest(f"Invalid 'input[{i}].output.image_url': expected a base64 "
                             "image data URL.")  # fmt: skip
    return payload


def _image_parts(content: object, where: str) -> list[str]:
    """The base64 of the input_image parts of a content list (checked)."""
    images: list[str] = []
    for j, part in enumerate(content if isinstance(content, list) else []):
        if isinstance(part, dict) and part.get("type") == "input_image":
            payload = data_url_payload(part.get("image_url"))
            if payload is None or not is_base64(payload):
                raise InvalidRequest(f"Invalid '{where}[{j}].image_url': expected a base64 "
                                     "image data URL.")  # fmt: skip
            images.append(payload)
    return images


class _History:
    """One pass over the input: calls answered, safety checks acknowledged, reasoning
    items present, the model's turns and the last full screenshot."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.calls: dict[str, dict[str, Any]] = {}
        self.answered: set[str] = set()
        self.reasoning: set[str] = set()
        self.turns = 0
        self.screenshot: str | None = None
        previous_model = False
        for i, item in enumerate(items):
            model = _is_model_item(item)
            self.turns += model and not previous_model
            previous_model = model
            self._item(item, i)

    def _item(self, item: dict[str, Any], i: int) -> None:
        kind = item.get("type", "message")
        mine = kind != "message" or item.get("role") == "assistant"
        prefix = _ID_PREFIXES.get(kind) if mine else None
        item_id = item.get("id")
        if prefix and item_id is not None and not str(item_id).startswith(prefix):
            raise InvalidRequest(f"Invalid 'input[{i}].id': '{item_id}'. Expected an ID that "
                                 f"begins with '{prefix}'.")  # fmt: skip
        if kind == "reasoning":
            self.reasoning.add(str(item.get("id")))
        elif kind in _OUTPUTS.values():
            self._call(item, i)
        elif kind in _OUTPUTS:
            self._output(item, i, kind)
        elif item.get("role") == "user":
            images = _image_parts(item.get("content"), f"input[{i}].content")
            self.screenshot = images[-1] if images else self.screenshot

    def _call(self, item: dict[str, Any], i: int) -> None:
        call_id = item.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            raise InvalidRequest(f"Missing required parameter: 'input[{i}].call_id'.")
        item_id = str(item.get("id") or "")
        if item_id.startswith("cu_mock_"):  # one of ours: it came with a reasoning item
            reasoning = "rs_mock_" + item_id.removeprefix("cu_mock_").split("_")[0]
            if reasoning not in self.reasoning:
                raise InvalidRequest(
                    f"Item '{item_id}' of type 'computer_call' was provided "
                    f"without its required 'reasoning' item: '{reasoning}'."
                )
        self.calls[call_id] = item

    def _output(self, item: dict[str, Any], i: int, kind: str) -> None:
        call_id = str(item.get("call_id"))
        call = self.calls.get(call_id)
        if call is None or call.get("type") != _OUTPUTS[kind]:
            raise InvalidRequest(f"No tool call found for {kind.replace('_', ' ')} with "
                                 f"call_id {call_id}.")  # fmt: skip
        self.answered.add(call_id)
        if kind == "computer_call_output":
            self.screenshot = _screenshot_payload(item, i)
            self._acknowledged(call, item, i)
        elif call.get("name") != "zoom":  # a zoom's image is a crop
            images = _image_parts(item.get("output"), f"input[{i}].output")
            self.screenshot = images[-1] if images else self.screenshot

    @staticmethod
    def _acknowledged(call: dict[str, Any], item: dict[str, Any], i: int) -> None:
        pending = {str(c.get("id")) for c in call.get("pending_safety_checks") or []
                   if isinstance(c, dict)}  # fmt: skip
        given = item.get("acknowledged_safety_checks") or []
        acknowledged = {str(c.get("id")) for c in given if isinstance(c, dict)}
        missing = sorted(pending - acknowledged)
        if missing:
            raise InvalidRequest(f"input[{i}]: the computer call's pending safety checks were "
                                 f"not acknowledged: {', '.join(missing)}.")  # fmt: skip

    def unanswered(self) -> list[str]:
        return [c for c in self.calls if c not in self.answered]


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(
        str(p.get("text") or "")
        for p in content
        if isinstance(p, dict) and p.get("type") in ("input_text", "output_text")
    )


def _opening(items: list[dict[str, Any]]) -> list[str]:
    """The texts of the messages before the model's first item: the prompt, whether
    it comes as one user message or, as Codex sends it, as developer and user
    messages (its instructions, the environment, then the task)."""
    texts: list[str] = []
    for item in items:
        if _is_model_item(item):
            break
        if item.get("type", "message") == "message":
            texts.append(_text(item.get("content")))
    return texts


def parse_request(
    body: Mapping[str, Any], *, strict_history: bool, headers: Mapping[str, str] | None = None,
    path_model: str | None = None,
) -> Conversation:  # fmt: skip
    """Validate the request as far as the real API would and reduce it to a Conversation."""
    model = required_model(body, "Missing required parameter: 'model'.")
    items = _items(body)
    context = check_tools(body)
    history = _History(items)
    unanswered = history.unanswered()
    if strict_history and unanswered:
        raise InvalidRequest(f"No tool output found for call with call_id {unanswered[0]}.")
    given = body.get("instructions")
    instructions = given if isinstance(given, str) else ""
    return Conversation(
        model=model,
        haystack="\n".join([instructions, *_opening(items)]),
        assistant_turns=history.turns,
        prompt_tokens=prompt_tokens_of(instructions, items, body.get("tools")),
        stream=bool(body.get("stream")),
        screenshot=history.screenshot,
        context=context,
    )


# ----- the reply -----------------------------------------------------------------------------


def _message(text: str, t: int) -> dict[str, Any]:
    return {"type": "message", "id": f"msg_mock_{t}", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}  # fmt: skip


def _usage(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    }


def response_body(conv: Conversation, turn: Turn, t: int) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    answer = ""
    if turn.reply_gui:
        calls, answer = gui_output(conv, turn, t)
    calls += [{"type": "function_call", "id": f"fc_mock_{t}_s{i}",
               "call_id": f"call_mock_{t}_s{i}", "name": c.name,
               "arguments": c.arguments_json(allow_bad=True), "status": "completed"}
              for i, c in enumerate(turn.reply_tool_calls)]  # fmt: skip
    if turn.reply_reasoning is not None or any(c["type"] == "computer_call" for c in calls):
        thought = turn.reply_reasoning or "Looking at the screen."
        summary = [{"type": "summary_text", "text": thought}]
        output.append({"type": "reasoning", "id": f"rs_mock_{t}", "summary": summary,
                       "encrypted_content": f"gAAAA-mock-{t}"})  # fmt: skip
    text = "\n".join(x for x in (turn.reply_text, answer) if x)
    if text or not calls:
        output.append(_message(text, t))
    output += calls
    incomplete = turn.truncated
    return {
        "id": f"resp_mock_{t}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "incomplete" if incomplete else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "error": None,
        "model": conv.model,
        "output": output,
        "usage": _usage(usage_for(turn, conv.prompt_tokens)),
    }


def _item_events(index: int, item: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """output_item.added, the item's deltas and output_item.done, for one finished item."""
    kind, item_id = item["type"], item.get("id")
    where = {"item_id": item_id, "output_index": index}
    if kind == "message":
        yield {"type": "response.output_item.added", "output_index": index,
               "item": {**item, "status": "in_progress", "content": []}}  # fmt: skip
        for c, part in enumerate(item["content"]):
            text = part["text"]
            yield {"type": "response.content_part.added", **where, "content_index": c,
                   "part": {**part, "text": ""}}  # fmt: skip
            for piece in split_chunks(text):
                yield {"type": "response.output_text.delta", **where, "content_index": c,
                       "delta": piece, "logprobs": []}  # fmt: skip
            yield {"type": "response.output_text.done", **where, "content_index": c,
                   "text": text, "logprobs": []}  # fmt: skip
            yield {"type": "response.content_part.done", **where, "content_index": c,
                   "part": part}  # fmt: skip
    elif kind == "function_call":
        yield {"type": "response.output_item.added", "output_index": index,
               "item": {**item, "status": "in_progress", "arguments": ""}}  # fmt: skip
        for piece in split_chunks(item["arguments"]):
            yield {"type": "response.function_call_arguments.delta", **where, "delta": piece}
        yield {"type": "response.function_call_arguments.done", **where,
               "arguments": item["arguments"]}  # fmt: skip
    elif kind == "reasoning":
        yield {"type": "response.output_item.added", "output_index": index,
               "item": {**item, "summary": []}}  # fmt: skip
        for s, part in enumerate(item["summary"]):
            at = {**where, "summary_index": s}
            yield {"type": "response.reasoning_summary_part.added", **at,
                   "part": {**part, "text": ""}}  # fmt: skip
            for piece in split_chunks(part["text"]):
                yield {"type": "response.reasoning_summary_text.delta", **at, "delta": piece}
            yield {"type": "response.reasoning_summary_text.done", **at, "text": part["text"]}
            yield {"type": "response.reasoning_summary_part.done", **at, "part": part}
    else:  # a computer call comes whole
        yield {"type": "response.output_item.added", "output_index": index,
               "item": {**item, "status": "in_progress"}}  # fmt: skip
    yield {"type": "response.output_item.done", "output_index": index, "item": item}


def stream_events(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The events of a streamed response, as the API sends them: created, in_progress,
    each output item with its deltas, then completed (or incomplete) with the usage;
    each numbered by `sequence_number`."""
    start = {**body, "status": "in_progress", "output": [], "usage": None,
             "incomplete_details": None}  # fmt: skip
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": start},
        {"type": "response.in_progress", "response": start},
    ]
    for index, item in enumerate(body["output"]):
        events.extend(_item_events(index, item))
    ending = "response.incomplete" if body["status"] == "incomplete" else "response.completed"
    events.append({"type": ending, "response": body})
    for number, event in enumerate(events):
        yield {**event, "sequence_number": number}


async def reply(
    request: web.Request, conv: Conversation, turn: Turn, turn_index: int
) -> web.StreamResponse:
    body = response_body(conv, turn, turn_index)
    if not conv.stream:
        return web.json_response(body)
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    for event in stream_events(body):
        await response.write(sse_bytes(event, event["type"]))
    await response.write_eof()
    return response
