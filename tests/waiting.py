"""Waiting in a test outside an event loop: poll a condition up to a deadline, never a
fixed sleep. (Inside one, `sandbox_helpers.until` is the same wait for coroutines.)"""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(check: Callable[[], object], what: str, within: float = 20.0,
               every: float = 0.02) -> None:  # fmt: skip
    """Poll `check` every `every` seconds until it is true; past `within` seconds, fail
    saying `what` never happened. `check` may itself fail the test (a process that
    died). A check that scans every process or starts one costs CPU at each poll: poll
    it less often (`every`), within what the awaited state lasts."""
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"not within {within:g}s: {what}"
        time.sleep(every)
