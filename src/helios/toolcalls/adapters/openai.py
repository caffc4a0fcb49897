"""OpenAIAgent: Chat Completions with the audio as an `input_audio` content part."""

from __future__ import annotations

import base64
import os
from typing import Any

from helios.toolcalls.adapters.tools import chat_tools
from helios.toolcalls.audio import to_wav
from helios.toolcalls.parsers.openai import OpenAIResponseParser
from helios.toolcalls.synthesizers.openai import OPENAI_BASE_URL, openai_key
from helios.toolcalls.transport import SessionHolder, read_json_response
from helios.toolcalls.types import AgentResponse, Audio


def input_audio_part(audio: Audio) -> dict[str, Any]:
    """The content part; PCM is wrapped as WAV (the endpoint takes wav and mp3)."""
    if audio.format not in ("wav", "mp3"):
        audio = to_wav(audio)
    data = base64.b64encode(audio.data).decode("ascii")
    return {"type": "input_audio", "input_audio": {"data": data, "format": audio.format}}


class OpenAIAgent:
    """Audio in, tool calls out, through `POST {base_url}/chat/completions`.

    Pass `client=` (an `openai.AsyncOpenAI`) to use the SDK, as russo did (the
    `openai` package is yours to install: Helios does not depend on it);
    otherwise the request goes over aiohttp with `api_key`/`base_url`
    (or OPENAI_API_KEY / OPENAI_BASE_URL).
    """

    def __init__(
        self,
        *,
        model: str = "gpt-4o-audio-preview",
        tools: list[Any] | None = None,
        system_prompt: str | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        client: Any = None,
        extra_create_kwargs: dict[str, Any] | None = None,
        timeout: float = 60.0,
    ) -> None:
        self.model = model
        self.tools = chat_tools(tools)
        self.system_prompt = system_prompt
        self.client = client
        self.extra_create_kwargs = dict(extra_create_kwargs or {})
        self._parser = OpenAIResponseParser()
        self._http: SessionHolder | None = None
        if client is None:
            key = openai_key(api_key, "OpenAIAgent")
            root = base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL
            self.base_url = root.rstrip("/")
            self._http = SessionHolder(timeout, {"Authorization": f"Bearer {key}"})

    def __repr__(self) -> str:
        return f"OpenAIAgent(model={self.model!r}, tools={len(self.tools)})"

    def request(self, audio: Audio) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        if self.system_prompt:
            messages.append({"role": "system", "content": self.system_prompt})
        messages.append({"role": "user", "content": [input_audio_part(audio)]})
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if self.tools:
            body["tools"] = self.tools
        body.update(self.extra_create_kwargs)
        return body

    async def run(self, audio: Audio) -> AgentResponse:
        body = self.request(audio)
        if self._http is None:
            # The SDK's errors are typed by the engine's endpoint calls (transport.classify).
            raw: Any = await self.client.chat.completions.create(**body)
        else:
            url = f"{self.base_url}/chat/completions"
            async with self._http.get().post(url, json=body) as response:
                raw = await read_json_response(response, url)
        return self._parser.parse(raw)

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
