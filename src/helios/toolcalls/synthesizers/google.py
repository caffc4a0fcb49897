"""Gemini TTS (`models/{model}:generateContent` with the AUDIO modality), on aiohttp.

The REST protocol is spoken directly, so the google-genai SDK is not needed
(and the tests can point `base_url` at a loopback server).
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from typing import Any, Literal

from helios.errors import ConfigError
from helios.models.errors import TransientError
from helios.secrets import register_secret
from helios.toolcalls.audio import pcm16_to_wav
from helios.toolcalls.transport import SessionHolder, read_json_response
from helios.toolcalls.types import Audio

GEMINI_BASE_URL = "https://generativelanguage.googleapis.com"
_RATE = re.compile(r"rate=(\d+)")


def gemini_key(api_key: str | None, what: str) -> str:
    key = api_key or os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")
    if not key:
        raise ConfigError(f"{what} needs an API key: set GEMINI_API_KEY or pass api_key=")
    register_secret(key)
    return key


class GoogleSynthesizer:
    """Speech from Gemini's TTS models: PCM16 at 24 kHz, returned as WAV (or PCM)."""

    def __init__(
        self,
        *,
        voice: str = "Kore",
        model: str = "gemini-2.5-flash-preview-tts",
        api_key: str | None = None,
        base_url: str | None = None,
        audio_format: Literal["wav", "pcm"] = "wav",
        sample_rate: int = 24_000,
        timeout: float = 60.0,
    ) -> None:
        self.voice = voice
        self.model = model
        self.audio_format = audio_format
        self.sample_rate = sample_rate
        self.base_url = (base_url or GEMINI_BASE_URL).rstrip("/")
        key = gemini_key(api_key, "GoogleSynthesizer")
        self._http = SessionHolder(timeout, {"x-goog-api-key": key})

    def __repr__(self) -> str:
        return f"GoogleSynthesizer(model={self.model!r}, voice={self.voice!r})"

    def cache_identity(self) -> dict[str, Any]:
        return {"synthesizer": "google", "model": self.model, "voice": self.voice,
                "format": self.audio_format}  # fmt: skip

    async def synthesize(self, text: str) -> Audio:
        body = {
            "contents": [{"role": "user", "parts": [{"text": text}]}],
            "generationConfig": {
                "responseModalities": ["AUDIO"],
                "speechConfig": {"voiceConfig": {"prebuiltVoiceConfig": {"voiceName": self.voice}}},
            },
        }
        url = f"{self.base_url}/v1beta/models/{self.model}:generateContent"
        async with self._http.get().post(url, json=body) as response:
            reply = await read_json_response(response, url)
        pcm, rate = _audio_parts(reply, self.sample_rate)
        if self.audio_format == "pcm":
            return Audio(data=pcm, format="pcm", sample_rate=rate, transcript=text)
        return Audio(data=pcm16_to_wav(pcm, rate), format="wav", sample_rate=rate,
                     transcript=text)  # fmt: skip

    async def aclose(self) -> None:
        await self._http.aclose()


def _audio_parts(reply: Any, default_rate: int) -> tuple[bytes, int]:
    """The concatenated inline PCM of the first candidate, and its rate."""
    pcm = b""
    rate = default_rate
    candidates = reply.get("candidates") if isinstance(reply, dict) else None
    parts = ((candidates or [{}])[0].get("content") or {}).get("parts") or []
    for part in parts:
        inline = part.get("inlineData") or part.get("inline_data") or {}
        data = inline.get("data")
        if not data:
            continue
        try:
            pcm += base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise TransientError("Gemini TTS sent audio that is not base64") from None
        found = _RATE.search(str(inline.get("mimeType") or inline.get("mime_type") or ""))
        if found:
            rate = int(found.group(1))
    if not pcm:
        raise TransientError("Gemini TTS sent no audio")
    return pcm, rate
