"""Offline speech with espeak-ng (Debian package `espeak-ng`): real WAV, no key, no network."""

from __future__ import annotations

import asyncio
import shutil
from typing import Any, Literal

from helios._proc import decode, run_process
from helios.errors import HeliosError, SetupError
from helios.toolcalls.audio import pcm16_to_wav, resample_pcm16, to_mono, wav_to_pcm16
from helios.toolcalls.types import Audio

#: bytes of WAV kept from one prompt (espeak-ng speaks 44 KB a second: about 50 minutes)
OUTPUT_CAP = 128 * 1024 * 1024


class SynthesisError(HeliosError):
    kind = "SynthesisError"


class EspeakSynthesizer:
    """Speech from espeak-ng, resampled to `sample_rate` (espeak speaks at 22.05 kHz).

    `voice` is an espeak-ng voice (`en-us`, `en-gb`, `de`, `en-us+f3`, ...),
    `speed` is words per minute, `pitch` 0-99.
    """

    def __init__(
        self,
        *,
        voice: str = "en-us",
        speed: int = 165,
        pitch: int | None = None,
        sample_rate: int = 24_000,
        audio_format: Literal["wav", "pcm"] = "wav",
        executable: str = "espeak-ng",
        timeout: float = 60.0,
    ) -> None:
        self.voice = voice
        self.speed = speed
        self.pitch = pitch
        self.sample_rate = sample_rate
        self.audio_format = audio_format
        self.executable = executable
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"EspeakSynthesizer(voice={self.voice!r}, sample_rate={self.sample_rate})"

    def cache_identity(self) -> dict[str, Any]:
        return {
            "synthesizer": "espeak-ng",
            "voice": self.voice,
            "model": f"speed={self.speed},pitch={self.pitch}",
            "format": self.audio_format,
            "sample_rate": self.sample_rate,
        }

    def check_setup(self) -> None:
        """`SetupError` (one line) if espeak-ng is not on this machine: the batch's
        runner asks once, before any run, instead of every run failing alike."""
        self._binary()

    def _binary(self) -> str:
        binary = shutil.which(self.executable)
        if binary is None:
            raise SetupError(
                f"{self.executable} not found on PATH: install espeak-ng (Debian/Ubuntu: "
                "apt-get install espeak-ng), or use another synthesizer (synthesizer: null "
                "is text mode)"
            )
        return binary

    def _command(self) -> list[str]:
        binary = self._binary()
        command = [binary, "--stdout", "--stdin", "-v", self.voice, "-s", str(self.speed)]
        if self.pitch is not None:
            command += ["-p", str(self.pitch)]
        return command

    async def synthesize(self, text: str) -> Audio:
        if not text.strip():
            raise SynthesisError("cannot speak an empty prompt")
        # The text goes through stdin: a prompt starting with "-" is not an option.
        # run_process kills and reaps espeak-ng on a timeout or a cancel.
        result = await run_process(
            self._command(), stdin=text.encode("utf-8"), timeout=self.timeout, cap=OUTPUT_CAP
        )
        if result.timed_out:
            raise SynthesisError(f"espeak-ng took longer than {self.timeout:g}s")
        out = result.stdout
        if result.returncode != 0 or not out:
            message = decode(result.stderr).strip()[:200]
            raise SynthesisError(f"espeak-ng failed (exit {result.returncode}): {message}")
        pcm = await asyncio.to_thread(self._convert, out)
        if self.audio_format == "pcm":
            return Audio(data=pcm, format="pcm", sample_rate=self.sample_rate, transcript=text)
        wav = pcm16_to_wav(pcm, self.sample_rate)
        return Audio(data=wav, format="wav", sample_rate=self.sample_rate, transcript=text)

    def _convert(self, wav: bytes) -> bytes:
        pcm, rate, channels = wav_to_pcm16(wav)
        return resample_pcm16(to_mono(pcm, channels), rate, self.sample_rate)
