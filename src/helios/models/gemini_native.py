"""Gemini's own API: POST /v1beta/models/{model}:generateContent, with `computer_use`.

Gemini's OpenAI-compatible endpoint (the `gemini/` provider's usual wire) has no
computer use; this client speaks the native one. The computer-use tool
(`{"computerUse": {"environment": "ENVIRONMENT_BROWSER"}}`) makes the model call
predefined functions (click_at, type_text_at, … on a 0–999 grid), which arrive as
ordinary `functionCall` parts: ToolCall(name=<the function>, arguments=<its args>).
A call's `safety_decision` stays in its arguments, for the computer provider to
judge.

A message of role "tool" answers a call with a `functionResponse` part: its
`response` is `provider_state["response"]` (the computer provider puts the page's
`url` there, and `safety_acknowledgement` for a call that asked for confirmation)
plus the message's text under "output" (or "error"); its screenshot goes inside the
function response, as `parts: [{"inlineData": …}]`, as Gemini's computer use
expects. Only the last `keep_images` screenshots are sent (`models/images.py`).

The model's parts are kept verbatim in `provider_state["parts"]` and sent back as
they came: they carry the thought signatures that Gemini requires back with the
function calls they belong to.
"""

from __future__ import annotations

import json
import uuid
from typing import Any
from urllib.parse import quote

from helios.models.base import GenerationConfig, ImageRef, Message, ModelResponse, ToolCall
from helios.models.errors import TransientError
from helios.models.http import EndpointClient
from helios.models.images import OMITTED, ImageWindow, b64, image_window, split_kept, wire_key
from helios.models.reply_values import parts_response, token_count
from helios.models.routing import GEMINI_NATIVE_URL, ModelSpec
from helios.usage import Usage

WIRE = "gemini"
API_VERSION = "v1beta"
#: ids Helios gives calls that came without one (the Gemini API's usually do):
#: they are not sent back
SYNTHETIC_ID = "helios-gc-"
#: thinking budgets per reasoning effort (tokens); "none" turns thinking off
THINKING_BUDGET = {"none": 0, "minimal": 512, "low": 1024, "medium": 8192, "high": 24576,
                   "xhigh": 32768}  # fmt: skip
FINISH_REASONS = {"STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter",
                  "RECITATION": "content_filter", "BLOCKLIST": "content_filter",
                  "PROHIBITED_CONTENT": "content_filter", "SPII": "content_filter",
                  "IMAGE_SAFETY": "content_filter"}  # fmt: skip


def _inline(image: ImageRef) -> dict[str, Any]:
    return {"inlineData": {"mimeType": image.media_type, "data": b64(image)}}


def _user_parts(message: Message, kept: int) -> list[dict[str, Any]]:
    omitted, sent = split_kept(message, kept)
    parts: list[dict[str, Any]] = [{"text": message.content}] if message.content else []
    parts += [{"text": OMITTED}] * omitted
    return parts + [_inline(i) for i in sent]


def _model_parts(message: Message) -> list[dict[str, Any]]:
    state = message.provider_state
    if isinstance(state, dict) and isinstance(state.get("parts"), list):
        own: list[dict[str, Any]] = state["parts"]
        return own  # this client's own: signatures and all, as they came
    parts: list[dict[str, Any]] = [{"text": message.content}] if message.content else []
    for call in message.tool_calls:
        function: dict[str, Any] = {"name": call.name, "args": call.arguments or {}}
        if not call.id.startswith(SYNTHETIC_ID):
            function["id"] = call.id
        parts.append({"functionCall": function})
    return parts


def _response_part(message: Message, kept: int, name: str) -> dict[str, Any]:
    state = message.provider_state if isinstance(message.provider_state, dict) else {}
    response = dict(state.get("response") or {})
    if message.content:
        response["error" if message.is_error else "output"] = message.content
    function: dict[str, Any] = {"name": name, "response": response}
    call_id = message.tool_call_id or ""
    if call_id and not call_id.startswith(SYNTHETIC_ID):
        function["id"] = call_id
    _, sent = split_kept(message, kept)
    if sent:  # an omitted screenshot is simply not there, as in Google's own agent
        function["parts"] = [_inline(i) for i in sent]
    return {"functionResponse": function}


def _parts(message: Message, kept: int, names: dict[str, str]) -> list[dict[str, Any]]:
    """The parts of one message, converted once (per number of its images sent)
    and cached."""
    key = wire_key(WIRE, kept, message)
    cached = message.wire.get(key)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    if message.role == "assistant":
        parts = _model_parts(message)
    elif message.role == "tool":
        name = names.get(message.tool_call_id or "", "")
        parts = [_response_part(message, kept, name)]
    else:
        parts = _user_parts(message, kept)
    message.wire[key] = parts
    return parts


