"""WebSocketAgent: send the audio over a WebSocket, collect the answer's messages."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp

from helios.models.errors import TransientError
from helios.toolcalls.adapters.http import audio_payload
from helios.toolcalls.parsers.mapping import JsonResponseParser
from helios.toolcalls.protocols import ResponseParser
from helios.toolcalls.transport import (
    MAX_ANSWER_BYTES,
    SessionHolder,
    decode_ws_message,
    ws_closed_error,
)
from helios.toolcalls.types import AgentResponse, Audio


class WebSocketAgent:
    """Sends one message (JSON with base64 audio, raw bytes, or `on_send(audio)`),
    then reads messages until `is_complete(messages)` says so (without it, the
    first message is the answer), `max_messages`, or `response_timeout`.

    The messages (one, or a list; or `aggregate(messages)`) go to `parser`.
    A connection that fails, or closes or times out before any message, is a
    transient error and is retried by the engine.
    """

    def __init__(
        self,
        url: str,
        parser: ResponseParser | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        send_bytes: bool = False,
        audio_field: str = "audio",
        format_field: str = "format",
        response_timeout: float = 30.0,
        max_messages: int = 100,
        on_send: Callable[[Audio], str | bytes] | None = None,
        is_complete: Callable[[list[Any]], bool] | None = None,
        aggregate: Callable[[list[Any]], Any] | None = None,
        open_timeout: float = 10.0,
    ) -> None:
        self.url = url
        self.parser: ResponseParser = parser if parser is not None else JsonResponseParser()
        self.send_bytes = send_bytes
        self.audio_field = audio_field
        self.format_field = format_field
        self.response_timeout = response_timeout
        self.max_messages = max_messages
        self.on_send = on_send
        self.is_complete = is_complete
        self.aggregate = aggregate
        self.open_timeout = open_timeout
        self._http = SessionHolder(open_timeout + response_timeout, headers)

    def __repr__(self) -> str:
        return f"WebSocketAgent({self.url!r}, parser={self.parser!r})"

    def _message(self, audio: Audio) -> str | bytes:
        if self.on_send is not None:
            return self.on_send(audio)
        if self.send_bytes:
            return audio.data
        return json.dumps(audio_payload(audio, self.audio_field, self.format_field))

    async def run(self, audio: Audio) -> AgentResponse:
        timeout = aiohttp.ClientWSTimeout(ws_receive=self.response_timeout, ws_close=5.0)
        connect = self._http.get().ws_connect(self.url, timeout=timeout,
                                              max_msg_size=MAX_ANSWER_BYTES)  # fmt: skip
        async with connect as ws:
            message = self._message(audio)
            if isinstance(message, bytes):
                await ws.send_bytes(message)
            else:
                await ws.send_str(message)
            messages = await self._collect(ws)
        raw = (
            self.aggregate(messages)
            if self.aggregate
            else (messages[0] if len(messages) == 1 else messages)
        )
        return self.parser.parse(raw)

    async def _collect(self, ws: aiohttp.ClientWebSocketResponse) -> list[Any]:
        messages: list[Any] = []
        try:
            async for frame in ws:
                if frame.type not in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY):
                    break
                messages.append(decode_ws_message(frame))
                if self.is_complete is None or self.is_complete(messages):
                    break
                if len(messages) >= self.max_messages:
                    break
        except TimeoutError:
            if not messages:
                raise TransientError(
                    f"{self.url}: no answer within {self.response_timeout:g}s"
                ) from None
            return messages  # what arrived before the timeout is the answer
        if not messages:
            close = aiohttp.WSMessage(aiohttp.WSMsgType.CLOSE, ws.close_code, None)
            raise ws_closed_error(close, self.url)
        return messages

    async def aclose(self) -> None:
        await self._http.aclose()
