"""Gemini adapters, speaking the protocols directly over aiohttp (no google SDK):

- GeminiAgent: `POST /v1beta/models/{model}:generateContent` with the audio inline;
- GeminiLiveAgent: the Live API WebSocket (`BidiGenerateContent`): `setup`, then
  the audio as PCM16 16 kHz `realtimeInput` between `activityStart` and
  `activityEnd` (automatic activity detection off, so the turn is explicit),
  then `toolCall` messages until the model waits for tool responses or ends its turn.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any
from urllib.parse import quote

import aiohttp

from helios.models.errors import AuthError, BadRequestError, ModelError, TransientError
from helios.toolcalls.adapters.tools import gemini_tools
from helios.toolcalls.audio import LIVE_RATE, to_pcm16, to_wav
from helios.toolcalls.parsers.gemini import GeminiResponseParser
from helios.toolcalls.synthesizers.google import GEMINI_BASE_URL, gemini_key
from helios.toolcalls.transport import (
    MAX_ANSWER_BYTES,
    SessionHolder,
    decode_ws_message,
    read_json_response,
)
from helios.toolcalls.types import AgentResponse, Audio

LIVE_PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
CHUNK = 32_000
_MIME = {"wav": "audio/wav", "mp3": "audio/mp3", "ogg": "audio/ogg", "flac": "audio/flac",
         "aac": "audio/aac"}  # fmt: skip


def inline_audio(audio: Audio) -> dict[str, Any]:
    if audio.format not in _MIME:
        audio = to_wav(audio)
    data = base64.b64encode(audio.data).decode("ascii")
    return {"inlineData": {"mimeType": _MIME[audio.format], "data": data}}


def _system(text: str | None) -> dict[str, Any] | None:
    return {"parts": [{"text": text}]} if text else None


class GeminiAgent:
    def __init__(
        self,
        *,
        model: str = "gemini-2.5-flash",
        tools: list[Any] | None = None,
        system_instruction: str | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        generation_config: dict[str, Any] | None = None,
        timeout: float = 60.0,
    ) -> None:
        key = gemini_key(api_key, "GeminiAgent")
        self.model = model
        self.tools = gemini_tools(tools)
        self.system_instruction = system_instruction
        self.generation_config = dict(generation_config or {})
        self.base_url = (base_url or GEMINI_BASE_URL).rstrip("/")
        self._http = SessionHolder(timeout, {"x-goog-api-key": key})
        self._parser = GeminiResponseParser()

    def __repr__(self) -> str:
        return f"GeminiAgent(model={self.model!r})"

    def request(self, audio: Audio) -> dict[str, Any]:
        body: dict[str, Any] = {"contents": [{"role": "user", "parts": [inline_audio(audio)]}]}
        if self.tools:
            body["tools"] = self.tools
        system = _system(self.system_instruction)
        if system:
            body["systemInstruction"] = system
        if self.generation_config:
            body["generationConfig"] = self.generation_config
        return body

    async def run(self, audio: Audio) -> AgentResponse:
        url = f"{self.base_url}/v1beta/models/{self.model}:generateContent"
        async with self._http.get().post(url, json=self.request(audio)) as response:
            raw = await read_json_response(response, url)
        return self._parser.parse(raw)

    async def aclose(self) -> None:
        await self._http.aclose()


def live_close_error(code: int | None, reason: str) -> ModelError:
    text = f"Gemini Live closed the connection ({code}): {reason}".strip()
    if "api key" in reason.lower() or "permission" in reason.lower():
        return AuthError(text)
    if code in (1007, 1008):  # invalid payload / policy: the request itself is wrong
        return BadRequestError(text)
    return TransientError(text)


class GeminiLiveAgent:
    def __init__(
        self,
        *,
        model: str = "gemini-live-2.5-flash-preview",
        tools: list[Any] | None = None,
        system_instruction: str | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        response_timeout: float = 30.0,
        setup: dict[str, Any] | None = None,
    ) -> None:
        """`setup` is merged into the `setup` message (e.g. a speech config)."""
        self.key = gemini_key(api_key, "GeminiLiveAgent")
        self.model = model
        self.tools = gemini_tools(tools)
        self.system_instruction = system_instruction
        self.response_timeout = response_timeout
        self.setup_extra = dict(setup or {})
        root = (base_url or GEMINI_BASE_URL).rstrip("/")
        if root.startswith("http"):
            root = "ws" + root[len("http") :]
        # The Live endpoint takes the key as a query parameter (redacted from errors).
        self.url = f"{root}{LIVE_PATH}?key={quote(self.key)}"
        self._http = SessionHolder(response_timeout + 10)
        self._parser = GeminiResponseParser()

    def __repr__(self) -> str:
        return f"GeminiLiveAgent(model={self.model!r})"

    def setup_message(self) -> dict[str, Any]:
        name = self.model if self.model.startswith("models/") else f"models/{self.model}"
        setup: dict[str, Any] = {
            "model": name,
            "generationConfig": {"responseModalities": ["TEXT"]},
            "realtimeInputConfig": {"automaticActivityDetection": {"disabled": True}},
        }
        if self.tools:
            setup["tools"] = self.tools
        system = _system(self.system_instruction)
        if system:
            setup["systemInstruction"] = system
        setup.update(self.setup_extra)
        return {"setup": setup}

    async def run(self, audio: Audio) -> AgentResponse:
        pcm = await asyncio.to_thread(to_pcm16, audio, LIVE_RATE)
        session = self._http.get()
        async with session.ws_connect(self.url, max_msg_size=MAX_ANSWER_BYTES) as ws:
            async with asyncio.timeout(self.response_timeout):
                await ws.send_str(json.dumps(self.setup_message()))
                await self._expect_setup_complete(ws)
                await self._send_audio(ws, pcm)
                messages = await self._collect(ws)
        return self._parser.parse(messages)

    async def _send_audio(self, ws: aiohttp.ClientWebSocketResponse, pcm: bytes) -> None:
        await ws.send_str(json.dumps({"realtimeInput": {"activityStart": {}}}))
        mime = f"audio/pcm;rate={LIVE_RATE}"
        for start in range(0, len(pcm), CHUNK):
            data = base64.b64encode(pcm[start : start + CHUNK]).decode("ascii")
            message = {"realtimeInput": {"audio": {"data": data, "mimeType": mime}}}
            await ws.send_str(json.dumps(message))
        await ws.send_str(json.dumps({"realtimeInput": {"activityEnd": {}}}))

    async def _next(self, ws: aiohttp.ClientWebSocketResponse) -> dict[str, Any]:
        frame = await ws.receive()
        if frame.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSING,
                          aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):  # fmt: skip
            raise live_close_error(ws.close_code, str(frame.extra or ""))
        message = decode_ws_message(frame)
        if not isinstance(message, dict):
            raise TransientError("Gemini Live sent a message that is not JSON")
        if "goAway" in message:
            raise TransientError("Gemini Live is going away (goAway)")
        return message

    async def _expect_setup_complete(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        message = await self._next(ws)
        if "setupComplete" not in message:
            raise BadRequestError(f"Gemini Live answered setup with {sorted(message)}")

    async def _collect(self, ws: aiohttp.ClientWebSocketResponse) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        while True:
            message = await self._next(ws)
            messages.append(message)
            if "toolCall" in message:
                return messages  # the model now waits for tool responses
            content = message.get("serverContent") or {}
            if content.get("turnComplete"):
                return messages

    async def aclose(self) -> None:
        await self._http.aclose()
