"""A settled screenshot: after a scroll on a page that scrolls smoothly, the
screenshot the computer agent takes (its default `settle_seconds`) shows the page
where it stopped, so a click on a target found in it hits. Docker and local."""

from __future__ import annotations

import pytest

from helios.agents.computer.screen import capture
from helios.agents.computer.settings import ComputerSettings
from helios.environments.desktop.actions import Action, Geometry
from helios.environments.desktop.desktop import Desktop
from helios.errors import ConfigError

from .desktop_helpers import FIXTURES, PROVIDERS, need_desktop, run_async, sandbox, title_shows
from .png_reader import read_png

SIZE = Geometry(800, 600)
RED = (255, 0, 0)
PAGE = "file:///app/smooth.html"


def _cases() -> list[object]:
    marks = {"docker": pytest.mark.docker, "local": pytest.mark.bwrap}
    return [pytest.param(p, id=p, marks=marks[p]) for p in PROVIDERS]


def _find(png: bytes, colour: tuple[int, int, int]) -> tuple[int, int] | None:
    """The centre of the pixels of `colour` (every 2nd pixel looked at)."""
    image = read_png(png)
    points = [(x, y) for y in range(0, image.height, 2) for x in range(0, image.width, 2)
              if image.pixel(x, y) == colour]  # fmt: skip
    if not points:
        return None
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    return (min(xs) + max(xs)) // 2, (min(ys) + max(ys)) // 2


@pytest.mark.desktop
@pytest.mark.slow
@pytest.mark.parametrize("provider", _cases())
def test_a_click_after_a_smooth_scroll_hits_what_the_screenshot_showed(provider: str) -> None:
    need_desktop(provider)
    settle = ComputerSettings.read({}).settle_seconds
    assert settle > 0

    async def go() -> None:
        async with sandbox(provider) as env:
            await env.upload(FIXTURES / "smooth.html", "/app/smooth.html")
            desktop = await Desktop.start(env, SIZE, start_url=PAGE)
            await title_shows(desktop, "smooth: ready")
            shot = await capture(desktop, None, None, settle)  # the page painted
            hits = 0
            # Down three notches a time (1200 px, animated) until the target shows.
            for _ in range(3):
                scrolled = await desktop.execute(Action("scroll", point=(600, 300), dy=1))
                assert scrolled.error is None, scrolled.error
                # (as the agent does: not settled while it still shows the last frame)
                shot = await capture(desktop, None, None, settle, before=shot)
                target = _find(shot, RED)
                if target is None:
                    continue
                clicked = await desktop.execute(Action("click", point=target))
                assert clicked.error is None, clicked.error
                await title_shows(desktop, "smooth: hit", deadline=10)
                hits += 1
                break
            assert hits == 1, "the target never showed in a screenshot"

    run_async(go())


class _Frames:
    """A screen whose frames are given in turn (the last one repeats)."""

    geometry = SIZE

    def __init__(self, *frames: bytes) -> None:
        self.frames = list(frames)
        self.taken = 0

    async def screenshot(self, region: object = None, *, size: object = None) -> bytes:
        self.taken += 1
        return self.frames.pop(0) if len(self.frames) > 1 else self.frames[0]


def test_a_screenshot_settles_on_two_equal_frames_within_its_bound() -> None:
    import asyncio
    import time

    moving = _Frames(b"a", b"b", b"c", b"c")
    assert asyncio.run(capture(moving, None, None, 5.0)) == b"c"  # type: ignore[arg-type]
    assert moving.taken == 4
    still = _Frames(b"a")
    assert asyncio.run(capture(still, None, None, 5.0)) == b"a"  # type: ignore[arg-type]
    assert still.taken == 2
    never = _Frames(*(bytes([i % 256]) for i in range(100_000)))
    mark = time.monotonic()
    asyncio.run(capture(never, None, None, 0.2))  # type: ignore[arg-type]
    assert time.monotonic() - mark < 2.0
    unsettled = _Frames(b"a", b"b")
    assert asyncio.run(capture(unsettled, None, None, 0.0)) == b"a"  # type: ignore[arg-type]
    assert unsettled.taken == 1
    assert ComputerSettings.read({"settle_seconds": "0.4"}).settle_seconds == 0.4
    assert "settle_seconds" not in ComputerSettings.read({}).identity()
    assert ComputerSettings.read({"settle_seconds": 0}).identity()["settle_seconds"] == 0
    for bad in (-1, "soon", 31, True):
        with pytest.raises(ConfigError, match="settle_seconds"):
            ComputerSettings.read({"settle_seconds": bad})


def test_a_screen_that_still_shows_the_frame_before_the_action_is_not_settled() -> None:
    """A loaded machine's browser takes the scroll late: the first frames after the
    action are the one the model saw. They are two equal frames, yet not the
    screen's answer: the capture waits for the change (within its bound)."""
    import asyncio
    import time

    late = _Frames(b"before", b"before", b"before", b"moving", b"after", b"after")
    assert asyncio.run(capture(late, None, None, 5.0, before=b"before")) == b"after"  # type: ignore[arg-type]
    assert late.taken == 6
    # an action that changes nothing costs the bound, no more
    unchanged = _Frames(b"before")
    mark = time.monotonic()
    assert asyncio.run(capture(unchanged, None, None, 0.3, before=b"before")) == b"before"  # type: ignore[arg-type]
    assert 0.3 <= time.monotonic() - mark < 2.0
