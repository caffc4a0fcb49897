"""Audio helpers: WAV ↔ PCM16, mono mixdown and resampling, for the realtime APIs.

OpenAI's Realtime API takes PCM16 at 24 kHz mono; Gemini Live takes PCM16 at
16 kHz. Synthesizers produce WAV at whatever rate they like. These helpers are
pure Python on `array` (no numpy): a prompt is a few seconds of audio and is
converted once per prompt, in a worker thread.
"""

from __future__ import annotations

import io
import sys
import wave
from array import array

from helios.toolcalls.types import Audio

REALTIME_RATE = 24_000
LIVE_RATE = 16_000


class AudioFormatError(ValueError):
    """The bytes are not the audio their format says."""


def is_wav(data: bytes) -> bool:
    return len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WAVE"


def wav_to_pcm16(data: bytes) -> tuple[bytes, int, int]:
    """(PCM16 frames, sample rate, channels) of a WAV file; 8-bit and 32-bit are converted."""
    try:
        with wave.open(io.BytesIO(data), "rb") as handle:
            rate, channels, width = (
                handle.getframerate(),
                handle.getnchannels(),
                handle.getsampwidth(),
            )
            frames = handle.readframes(handle.getnframes())
    except (wave.Error, EOFError) as exc:
        raise AudioFormatError(f"not a readable PCM WAV file: {exc}") from exc
    return _to_16_bit(frames, width), rate, channels


def _to_16_bit(frames: bytes, width: int) -> bytes:
    if width == 2:
        return frames
    if width == 1:  # unsigned 8-bit
        return _pack(array("h", ((b - 128) << 8 for b in frames)))
    if width == 4:
        wide = array("i", frames)
        if sys.byteorder == "big":
            wide.byteswap()
        return _pack(array("h", (v >> 16 for v in wide)))
    raise AudioFormatError(f"unsupported sample width: {width} bytes")


def pcm16_to_wav(pcm: bytes, sample_rate: int, channels: int = 1) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as handle:
        handle.setnchannels(channels)
        handle.setsampwidth(2)
        handle.setframerate(sample_rate)
        handle.writeframes(pcm)
    return buffer.getvalue()


def _samples(pcm: bytes) -> array[int]:
    samples = array("h")
    samples.frombytes(pcm[: len(pcm) - len(pcm) % 2])
    if sys.byteorder == "big":
        samples.byteswap()
    return samples


def _pack(samples: array[int]) -> bytes:
    if sys.byteorder == "big":
        samples = array("h", samples)
        samples.byteswap()
    return samples.tobytes()


def to_mono(pcm: bytes, channels: int) -> bytes:
    if channels == 1:
        return pcm
    samples = _samples(pcm)
    frames = len(samples) // channels
    mixed = array(
        "h", (sum(samples[i * channels : (i + 1) * channels]) // channels for i in range(frames))
    )
    return _pack(mixed)


def resample_pcm16(pcm: bytes, source_rate: int, target_rate: int) -> bytes:
    """Linear-interpolation resampling of mono PCM16 (enough for speech recognisers)."""
    if source_rate == target_rate or not pcm:
        return pcm
    if source_rate <= 0 or target_rate <= 0:
        raise AudioFormatError("sample rates must be positive")
    samples = _samples(pcm)
    n_in = len(samples)
    n_out = max(1, round(n_in * target_rate / source_rate))
    step = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    out = array("h", bytes(2 * n_out))
    last = n_in - 1
    for i in range(n_out):
        position = i * step
        left = int(position)
        fraction = position - left
        right = left + 1 if left < last else last
        out[i] = int(samples[left] + (samples[right] - samples[left]) * fraction)
    return _pack(out)


def to_pcm16(audio: Audio, sample_rate: int) -> bytes:
    """Mono PCM16 at `sample_rate` from WAV or PCM audio (what realtime APIs take)."""
    if audio.format == "wav" or is_wav(audio.data):
        pcm, rate, channels = wav_to_pcm16(audio.data)
    elif audio.format == "pcm":
        pcm = _to_16_bit(audio.data, audio.sample_width)
        rate, channels = audio.sample_rate, audio.channels
    else:
        raise AudioFormatError(
            f"{audio.format} audio cannot be converted to PCM16 here; synthesize WAV or PCM"
        )
    return resample_pcm16(to_mono(pcm, channels), rate, sample_rate)


def to_wav(audio: Audio, sample_rate: int | None = None) -> Audio:
    """The same audio as a WAV file, resampled to `sample_rate` if given."""
    if audio.format == "wav" and sample_rate in (None, audio.sample_rate) and is_wav(audio.data):
        return audio
    rate = sample_rate or audio.sample_rate
    pcm = to_pcm16(audio, rate)
    return Audio(data=pcm16_to_wav(pcm, rate), format="wav", sample_rate=rate,
                 transcript=audio.transcript)  # fmt: skip


def check_audio(audio: Audio) -> None:
    """Raise AudioFormatError for bytes that are not what `format` says (a corrupt cache)."""
    if audio.format == "wav":
        wav_to_pcm16(audio.data)
    elif audio.format == "pcm" and len(audio.data) % max(1, audio.sample_width) != 0:
        raise AudioFormatError("PCM data is not a whole number of samples")
