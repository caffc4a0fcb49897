"""OpenAI's speech endpoint (`POST /v1/audio/speech`), on aiohttp."""

from __future__ import annotations

import os
from typing import Any, Literal

from helios.errors import ConfigError
from helios.models.errors import TransientError
from helios.secrets import register_secret
from helios.toolcalls.audio import AudioFormatError, pcm16_to_wav, wav_to_pcm16
from helios.toolcalls.transport import SessionHolder, http_error, read_bounded
from helios.toolcalls.types import Audio

OPENAI_BASE_URL = "https://api.openai.com/v1"
#: the speech endpoint's PCM and WAV are 24 kHz, 16-bit, mono
SPEECH_RATE = 24_000


def openai_key(api_key: str | None, what: str) -> str:
    key = api_key or os.environ.get("OPENAI_API_KEY")
    if not key:
        raise ConfigError(f"{what} needs an API key: set OPENAI_API_KEY or pass api_key=")
    register_secret(key)
    return key


class OpenAISynthesizer:
    """Speech from OpenAI's `audio/speech` endpoint as WAV (or raw PCM) at 24 kHz."""

    def __init__(
        self,
        *,
        model: str = "gpt-4o-mini-tts",
        voice: str = "alloy",
        api_key: str | None = None,
        base_url: str | None = None,
        audio_format: Literal["wav", "pcm", "mp3"] = "wav",
        speed: float | None = None,
        instructions: str | None = None,
        timeout: float = 60.0,
    ) -> None:
        self.model = model
        self.voice = voice
        self.audio_format = audio_format
        self.speed = speed
        self.instructions = instructions
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL).rstrip(
            "/"
        )
        key = openai_key(api_key, "OpenAISynthesizer")
        self._http = SessionHolder(timeout, {"Authorization": f"Bearer {key}"})

    def __repr__(self) -> str:
        return f"OpenAISynthesizer(model={self.model!r}, voice={self.voice!r})"

    def cache_identity(self) -> dict[str, Any]:
        return {
            "synthesizer": "openai",
            "model": self.model,
            "voice": self.voice,
            "format": self.audio_format,
            "speed": self.speed,
            "instructions": self.instructions,
        }

    async def synthesize(self, text: str) -> Audio:
        body: dict[str, Any] = {
            "model": self.model,
            "input": text,
            "voice": self.voice,
            "response_format": self.audio_format,
        }
        if self.speed is not None:
            body["speed"] = self.speed
        if self.instructions:
            body["instructions"] = self.instructions
        url = f"{self.base_url}/audio/speech"
        async with self._http.get().post(url, json=body) as response:
            data = await read_bounded(response, url)
            if response.status >= 400:
                raise http_error(
                    response.status, data.decode("utf-8", "replace"), response.headers, url
                )
        return self._audio(data, text)

    def _audio(self, data: bytes, text: str) -> Audio:
        if not data:
            raise TransientError("the speech endpoint sent no audio")
        if self.audio_format == "pcm":
            return Audio(data=data, format="pcm", sample_rate=SPEECH_RATE, transcript=text)
        if self.audio_format == "mp3":
            return Audio(data=data, format="mp3", sample_rate=SPEECH_RATE, transcript=text)
        try:
            # Streamed WAV headers carry placeholder sizes: rewrite a clean file.
            pcm, rate, channels = wav_to_pcm16(data)
        except AudioFormatError as exc:
            raise TransientError(f"the speech endpoint sent a bad WAV file: {exc}") from None
        wav = pcm16_to_wav(pcm, rate, channels)
        return Audio(data=wav, format="wav", sample_rate=rate, channels=channels,
                     transcript=text)  # fmt: skip

    async def aclose(self) -> None:
        await self._http.aclose()