def assemble(messages: list[Message], window: ImageWindow) -> list[dict[str, Any]]:
    """The request's contents: roles user and model, consecutive ones merged (a run of
    function responses is one user turn). System messages go to systemInstruction."""
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for index, message in enumerate(messages):
        if message.role == "system":
            continue
        if message.role == "assistant":
            names.update((c.id, c.name) for c in message.tool_calls)
        role = "model" if message.role == "assistant" else "user"
        parts = _parts(message, window.kept(index, message), names)
        if contents and contents[-1]["role"] == role:
            contents[-1] = {"role": role, "parts": [*contents[-1]["parts"], *parts]}
        else:
            contents.append({"role": role, "parts": parts})
    return contents


def wire_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tools as Gemini declares them; Chat Completions function tools are gathered
    into one `functionDeclarations` tool."""
    native: list[dict[str, Any]] = []
    declarations: list[dict[str, Any]] = []
    for tool in tools:
        function = tool.get("function")
        if tool.get("type") == "function" and isinstance(function, dict):
            declarations.append({k: function[k] for k in ("name", "description", "parameters")
                                 if k in function})  # fmt: skip
        else:
            native.append(tool)
    return native + ([{"functionDeclarations": declarations}] if declarations else [])


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage(calls=1)
    prompt = token_count(raw.get("promptTokenCount")) + token_count(
        raw.get("toolUsePromptTokenCount")
    )
    cached = token_count(raw.get("cachedContentTokenCount"))
    thoughts = token_count(raw.get("thoughtsTokenCount"))
    return Usage(
        input_tokens=max(0, prompt - cached),
        cache_read_tokens=cached,
        # thoughts are billed as output, as OpenAI's reasoning tokens are
        output_tokens=token_count(raw.get("candidatesTokenCount")) + thoughts,
        reasoning_tokens=thoughts,
        calls=1,
    )


def _call(part: dict[str, Any]) -> ToolCall:
    function = part["functionCall"]
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise ValueError("a functionCall without a name")
    args = function.get("args")
    arguments = args if isinstance(args, dict) else ({} if args is None else None)
    call_id = function.get("id")
    if not isinstance(call_id, str) or not call_id:
        call_id = SYNTHETIC_ID + uuid.uuid4().hex[:16]
    return ToolCall(call_id, function["name"], arguments, json.dumps(args))


class GeminiNativeModel(EndpointClient):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__(spec, GEMINI_NATIVE_URL, {"x-goog-api-key": spec.api_key or ""})
        model = spec.model.removeprefix("models/")
        self.path = f"/{API_VERSION}/models/{quote(model, safe='.-_')}:generateContent"

    def _request(
        self, messages: list[Message], tools: list[dict[str, Any]], config: GenerationConfig
    ) -> dict[str, Any]:
        window = image_window(messages, config.keep_images)
        request: dict[str, Any] = {"contents": assemble(messages, window)}
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        if system:
            request["systemInstruction"] = {"parts": [{"text": system}]}
        if tools:
            request["tools"] = wire_tools(tools)
        generation: dict[str, Any] = {}
        if not config.omit_max_tokens:
            generation["maxOutputTokens"] = config.max_tokens
        if config.temperature is not None:
            generation["temperature"] = config.temperature
        budget = THINKING_BUDGET.get(config.reasoning_effort or "")
        if budget is not None:
            generation["thinkingConfig"] = {"thinkingBudget": budget, "includeThoughts": budget > 0}
        if generation:
            request["generationConfig"] = generation
        return request

    def _parse(self, response: dict[str, Any]) -> ModelResponse:
        candidates = response.get("candidates")
        if not candidates:
            feedback = response.get("promptFeedback")
            if isinstance(feedback, dict) and feedback.get("blockReason"):
                # The prompt itself was blocked: an answer with nothing in it.
                message = Message(role="assistant", content="")
                return ModelResponse(message, _usage(response.get("usageMetadata")),
                                     "content_filter", self.name)  # fmt: skip
            raise TransientError("malformed response: no candidates")
        candidate = candidates[0]
        content = candidate.get("content") or {}
        parts = content.get("parts") or []
        if not isinstance(parts, list):
            raise TransientError("malformed response: parts is not a list")
        texts: list[str] = []
        thoughts: list[str] = []
        calls: list[ToolCall] = []
        for part in parts:
            if "functionCall" in part:
                calls.append(_call(part))
            elif isinstance(part.get("text"), str):
                (thoughts if part.get("thought") else texts).append(part["text"])
        reason = str(candidate.get("finishReason") or "STOP")
        if reason == "MALFORMED_FUNCTION_CALL" and not calls:
            # Google's own agent asks again; so does Helios's retry layer.
            raise TransientError("malformed response: the model made a malformed function call")
        finish = "tool_calls" if calls else FINISH_REASONS.get(reason, reason.lower())
        return parts_response(
            texts, thoughts, calls, {"parts": parts},
            usage=_usage(response.get("usageMetadata")),
            finish_reason=finish,
            model=str(response.get("modelVersion") or self.name),
        )  # fmt: skip
