"""Which wire functions serve which path: the OpenAI and Anthropic dialects of the mock server."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from helios.testing import mock_llm_anthropic, mock_llm_openai
from helios.testing.mock_script import Conversation, Turn


@dataclass(frozen=True)
class Dialect:
    """The per-provider wire functions (see mock_llm_openai / mock_llm_anthropic)."""

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
ROUTES = {
    "/v1/chat/completions": OPENAI,
    "/chat/completions": OPENAI,
    "/v1/messages": ANTHROPIC,
    "/messages": ANTHROPIC,
}
