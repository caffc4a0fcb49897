"""Waiting in a test outside an event loop: poll a condition up to a deadline, never a
fixed sleep. (Inside one, `sandbox_helpers.until` is the same wait for coroutines.)"""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(check: Callable[[], object], what: str, within: float = 20.0) -> None:
    """Poll `check` until it is true; past `within` seconds, fail saying `what`
    never happened. `check` may itself fail the test (a process that died)."""
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"not within {within:g}s: {what}"
        time.sleep(0.02)
