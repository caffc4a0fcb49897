"""The event loop a Helios process runs on: uvloop where it is installed (the `fast`
extra), else asyncio's own. `HELIOS_LOOP=asyncio` keeps asyncio's loop even with
uvloop installed (for a bug report, or to compare); `HELIOS_LOOP=uvloop` asks for
uvloop and fails clearly when it is missing.

Every entry point that starts a loop (the CLI's `run_coroutine`, a batch's worker
processes, the doors' synchronous `run()`s) starts it through `run()` here, so that
one setting chooses for all of them. Nothing else depends on the choice: subprocesses
are started the same way on either loop (`helios._proc`), and interrupts come through
Helios's own signal watch (`helios.engine.interrupts`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from helios.errors import ConfigError
from helios.settings import current

T = TypeVar("T")

LOOPS = ("uvloop", "asyncio")


def chosen() -> str:
    """`uvloop` or `asyncio`: what `HELIOS_LOOP` asks for, else uvloop if installed."""
    asked = (current().get("HELIOS_LOOP") or "").strip().lower()
    if asked and asked not in LOOPS:
        raise ConfigError(f"HELIOS_LOOP={asked!r}: expected one of {', '.join(LOOPS)}")
    if asked == "asyncio":
        return "asyncio"
    try:
        import uvloop  # type: ignore[import-not-found,unused-ignore]  # noqa: F401
    except ImportError:
        if asked == "uvloop":
            raise ConfigError(
                "HELIOS_LOOP=uvloop but uvloop is not installed (pip install 'helios[fast]')"
            ) from None
        return "asyncio"
    return "uvloop"


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory for `asyncio.Runner`; None is asyncio's default loop."""
    if chosen() == "asyncio":
        return None
    import uvloop  # type: ignore[import-not-found,unused-ignore]

    new_loop: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return new_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on the chosen loop."""
    try:
        factory = loop_factory()
    except BaseException:
        main.close()  # never awaited: no "coroutine was never awaited" warning
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
