"""The audio cache on disk: synthesized prompts, keyed by text, voice, model and format.

Each entry is `<key>.audio` plus `<key>.json` (format, rate, width, channels,
the text, and the sha256 of the audio). Writes are atomic (temp file, then
os.replace, audio before metadata), so a reader sees a whole entry or none;
an entry whose metadata or bytes do not check out is discarded and synthesized
again. Two processes sharing a cache at worst synthesize the same text twice.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from helios.toolcalls.audio import AudioFormatError, check_audio
from helios.toolcalls.protocols import Synthesizer
from helios.toolcalls.types import Audio

log = logging.getLogger(__name__)

DEFAULT_CACHE_DIR = Path(".helios_cache") / "audio"
_SUFFIXES = (".audio", ".json")


class AudioCache:
    def __init__(self, cache_dir: str | Path = DEFAULT_CACHE_DIR) -> None:
        self.cache_dir = Path(cache_dir)

    def __repr__(self) -> str:
        return f"AudioCache({str(self.cache_dir)!r})"

    @staticmethod
    def cache_key(text: str, **identity: Any) -> str:
        """A key over the text and what changes the audio (voice, model, format, rate)."""
        blob = json.dumps({"text": text, **identity}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]

    def _paths(self, key: str) -> tuple[Path, Path]:
        return self.cache_dir / f"{key}.audio", self.cache_dir / f"{key}.json"

    def get(self, key: str) -> Audio | None:
        """The cached audio, or None (a corrupt entry is removed and reported)."""
        audio_path, meta_path = self._paths(key)
        if not meta_path.exists():
            return None
        try:
            meta = json.loads(meta_path.read_text("utf-8"))
            data = audio_path.read_bytes()
            if hashlib.sha256(data).hexdigest() != meta["sha256"]:
                raise ValueError("audio bytes do not match their checksum")
            audio = Audio(
                data=data,
                format=meta["format"],
                sample_rate=int(meta["sample_rate"]),
                channels=int(meta.get("channels", 1)),
                sample_width=int(meta.get("sample_width", 2)),
                transcript=meta.get("text"),
            )
            check_audio(audio)
        except (OSError, ValueError, KeyError, TypeError, OverflowError, RecursionError,
                AudioFormatError) as exc:  # fmt: skip
            log.warning("discarding corrupt audio cache entry %s: %s", key, exc)
            self.discard(key)
            return None
        return audio

    def put(self, key: str, audio: Audio, *, text: str = "") -> None:
        audio_path, meta_path = self._paths(key)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        meta = {
            "format": audio.format,
            "sample_rate": audio.sample_rate,
            "channels": audio.channels,
            "sample_width": audio.sample_width,
            "text": text,
            "sha256": hashlib.sha256(audio.data).hexdigest(),
        }
        # Audio first, metadata last: an entry without metadata is no entry.
        _write_atomic(audio_path, audio.data)
        _write_atomic(meta_path, json.dumps(meta, indent=1).encode("utf-8"))

    def discard(self, key: str) -> None:
        for path in self._paths(key):
            path.unlink(missing_ok=True)

    def clear(self) -> int:
        """Remove every entry; return how many there were."""
        n = self.size()
        if self.cache_dir.is_dir():
            for path in self.cache_dir.iterdir():
                if path.suffix in _SUFFIXES or path.name.endswith(".tmp"):
                    path.unlink(missing_ok=True)
        return n

    def size(self) -> int:
        if not self.cache_dir.is_dir():
            return 0
        return sum(1 for path in self.cache_dir.iterdir() if path.suffix == ".json")


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{id(data):x}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def synthesizer_identity(synthesizer: Any) -> dict[str, Any]:
    """What makes two synthesizers' audio differ: its class and its voice/model/format."""
    identity = getattr(synthesizer, "cache_identity", None)
    if callable(identity):
        return dict(identity())
    fields = ("voice", "model", "audio_format", "format", "sample_rate", "speed", "language")
    found = {name: getattr(synthesizer, name) for name in fields if hasattr(synthesizer, name)}
    return {"synthesizer": type(synthesizer).__qualname__, **found}


class CachedSynthesizer:
    """Any synthesizer, with its audio kept in an AudioCache."""

    def __init__(
        self,
        synthesizer: Synthesizer,
        *,
        cache: AudioCache | None = None,
        enabled: bool = True,
        cache_key_extra: dict[str, Any] | None = None,
    ) -> None:
        self.inner = synthesizer
        self.cache = cache if cache is not None else AudioCache()
        self.enabled = enabled
        self.cache_key_extra = dict(cache_key_extra or {})
        self.hits = 0
        self.misses = 0

    def __repr__(self) -> str:
        return f"CachedSynthesizer({self.inner!r}, cache={self.cache!r}, enabled={self.enabled})"

    def cache_identity(self) -> dict[str, Any]:
        return {**synthesizer_identity(self.inner), **self.cache_key_extra}

    async def synthesize(self, text: str) -> Audio:
        if not self.enabled:
            return await self.inner.synthesize(text)
        key = self.cache.cache_key(text, **self.cache_identity())
        cached = await asyncio.to_thread(self.cache.get, key)
        if cached is not None:
            self.hits += 1
            return cached
        self.misses += 1
        audio = await self.inner.synthesize(text)
        try:
            await asyncio.to_thread(self.cache.put, key, audio, text=text)
        except OSError as exc:  # a full or read-only disk must not fail the run
            log.warning("could not cache audio in %s: %s", self.cache.cache_dir, exc)
        return audio
