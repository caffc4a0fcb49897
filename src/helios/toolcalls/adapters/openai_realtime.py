"""OpenAIRealtimeAgent: the Realtime API over an aiohttp WebSocket.

One connection per run: `session.update` (tools, instructions, text output, no
server VAD), the audio as PCM16 24 kHz in `input_audio_buffer.append` chunks,
`input_audio_buffer.commit`, `response.create`; then every
`response.function_call_arguments.done` until `response.done`.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from typing import Any
from urllib.parse import quote

import aiohttp

from helios.models.base import ToolCall
from helios.models.errors import (
    AuthError,
    BadRequestError,
    ModelError,
    RateLimitError,
    TransientError,
)
from helios.toolcalls.adapters.tools import realtime_tools
from helios.toolcalls.audio import REALTIME_RATE, to_pcm16
from helios.toolcalls.parsers.common import arguments_dict
from helios.toolcalls.synthesizers.openai import OPENAI_BASE_URL, openai_key
from helios.toolcalls.transport import (
    MAX_ANSWER_BYTES,
    SessionHolder,
    decode_ws_message,
    ws_closed_error,
)
from helios.toolcalls.types import AgentResponse, Audio, new_call

#: bytes of PCM per append event (the API caps an event at 15 MiB)
CHUNK = 96_000


def realtime_error(event: dict[str, Any]) -> ModelError:
    error = event.get("error") or {}
    code = str(error.get("code") or "")
    kind = str(error.get("type") or "")
    message = f"realtime error {code or kind}: {error.get('message', '')}"
    if "rate_limit" in code or "rate_limit" in kind:
        return RateLimitError(message)
    if "api_key" in code or kind == "authentication_error":
        return AuthError(message)
    if kind == "server_error" or code == "server_error":
        return TransientError(message)
    return BadRequestError(message)


def ws_url(base_url: str, model: str) -> str:
    root = base_url.rstrip("/")
    if root.startswith("http"):
        root = "ws" + root[len("http") :]
    return f"{root}/realtime?model={quote(model)}"


class OpenAIRealtimeAgent:
    def __init__(
        self,
        *,
        model: str = "gpt-realtime",
        tools: list[Any] | None = None,
        instructions: str | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        client: Any = None,
        response_timeout: float = 30.0,
        session: dict[str, Any] | None = None,
        beta: bool = False,
    ) -> None:
        """`client` (an `openai.AsyncOpenAI`) lends its base URL and key; `session`
        is merged into the `session.update` payload; `beta=True` speaks the beta
        interface (the `OpenAI-Beta: realtime=v1` header and its session shape)."""
        if client is not None:
            api_key = api_key or getattr(client, "api_key", None)
            base_url = base_url or str(getattr(client, "base_url", "") or "") or None
        key = openai_key(api_key, "OpenAIRealtimeAgent")
        self.model = model
        self.tools = realtime_tools(tools)
        self.instructions = instructions
        self.response_timeout = response_timeout
        self.session_extra = dict(session or {})
        self.beta = beta
        root = base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL
        self.url = ws_url(root, model)
        headers = {"Authorization": f"Bearer {key}"}
        if beta:
            headers["OpenAI-Beta"] = "realtime=v1"
        self._http = SessionHolder(response_timeout + 10, headers)

    def __repr__(self) -> str:
        return f"OpenAIRealtimeAgent(model={self.model!r}, tools={len(self.tools)})"

    def session_update(self) -> dict[str, Any]:
        session: dict[str, Any] = {"tools": self.tools, "tool_choice": "auto"}
        if self.instructions:
            session["instructions"] = self.instructions
        if self.beta:
            session.update(modalities=["text"], input_audio_format="pcm16",
                           turn_detection=None)  # fmt: skip
        else:
            session.update(
                type="realtime",
                output_modalities=["text"],
                audio={"input": {"format": {"type": "audio/pcm", "rate": REALTIME_RATE},
                                 "turn_detection": None}},
            )  # fmt: skip
        session.update(self.session_extra)
        return {"type": "session.update", "session": session}

    async def run(self, audio: Audio) -> AgentResponse:
        pcm = await asyncio.to_thread(to_pcm16, audio, REALTIME_RATE)
        connect = self._http.get().ws_connect(self.url, max_msg_size=MAX_ANSWER_BYTES)
        async with connect as ws:
            await ws.send_str(json.dumps(self.session_update()))
            for start in range(0, max(len(pcm), 1), CHUNK):
                chunk = base64.b64encode(pcm[start : start + CHUNK]).decode("ascii")
                await ws.send_str(json.dumps({"type": "input_audio_buffer.append", "audio": chunk}))
            await ws.send_str(json.dumps({"type": "input_audio_buffer.commit"}))
            await ws.send_str(json.dumps({"type": "response.create"}))
            async with asyncio.timeout(self.response_timeout):
                return await self._collect(ws)

    async def _collect(self, ws: aiohttp.ClientWebSocketResponse) -> AgentResponse:
        calls: list[ToolCall] = []
        names: dict[str, str] = {}
        events: list[Any] = []
        async for frame in ws:
            if frame.type not in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY):
                break
            event = decode_ws_message(frame)
            if not isinstance(event, dict):
                continue
            events.append(event)
            kind = event.get("type")
            if kind == "error":
                raise realtime_error(event)
            if kind == "response.output_item.added":
                item = event.get("item") or {}
                if item.get("type") == "function_call":
                    names[str(item.get("call_id"))] = str(item.get("name", ""))
            elif kind == "response.function_call_arguments.done":
                name = event.get("name") or names.get(str(event.get("call_id")), "")
                calls.append(new_call(name, arguments_dict(event.get("arguments"))))
            elif kind == "response.done":
                return self._finish(event, calls, events)
        raise ws_closed_error(aiohttp.WSMessage(aiohttp.WSMsgType.CLOSE, ws.close_code, None),
                              self.url)  # fmt: skip

    @staticmethod
    def _finish(done: dict[str, Any], calls: list[ToolCall], events: list[Any]) -> AgentResponse:
        response = done.get("response") or {}
        if response.get("status") == "failed":
            error = (response.get("status_details") or {}).get("error") or {}
            raise realtime_error({"error": error})
        if not calls:
            # Some servers only report calls in the final response's output items.
            for item in response.get("output") or []:
                if isinstance(item, dict) and item.get("type") == "function_call":
                    calls.append(
                        new_call(str(item.get("name", "")), arguments_dict(item.get("arguments")))
                    )
        return AgentResponse(tool_calls=calls, raw=events)

    async def aclose(self) -> None:
        await self._http.aclose()
