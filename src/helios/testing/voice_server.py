"""A loopback voice server for tests and examples: every protocol the tool-call
adapters speak, on one 127.0.0.1 port, answering with scripted tool calls.

    with VoiceServer(calls=[{"name": "book_flight", "arguments": {...}}]) as server:
        OpenAISynthesizer(base_url=server.openai_base_url, api_key="k")
        OpenAIAgent(base_url=server.openai_base_url, api_key="k")
        OpenAIRealtimeAgent(base_url=server.openai_base_url, api_key="k")
        GoogleSynthesizer / GeminiAgent / GeminiLiveAgent(base_url=server.base_url, api_key="k")
        HttpAgent(server.http_agent_url); WebSocketAgent(server.ws_agent_url)

Routes: POST /v1/audio/speech, POST /v1/chat/completions, GET /v1/realtime (ws),
POST /v1beta/models/{model}:generateContent, GET /ws/…BidiGenerateContent (ws),
POST /agent and GET /ws/agent (a plain voice agent: `{"audio", "format"}` in,
`{"tool_calls": [...]}` out). Requests are checked the way the real services
check them (real WAV, non-empty buffers, the right mime types) and recorded
with the audio they carried. Faults come from `fail_sequence` (see loopback).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterable
from typing import Any

from aiohttp import WSMsgType, web

from helios.testing import voice_gemini, voice_openai
from helios.testing.loopback import CLOSE_AFTER_HANDSHAKE, Fault, LoopbackServer, Received
from helios.testing.voice_calls import DEFAULT_CALLS, Calls

LIVE_PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"


class VoiceServer(LoopbackServer):
    def __init__(
        self,
        calls: Calls | Callable[[Received], Calls] | None = None,
        *,
        fail_sequence: Iterable[Fault] = (),
        retry_after: float = 0.0,
        require_key: str | None = None,
        latency: float = 0.0,
        ws_messages: Callable[[Calls], list[Any]] | None = None,
    ) -> None:
        super().__init__(fail_sequence=fail_sequence, retry_after=retry_after,
                         require_key=require_key, latency=latency)  # fmt: skip
        self.calls = DEFAULT_CALLS if calls is None else calls
        #: how /ws/agent answers: a list of messages for the calls (default: one message)
        self.ws_messages = ws_messages or (lambda calls: [{"tool_calls": calls}])

    def calls_for(self, received: Received) -> Calls:
        return self.calls(received) if callable(self.calls) else list(self.calls)

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/v1"

    @property
    def http_agent_url(self) -> str:
        return f"{self.base_url}/agent"

    @property
    def ws_agent_url(self) -> str:
        return f"{self.ws_base_url}/ws/agent"

    def routes(self, app: web.Application) -> None:
        handlers: list[tuple[str, str, Callable[..., Any]]] = [
            ("POST", "/v1/audio/speech", voice_openai.speech),
            ("POST", "/v1/chat/completions", voice_openai.chat),
            ("GET", "/v1/realtime", voice_openai.realtime),
            ("POST", "/v1beta/models/{tail}", voice_gemini.generate_content),
            ("GET", LIVE_PATH, voice_gemini.live),
            ("POST", "/agent", http_agent),
            ("GET", "/ws/agent", ws_agent),
        ]
        for method, path, handler in handlers:
            app.router.add_route(method, path, self._guard(handler))

    def _guard(self, handler: Callable[..., Any]) -> Callable[[web.Request], Any]:
        async def guarded(request: web.Request) -> web.StreamResponse:
            faulted = await self.http_fault(request)
            if faulted is not None:
                return faulted
            try:
                response: web.StreamResponse = await handler(self, request)
            except (ValueError, KeyError, TypeError) as exc:  # a malformed request
                return web.json_response({"error": {"message": f"bad request: {exc}"}},
                                         status=400)  # fmt: skip
            return response

        return guarded


def _audio_field(body: Any) -> bytes:
    if not isinstance(body, dict) or not isinstance(body.get("audio"), str):
        raise ValueError("the body must be JSON with a base64 'audio' field")
    try:
        return base64.b64decode(body["audio"], validate=True)
    except binascii.Error:
        raise ValueError("'audio' is not base64") from None


async def http_agent(server: VoiceServer, request: web.Request) -> web.StreamResponse:
    body = await request.json()
    audio = _audio_field(body)
    received = server.record(request, body, audio)
    return web.json_response({"tool_calls": server.calls_for(received)})


async def ws_agent(server: VoiceServer, request: web.Request) -> web.StreamResponse:
    ws = web.WebSocketResponse(max_msg_size=0)
    await ws.prepare(request)
    if request.get(CLOSE_AFTER_HANDSHAKE):
        await ws.close(code=1011, message=b"injected close")
        return ws
    async for message in ws:
        if message.type == WSMsgType.BINARY:
            body: Any = {"bytes": len(message.data)}
            audio = bytes(message.data)
        elif message.type == WSMsgType.TEXT:
            body = json.loads(message.data)
            audio = _audio_field(body)
        else:
            break
        received = server.record(request, body, audio)
        for reply in server.ws_messages(server.calls_for(received)):
            await ws.send_str(json.dumps(reply))
    return ws
