"""The scripted tool calls of the loopback voice server, and what a protocol's
routes (`voice_openai`, `voice_gemini`) use of the server (`voice_server`): it
records each request and says which calls to answer it with."""

from __future__ import annotations

from typing import Any, Protocol

from aiohttp import web

from helios.testing.loopback import Received

Calls = list[dict[str, Any]]
DEFAULT_CALLS: Calls = [{"name": "book_flight", "arguments": {"from_city": "NYC", "to_city": "LA"}}]


class CallingServer(Protocol):
    """The server as a protocol's routes see it (`voice_server.VoiceServer`)."""

    def record(self, request: web.Request, body: Any, audio: bytes = b"") -> Received: ...

    def calls_for(self, received: Received) -> Calls: ...
