"""The ETA of the live displays: from the completion rate over a window that reaches to
now, so that completions in bursts do not make it read `0:00:01` for the whole wait."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from helios.datagen.display import GenerateProgress
from helios.display.eta import EtaEstimator, clock_text
from helios.display.progress import BatchProgress


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_is_averaged_over_the_wait_before_it_and_the_estimate_grows_while_idle() -> None:
    clock = FakeClock()
    eta = EtaEstimator(clock=clock)
    assert eta.seconds_left(10) is None  # nothing completed: unknown
    clock.now = 10.0
    eta.completed(10)  # ten prompts answered at once after 10 s
    clock.now = 10.5
    assert eta.seconds_left(10) == pytest.approx(10.5)  # not a second: 10 per 10.5 s
    clock.now = 15.0
    assert eta.seconds_left(10) == pytest.approx(15.0)  # nothing more came: it grows
    assert eta.seconds_left(0) == 0.0


def test_a_burst_larger_than_the_window_counts_from_before_it() -> None:
    clock = FakeClock()
    eta = EtaEstimator(window=20, horizon=60, clock=clock)
    clock.now = 10.0
    eta.completed(100)
    clock.now = 10.1
    assert eta.rate() == pytest.approx(100 / 10.1)


def test_the_rate_follows_the_recent_completions() -> None:
    clock = FakeClock()
    eta = EtaEstimator(window=20, horizon=60, clock=clock)
    for _ in range(300):  # one a second for five minutes
        clock.now += 1.0
        eta.completed()
    assert eta.seconds_left(50) == pytest.approx(50.0)
    for _ in range(240):  # then four a second for a minute
        clock.now += 0.25
        eta.completed()
    # the last minute only: four a second
    assert eta.rate() == pytest.approx(4.0, rel=0.02)


def test_clock_text() -> None:
    assert clock_text(None) == "-:--:--"
    assert clock_text(9.6) == "0:00:10"
    assert clock_text(3723) == "1:02:03"


def _render(progress: BatchProgress, width: int = 120) -> str:
    console = Console(width=width, file=io.StringIO(), force_terminal=True, color_system=None)
    console.print(progress)
    assert isinstance(console.file, io.StringIO)
    return console.file.getvalue()


@pytest.mark.parametrize("kind", ["batch", "generate"])
def test_both_live_lines_show_the_windowed_eta(kind: str) -> None:
    clock = FakeClock()
    console = Console(file=io.StringIO())
    progress = (
        BatchProgress(console, total=20, quiet=True, clock=clock)
        if kind == "batch"
        else GenerateProgress(console, quiet=True, services=None, clock=clock)
    )
    progress._progress.update(progress._task, total=20)
    clock.now = 10.0
    for i in range(10):
        progress.finished(f"u{i}", f"u{i}", True, "")
    clock.now = 10.5
    assert "ETA 0:00:11" in _render(progress)  # 10 left at 10 per 10.5 s
    clock.now = 20.0
    assert "ETA 0:00:20" in _render(progress)
