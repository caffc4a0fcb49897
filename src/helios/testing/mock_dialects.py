"""Which wire functions serve which path: the dialects of the mock server (OpenAI Chat
Completions and Responses, Anthropic Messages, Gemini generateContent, streamed or not)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from aiohttp import web

from helios.testing import (
    mock_llm_anthropic,
    mock_llm_gemini,
    mock_llm_openai,
    mock_llm_responses,
)
from helios.testing.mock_script import Conversation, Turn


@dataclass(frozen=True)
class Dialect:
    """The per-provider wire functions (see the mock_llm_* modules). `parse` takes the body
    and `strict_history`, `headers` (lower-case names) and `path_model` (the model named
    in the path, Gemini's way) as keywords."""

    name: str
    parse: Callable[..., Conversation]
    api_key: Callable[[Mapping[str, str]], str | None]
    error: Callable[..., web.Response]
    context_overflow: Callable[[Conversation], web.Response]
    malformed: Callable[..., web.Response]
    reply: Callable[[web.Request, Conversation, Turn, int], Awaitable[web.StreamResponse]]


async def read_json(request: web.Request) -> Any:
    """The body parsed as JSON, or None when it is not JSON at all."""
    raw = await request.read()
    try:
        return json.loads(raw)
    except ValueError:
        return None


def dialect(name: str, module: Any) -> Dialect:
    return Dialect(
        name=name,
        parse=module.parse_request,
        api_key=module.api_key,
        error=module.error_response,
        context_overflow=module.context_overflow_response,
        malformed=module.malformed_response,
        reply=module.reply,
    )


OPENAI = dialect("openai", mock_llm_openai)
ANTHROPIC = dialect("anthropic", mock_llm_anthropic)
RESPONSES = dialect("responses", mock_llm_responses)
GEMINI = dialect("gemini", mock_llm_gemini)
GEMINI_STREAM = replace(GEMINI, parse=mock_llm_gemini.parse_stream_request)
ROUTES = {
    "/v1/chat/completions": OPENAI,
    "/chat/completions": OPENAI,
    "/v1/messages": ANTHROPIC,
    "/messages": ANTHROPIC,
    "/v1/responses": RESPONSES,
    "/responses": RESPONSES,
    "/v1beta/models/{model}:generateContent": GEMINI,
    "/v1beta/models/{model}:streamGenerateContent": GEMINI_STREAM,
}
