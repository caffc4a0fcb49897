"""Audio helpers, espeak-ng speech and the on-disk audio cache."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import sys
import wave
from array import array
from pathlib import Path

import pytest

from helios import toolcalls as russo
from helios.toolcalls import audio as au
from helios.toolcalls.cache import AudioCache, CachedSynthesizer

from ..waiting import wait_until

needs_espeak = pytest.mark.espeak


def _ramp(n: int) -> bytes:
    return array("h", (i * 7 % 20000 - 10000 for i in range(n))).tobytes()


def test_wav_pcm_round_trip() -> None:
    pcm = _ramp(1000)
    wav = au.pcm16_to_wav(pcm, 16000)
    assert au.is_wav(wav)
    assert au.wav_to_pcm16(wav) == (pcm, 16000, 1)


def test_resample_keeps_duration_and_endpoints() -> None:
    pcm = _ramp(22050)  # one second at 22.05 kHz
    for rate in (16000, 24000):
        out = au.resample_pcm16(pcm, 22050, rate)
        assert len(out) == 2 * rate
        samples = array("h", out)
        assert samples[0] == array("h", pcm)[0] and samples[-1] == array("h", pcm)[-1]


def test_to_pcm16_mixes_stereo_and_converts_rate() -> None:
    stereo = array("h", [100, 300] * 2400).tobytes()  # 0.1 s at 24 kHz
    audio = russo.Audio(data=stereo, format="pcm", sample_rate=24000, channels=2)
    mono = au.to_pcm16(audio, 16000)
    assert len(mono) == 2 * 1600
    assert set(array("h", mono)) == {200}


def test_non_wav_bytes_are_reported() -> None:
    with pytest.raises(au.AudioFormatError):
        au.to_pcm16(russo.Audio(data=b"not a wav at all", format="wav"), 16000)
    with pytest.raises(au.AudioFormatError):
        au.to_pcm16(russo.Audio(data=b"ID3...", format="mp3"), 16000)


def test_audio_save_wraps_pcm_in_wav(tmp_path: Path) -> None:
    audio = russo.Audio(data=_ramp(2400), format="pcm", sample_rate=24000)
    path = audio.save(tmp_path / "x" / "a.wav")
    with wave.open(str(path)) as handle:
        assert (handle.getframerate(), handle.getnframes()) == (24000, 2400)
    assert abs(audio.duration - 0.1) < 1e-9


@needs_espeak
@pytest.mark.parametrize("rate", [16000, 24000])
def test_espeak_speaks_real_wav_at_the_requested_rate(rate: int) -> None:
    text = "-v Book a flight from NYC to LA"  # a leading dash is text, not an option
    audio = asyncio.run(russo.EspeakSynthesizer(sample_rate=rate).synthesize(text))
    with wave.open(io.BytesIO(audio.data)) as handle:
        assert (handle.getframerate(), handle.getnchannels(), handle.getsampwidth()) == (
            rate, 1, 2)  # fmt: skip
        frames = handle.readframes(handle.getnframes())
    assert audio.sample_rate == rate and audio.transcript == text
    assert 1.0 < audio.duration < 10.0
    assert max(abs(s) for s in array("h", frames)) > 1000  # speech, not silence


@needs_espeak
def test_espeak_errors_are_clear() -> None:
    with pytest.raises(Exception, match="not found"):
        asyncio.run(russo.EspeakSynthesizer(executable="no-such-espeak").synthesize("hi"))
    with pytest.raises(Exception, match="espeak-ng failed"):
        asyncio.run(russo.EspeakSynthesizer(voice="xx-no-voice").synthesize("hi"))


class Counting:
    voice = "v1"

    def __init__(self) -> None:
        self.n = 0

    async def synthesize(self, text: str) -> russo.Audio:
        self.n += 1
        return russo.Audio(data=au.pcm16_to_wav(_ramp(240), 24000), transcript=text)


def test_cache_hits_and_keys(tmp_path: Path) -> None:
    inner = Counting()
    cached = CachedSynthesizer(inner, cache=AudioCache(tmp_path))
    first = asyncio.run(cached.synthesize("hello"))
    second = asyncio.run(cached.synthesize("hello"))
    assert inner.n == 1 and first.data == second.data and second.transcript == "hello"
    inner.voice = "v2"  # another voice is another entry
    asyncio.run(cached.synthesize("hello"))
    assert inner.n == 2 and cached.cache.size() == 2
    key_a = AudioCache.cache_key("t", voice="a", model="m", format="wav")
    assert key_a != AudioCache.cache_key("t", voice="a", model="m", format="pcm")
    assert key_a != AudioCache.cache_key("t", voice="a", model="n", format="wav")
    assert cached.cache.clear() == 2 and cached.cache.size() == 0


@pytest.mark.parametrize("damage", ["truncate", "garbage_meta", "missing_audio", "bad_wav"])
def test_a_corrupt_entry_is_discarded(tmp_path: Path, damage: str) -> None:
    inner = Counting()
    cached = CachedSynthesizer(inner, cache=AudioCache(tmp_path))
    asyncio.run(cached.synthesize("hello"))
    (audio_file,) = tmp_path.glob("*.audio")
    meta_file = audio_file.with_suffix(".json")
    if damage == "truncate":
        audio_file.write_bytes(audio_file.read_bytes()[:30])
    elif damage == "garbage_meta":
        meta_file.write_text("{not json")
    elif damage == "missing_audio":
        audio_file.unlink()
    else:  # consistent checksum, but the bytes are not a WAV file
        data = b"RIFF----garbage"
        audio_file.write_bytes(data)
        meta = json.loads(meta_file.read_text())
        import hashlib

        meta["sha256"] = hashlib.sha256(data).hexdigest()
        meta_file.write_text(json.dumps(meta))
    again = asyncio.run(cached.synthesize("hello"))
    assert inner.n == 2  # synthesized again
    assert au.is_wav(again.data)
    assert cached.cache.get(next(iter(tmp_path.glob("*.json"))).stem) is not None


def test_disabled_cache_always_synthesizes(tmp_path: Path) -> None:
    inner = Counting()
    cached = CachedSynthesizer(inner, cache=AudioCache(tmp_path), enabled=False)
    asyncio.run(cached.synthesize("a"))
    asyncio.run(cached.synthesize("a"))
    assert inner.n == 2 and AudioCache(tmp_path).size() == 0


def test_a_cancelled_synthesis_kills_and_reaps_espeak(tmp_path: Path) -> None:
    """A cancel (Ctrl-C, a stopped batch) mid-synthesis leaves no espeak-ng running, and
    no subprocess transport to outlive the event loop."""
    import gc
    import os

    fake = tmp_path / "espeak-ng"
    pid_file = tmp_path / "pid"
    fake.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 60\n")
    fake.chmod(0o755)
    leaks: list[str] = []

    async def main() -> None:
        synthesizer = russo.EspeakSynthesizer(executable=str(fake))
        task = asyncio.ensure_future(synthesizer.synthesize("hello"))
        started = lambda: pid_file.exists() and pid_file.read_text().strip()  # noqa: E731
        await asyncio.to_thread(wait_until, started, "espeak-ng started")
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    previous = sys.unraisablehook
    sys.unraisablehook = lambda u: leaks.append(f"{u.exc_value!r} in {u.object!r}")
    try:
        asyncio.run(main())
        gc.collect()
    finally:
        sys.unraisablehook = previous
    assert leaks == []
    with pytest.raises(ProcessLookupError):  # gone, and reaped (a zombie still takes signals)
        os.kill(int(pid_file.read_text()), 0)
