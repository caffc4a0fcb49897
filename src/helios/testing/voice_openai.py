"""OpenAI's audio protocols for the loopback voice server: the speech endpoint,
Chat Completions with `input_audio`, and the Realtime API WebSocket."""

from __future__ import annotations

import base64
import binascii
import io
import json
import math
import struct
import time
import wave
from typing import Any

from aiohttp import WSMsgType, web

from helios.testing.loopback import CLOSE_AFTER_HANDSHAKE
from helios.testing.voice_calls import CallingServer

RATE = 24_000


def tone_pcm(seconds: float, rate: int = RATE, frequency: float = 220.0) -> bytes:
    """A sine tone as PCM16 mono: stands in for speech, but is real audio."""
    n = max(1, int(seconds * rate))
    return b"".join(
        struct.pack("<h", int(8000 * math.sin(2 * math.pi * frequency * i / rate)))
        for i in range(n)
    )


def speech_seconds(text: str) -> float:
    return min(5.0, 0.06 * max(1, len(text)))


def wav_bytes(pcm: bytes, rate: int = RATE) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(rate)
        handle.writeframes(pcm)
    return buffer.getvalue()


def error(status: int, message: str, code: str = "invalid_request") -> web.Response:
    return web.json_response({"error": {"message": message, "type": "invalid_request_error",
                                        "code": code}}, status=status)  # fmt: skip


async def speech(server: CallingServer, request: web.Request) -> web.StreamResponse:
    body = await request.json()
    server.record(request, body)
    if not isinstance(body.get("input"), str) or not body.get("voice") or not body.get("model"):
        return error(400, "model, input and voice are required")
    pcm = tone_pcm(speech_seconds(body["input"]))
    kind = body.get("response_format", "mp3")
    if kind == "pcm":
        return web.Response(body=pcm, content_type="application/octet-stream")
    if kind == "wav":
        return web.Response(body=wav_bytes(pcm), content_type="audio/wav")
    return web.Response(body=b"ID3" + pcm[:1000], content_type="audio/mpeg")


def _input_audio(body: dict[str, Any]) -> bytes:
    """The decoded audio of the first input_audio part; ValueError if there is none."""
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict) and part.get("type") == "input_audio":
                audio = part.get("input_audio") or {}
                if audio.get("format") not in ("wav", "mp3"):
                    raise ValueError("input_audio.format must be wav or mp3")
                try:
                    data = base64.b64decode(audio.get("data", ""), validate=True)
                except binascii.Error:
                    raise ValueError("input_audio.data is not base64") from None
                if audio["format"] == "wav":
                    wave.open(io.BytesIO(data)).close()  # raises wave.Error
                return data
    raise ValueError("no input_audio content part")


async def chat(server: CallingServer, request: web.Request) -> web.StreamResponse:
    body = await request.json()
    try:
        audio = _input_audio(body)
    except (ValueError, wave.Error, EOFError) as exc:
        server.record(request, body)
        return error(400, f"Invalid audio: {exc}")
    received = server.record(request, body, audio)
    calls = server.calls_for(received)
    tool_calls = [
        {"id": f"call_{i}", "type": "function",
         "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments", {}))}}
        for i, c in enumerate(calls)
    ]  # fmt: skip
    message: dict[str, Any] = {"role": "assistant", "content": None if calls else "No tool."}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return web.json_response({
        "id": "chatcmpl-voice", "object": "chat.completion", "created": int(time.time()),
        "model": body.get("model", ""),
        "choices": [{"index": 0, "message": message,
                     "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    })  # fmt: skip


async def realtime(server: CallingServer, request: web.Request) -> web.StreamResponse:
    ws = web.WebSocketResponse(max_msg_size=0)
    await ws.prepare(request)
    if request.get(CLOSE_AFTER_HANDSHAKE):
        await ws.close(code=1011, message=b"injected close")
        return ws
    send = ws.send_str
    await send(json.dumps({"type": "session.created", "session": {"model": "loopback"}}))
    buffer = bytearray()
    committed = b""
    tools: list[Any] = []
    async for message in ws:
        if message.type != WSMsgType.TEXT:
            break
        event = json.loads(message.data)
        kind = event.get("type")
        if kind == "session.update":
            tools = event.get("session", {}).get("tools", [])
            await send(json.dumps({"type": "session.updated", "session": event.get("session")}))
        elif kind == "input_audio_buffer.append":
            buffer += base64.b64decode(event.get("audio", ""))
        elif kind == "input_audio_buffer.commit":
            if not buffer:
                await send(json.dumps({"type": "error", "error": {
                    "type": "invalid_request_error", "code": "input_audio_buffer_commit_empty",
                    "message": "buffer too small"}}))  # fmt: skip
                continue
            committed, buffer = bytes(buffer), bytearray()
            await send(json.dumps({"type": "input_audio_buffer.committed", "item_id": "item_in"}))
        elif kind == "response.create":
            received = server.record(request, {"tools": tools}, committed)
            await _respond(send, server.calls_for(received))
    return ws


async def _respond(send: Any, calls: list[dict[str, Any]]) -> None:
    await send(json.dumps({"type": "response.created", "response": {"id": "resp_1"}}))
    output = []
    for i, call in enumerate(calls):
        arguments = json.dumps(call.get("arguments", {}))
        item = {"type": "function_call", "id": f"item_{i}", "call_id": f"call_{i}",
                "name": call["name"], "arguments": arguments}  # fmt: skip
        output.append(item)
        await send(json.dumps({"type": "response.output_item.added", "output_index": i,
                               "item": {**item, "arguments": ""}}))  # fmt: skip
        half = len(arguments) // 2
        for delta in (arguments[:half], arguments[half:]):
            await send(json.dumps({"type": "response.function_call_arguments.delta",
                                   "call_id": f"call_{i}", "delta": delta}))  # fmt: skip
        # GA servers name the function in this event; the adapter also copes without.
        await send(json.dumps({"type": "response.function_call_arguments.done",
                               "call_id": f"call_{i}", "item_id": f"item_{i}",
                               "arguments": arguments}))  # fmt: skip
    await send(json.dumps({"type": "response.done",
                           "response": {"id": "resp_1", "status": "completed",
                                        "output": output}}))  # fmt: skip
