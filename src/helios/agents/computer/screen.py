"""The computer agent's side of the desktop: what it needs of one, how it gets the
trial's (the one Helios started before the agent, else a new one), and screenshots
at the size the model must see them."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

from helios.environments.base import Environment
from helios.environments.desktop.actions import Action, ActionResult, Geometry, Region
from helios.environments.desktop.desktop import Desktop

Size = tuple[int, int]
#: seconds between two frames of a settling screen that still shows the frame
#: before the action
UNCHANGED_PAUSE = 0.1


class Screen(Protocol):
    """What the agent uses of a `helios.environments.desktop.Desktop`."""

    geometry: Geometry

    async def execute(self, action: Action) -> ActionResult: ...

    async def screenshot(
        self, region: Region | None = None, *, size: Size | None = None
    ) -> bytes: ...

    async def write_final_answer(self, text: str) -> None: ...


async def open_screen(env: Environment, geometry: Geometry | None, start_url: str | None) -> Screen:
    """The desktop running in `env`'s sandbox (its own size), or one started now
    at `geometry` (default 1024x768). `Desktop.start` sends the browser to
    `start_url` either way. `DesktopUnavailable` when there is none and none can be
    started."""
    return await Desktop.start(env, geometry, start_url=start_url)


async def capture(
    screen: Screen, region: Region | None, size: Size | None, settle: float = 0.0,
    before: bytes | None = None,
) -> bytes:  # fmt: skip
    """A screenshot as the model must see it: a region (a zoom) as taken; the whole
    screen at `size` when that is given (a model whose image limits are below the
    desktop's size), scaled inside the sandbox so only the small image travels.

    With `settle` > 0 the screen is let settle first: frames are taken until two in
    a row are equal (a smooth scroll, an animation or a page load has ended), or
    for at most `settle` seconds; the last frame is returned either way. `before`,
    the frame the model saw before its action: a screen that still shows it has not
    reacted yet (a loaded machine's browser takes the input late), so it is not taken
    as settled until it changes or the bound is reached."""
    shot = await _frame(screen, region, size)
    ends = time.monotonic() + settle
    while time.monotonic() < ends:
        if before is not None and shot == before:
            # Not taken yet: a pause before the next frame leaves the CPU to the
            # browser that is to take it (frames back to back cost 0.1 s of CPU
            # each, and an action that changes nothing would take ten).
            await asyncio.sleep(min(UNCHANGED_PAUSE, max(0.0, ends - time.monotonic())))
        again = await _frame(screen, region, size)
        if again == shot and again != before:
            return again
        shot = again
    return shot


async def _frame(screen: Screen, region: Region | None, size: Size | None) -> bytes:
    if region is not None or size is None:
        return await screen.screenshot(region)
    return await screen.screenshot(size=size)
