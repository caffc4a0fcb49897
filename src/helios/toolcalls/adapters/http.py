"""HttpAgent: POST the audio (base64 JSON) to an endpoint, parse its JSON answer."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from helios.toolcalls.parsers.mapping import JsonResponseParser
from helios.toolcalls.protocols import ResponseParser
from helios.toolcalls.transport import SessionHolder, read_json_response
from helios.toolcalls.types import AgentResponse, Audio


def audio_payload(audio: Audio, audio_field: str, format_field: str) -> dict[str, Any]:
    return {
        audio_field: base64.b64encode(audio.data).decode("ascii"),
        format_field: audio.format,
    }


class HttpAgent:
    """Sends `{audio_field: <base64>, format_field: "wav", **extra_body}` as JSON.

    The answer is parsed by `parser` (default: `{"tool_calls": [{"name", "arguments"}]}`).
    429, 5xx, timeouts and dropped connections are retried by the engine.
    """

    def __init__(
        self,
        url: str,
        parser: ResponseParser | None = None,
        method: str = "POST",
        headers: Mapping[str, str] | None = None,
        audio_field: str = "audio",
        format_field: str = "format",
        timeout: float = 60.0,
        *,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        self.url = url
        self.parser: ResponseParser = parser if parser is not None else JsonResponseParser()
        self.method = method.upper()
        self.audio_field = audio_field
        self.format_field = format_field
        self.timeout = timeout
        self.extra_body = dict(extra_body or {})
        self._http = SessionHolder(timeout, headers)

    def __repr__(self) -> str:
        return f"HttpAgent({self.url!r}, parser={self.parser!r})"

    async def run(self, audio: Audio) -> AgentResponse:
        payload = {**self.extra_body, **audio_payload(audio, self.audio_field, self.format_field)}
        session = self._http.get()
        async with session.request(self.method, self.url, json=payload) as response:
            raw = await read_json_response(response, self.url)
        return self.parser.parse(raw)

    async def aclose(self) -> None:
        await self._http.aclose()
