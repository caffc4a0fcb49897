"""Gemini's protocols for the loopback voice server: generateContent (TTS with
the AUDIO modality, or function calls for inline audio) and the Live API
(`BidiGenerateContent`) WebSocket."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from aiohttp import WSMsgType, web

from helios.testing.loopback import CLOSE_AFTER_HANDSHAKE
from helios.testing.voice_calls import CallingServer
from helios.testing.voice_openai import speech_seconds, tone_pcm

TTS_RATE = 24_000
LIVE_MIME = "audio/pcm;rate=16000"


def error(status: int, message: str) -> web.Response:
    status_name = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED"}.get(status, "INTERNAL")
    return web.json_response({"error": {"code": status, "message": message,
                                        "status": status_name}}, status=status)  # fmt: skip


def _parts(body: dict[str, Any]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for content in body.get("contents") or []:
        parts.extend(p for p in content.get("parts") or [] if isinstance(p, dict))
    return parts


async def generate_content(server: CallingServer, request: web.Request) -> web.StreamResponse:
    tail = request.match_info["tail"]
    if not tail.endswith(":generateContent"):
        return error(404, f"unknown method {tail!r}")
    body = await request.json()
    config = body.get("generationConfig") or {}
    if "AUDIO" in (config.get("responseModalities") or []):
        return _tts(server, request, body)
    audio = b""
    for part in _parts(body):
        inline = part.get("inlineData") or {}
        if str(inline.get("mimeType", "")).startswith("audio/"):
            try:
                audio = base64.b64decode(inline.get("data", ""), validate=True)
            except binascii.Error:
                return error(400, "inlineData.data is not base64")
    if not audio:
        server.record(request, body)
        return error(400, "no audio part in contents")
    received = server.record(request, body, audio)
    parts: list[dict[str, Any]] = [
        {"functionCall": {"name": c["name"], "args": c.get("arguments", {})}}
        for c in server.calls_for(received)
    ] or [{"text": "No tool."}]
    return web.json_response({"candidates": [{"content": {"role": "model", "parts": parts},
                                              "finishReason": "STOP"}]})  # fmt: skip


def _tts(server: CallingServer, request: web.Request, body: dict[str, Any]) -> web.Response:
    server.record(request, body)
    text = " ".join(str(p.get("text", "")) for p in _parts(body))
    if not text.strip():
        return error(400, "no text to speak")
    pcm = tone_pcm(speech_seconds(text), TTS_RATE)
    inline = {"mimeType": f"audio/L16;codec=pcm;rate={TTS_RATE}",
              "data": base64.b64encode(pcm).decode("ascii")}  # fmt: skip
    return web.json_response(
        {"candidates": [{"content": {"role": "model", "parts": [{"inlineData": inline}]}}]}
    )


async def live(server: CallingServer, request: web.Request) -> web.StreamResponse:
    ws = web.WebSocketResponse(max_msg_size=0)
    await ws.prepare(request)
    if request.get(CLOSE_AFTER_HANDSHAKE):
        await ws.close(code=1011, message=b"injected close")
        return ws
    setup: dict[str, Any] | None = None
    audio = bytearray()
    async for message in ws:
        if message.type not in (WSMsgType.TEXT, WSMsgType.BINARY):
            break
        data = json.loads(message.data)
        if setup is None:
            if "setup" not in data:
                await ws.close(code=1007, message=b"the first message must be setup")
                break
            setup = data["setup"]
            # The real service sends its messages as binary frames.
            await ws.send_bytes(json.dumps({"setupComplete": {}}).encode())
            continue
        realtime = data.get("realtimeInput") or {}
        chunk = realtime.get("audio")
        if chunk is not None:
            if chunk.get("mimeType") != LIVE_MIME:
                await ws.close(code=1007, message=b"unsupported audio mimeType")
                break
            audio += base64.b64decode(chunk.get("data", ""))
        if "activityEnd" in realtime or "audioStreamEnd" in realtime:
            received = server.record(request, {"setup": setup}, bytes(audio))
            await _answer(ws, server.calls_for(received))
            audio = bytearray()
    return ws


async def _answer(ws: web.WebSocketResponse, calls: list[dict[str, Any]]) -> None:
    if not calls:
        text = {"serverContent": {"modelTurn": {"parts": [{"text": "No tool."}]}}}
        await ws.send_bytes(json.dumps(text).encode())
        await ws.send_bytes(json.dumps({"serverContent": {"turnComplete": True}}).encode())
        return
    functions = [{"id": f"fc_{i}", "name": c["name"], "args": c.get("arguments", {})}
                 for i, c in enumerate(calls)]  # fmt: skip
    await ws.send_bytes(json.dumps({"toolCall": {"functionCalls": functions}}).encode())
