"""The time a run still needs, from its recent completion rate.

Completions often come in bursts (prompts answered together, trials started
together finishing together). An estimate from the spread of the last few
completions alone (rich's `TimeRemainingColumn`) sees a burst as a very high rate
and shows `0:00:01` for as long as nothing else completes. Here the rate is taken
over a window that reaches back to *now*: the last `window` completions or the
last `horizon` seconds, whichever reaches further, counted from the completion
just before it (or from the start). While nothing completes the rate falls and
the estimate grows; a burst is averaged over the wait that came before it.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable

#: completions the rate is taken over, at least
WINDOW = 20
#: seconds the rate is taken over, at least
HORIZON = 60.0
#: completion times kept (older ones are counted from the start)
HISTORY = 10_000


class EtaEstimator:
    """Seconds left for `remaining` completions, at the recent completion rate."""

    def __init__(
        self,
        *,
        window: int = WINDOW,
        horizon: float = HORIZON,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if window < 1 or horizon < 0:
            raise ValueError("window must be at least 1 and horizon not negative")
        self.window = window
        self.horizon = horizon
        self.clock = clock
        self.restart()

    def restart(self) -> None:
        """Count from now (the run's work starts): what came before is forgotten."""
        self._start = self.clock()
        self._times: list[float] = []
        self._total = 0

    def completed(self, n: int = 1) -> None:
        now = self.clock()
        self._times.extend([now] * n)
        self._total += n
        if len(self._times) > 2 * HISTORY:
            del self._times[:HISTORY]

    def rate(self) -> float | None:
        """Completions per second over the window; None before the first."""
        times = self._times
        if not times:
            return None
        now = self.clock()
        # the last completion at least `horizon` old and before the last `window`
        anchor = min(bisect.bisect_right(times, now - self.horizon), len(times) - self.window) - 1
        if anchor < 0:
            return self._total / max(now - self._start, 1e-6)
        return (len(times) - anchor - 1) / max(now - times[anchor], 1e-6)

    def seconds_left(self, remaining: int) -> float | None:
        """None while unknown (nothing completed yet and some work remains)."""
        if remaining <= 0:
            return 0.0
        rate = self.rate()
        return None if rate is None else remaining / rate


def clock_text(seconds: float | None) -> str:
    """`h:mm:ss`, or `-:--:--` when unknown."""
    if seconds is None:
        return "-:--:--"
    total = int(seconds + 0.5)
    hours, rest = divmod(total, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"
