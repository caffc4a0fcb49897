"""A tool-call batch's components, checked before any run: the synthesizer (the
offline default, behind an audio cache where it pays), whether the agent reads text
or hears audio, and whether this machine can run the synthesizer."""

from __future__ import annotations

from typing import Any

from helios.errors import ConfigError
from helios.toolcalls.cache import AudioCache, CachedSynthesizer
from helios.toolcalls.protocols import Synthesizer


class _Default:
    def __repr__(self) -> str:
        return "<espeak-ng>"


#: "no synthesizer given": espeak-ng, the offline default (None means text mode)
DEFAULT_SYNTHESIZER: Any = _Default()


def synthesizer_for(synthesizer: Any, cache: AudioCache | bool | None) -> Synthesizer | None:
    from helios.toolcalls.synthesizers import (
        EspeakSynthesizer,
        GoogleSynthesizer,
        OpenAISynthesizer,
    )

    if synthesizer is DEFAULT_SYNTHESIZER:
        synthesizer = EspeakSynthesizer()
    if synthesizer is None or isinstance(synthesizer, CachedSynthesizer) or cache is False:
        return synthesizer  # type: ignore[no-any-return]
    if isinstance(cache, AudioCache):
        return CachedSynthesizer(synthesizer, cache=cache)
    builtin = isinstance(synthesizer, EspeakSynthesizer | OpenAISynthesizer | GoogleSynthesizer)
    if cache is True or builtin:
        return CachedSynthesizer(synthesizer, cache=AudioCache())
    return synthesizer  # type: ignore[no-any-return]


def check_setup(synthesizer: Any) -> None:
    """Ask the synthesizer (through a cache) whether this machine can run it, once,
    before any run (`check_setup()`, where it has one): a missing program is one
    `SetupError`, not the same failure for every run."""
    seen: set[int] = set()
    while synthesizer is not None and id(synthesizer) not in seen:
        seen.add(id(synthesizer))
        check = getattr(synthesizer, "check_setup", None)
        if callable(check):
            check()
            return
        synthesizer = getattr(synthesizer, "inner", None)


def text_mode(agent: Any, synthesizer: Synthesizer | None) -> bool:
    can_read = callable(getattr(agent, "run_text", None))
    if synthesizer is None or getattr(agent, "accepts_audio", True) is False:
        if not can_read:
            raise ConfigError(
                "synthesizer=None is text mode: the agent needs run_text(prompt) "
                f"(e.g. ModelAgent), and {type(agent).__name__} has none"
            )
        return True
    if not callable(getattr(agent, "run", None)):
        raise ConfigError(f"the agent {type(agent).__name__} has no run(audio) method")
    return False
