"""A model endpoint that answers 200 with JSON of the wrong shape (a broken proxy, a
hostile server) gives a typed transient error, never a crash of the episode."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web

from helios.models.errors import TransientError
from helios.testing.loopback import LoopbackServer

from .mock_llm_helpers import ask_once


class ShapeServer(LoopbackServer):
    """Answers every POST with the JSON it was given."""

    def __init__(self, reply: Any) -> None:
        super().__init__()
        self.reply = reply

    def routes(self, app: web.Application) -> None:
        async def answer(request: web.Request) -> web.Response:
            self.record(request, await request.json())
            return web.json_response(self.reply)

        app.router.add_post("/v1/chat/completions", answer)
        app.router.add_post("/v1/messages", answer)


BAD_REPLIES = [
    {"choices": "no list"},
    {"choices": [{"message": 5}]},
    {"choices": [{"message": {"tool_calls": [{"function": 7}]}}]},
    {"content": [1, 2]},
    {"content": [{"type": "tool_use", "input": {}, "id": None, "name": None}], "usage": []},
    ["not", "an", "object"],
    {},
]


@pytest.mark.parametrize("api", ["openai", "anthropic"])
@pytest.mark.parametrize("reply", BAD_REPLIES, ids=range(len(BAD_REPLIES)))
def test_a_reply_of_the_wrong_shape_is_a_transient_error(api: str, reply: Any) -> None:

    with ShapeServer(reply) as server:
        error = asyncio.run(ask_once(server.base_url, api))
        assert server.received, "the request never reached the server"
    if api == "anthropic" and reply == BAD_REPLIES[4]:
        assert not isinstance(error, Exception), error  # a readable (if odd) tool call
        return
    assert isinstance(error, TransientError), repr(error)
    assert "malformed response" in str(error)
