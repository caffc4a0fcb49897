"""The desktop in a sandbox, on docker and on local: it starts (readiness, not
sleeps), each action kind has a visible effect on a page that reports events in
its title, screenshots are PNGs of the screen, zoom crops, and the final answer
lands where Harbor's tests read it."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from helios.environments.base import Environment
from helios.environments.desktop.actions import Action, Geometry
from helios.environments.desktop.capture import capture_command
from helios.environments.desktop.desktop import (
    SERVICE_BROWSER,
    SERVICE_WM,
    SERVICE_X,
    Desktop,
    DesktopTools,
    DesktopUnavailable,
)
from helios.environments.desktop.xdotool import combination, input_commands, keysym

from .desktop_helpers import (
    EVENTS_PAGE,
    PROVIDERS,
    need_desktop,
    run_async,
    sandbox,
    spec_for,
    title_shows,
    titles,
    until,
)
from .png_reader import read_png

GREEN, BLUE, ORANGE = (0, 192, 0), (0, 0, 255), (255, 140, 0)
SIZE = Geometry(800, 600)


# -- pure mappings --------------------------------------------------------------
def test_key_names_map_to_xdotool_keysyms() -> None:
    assert combination(("ctrl", "l")) == "ctrl+l"
    assert combination(("Control", "Shift", "t")) == "ctrl+shift+t"
    assert combination(("cmd+enter",)) == "super+Return"
    assert [keysym(k) for k in ("esc", "PageDown", "f5", "arrowleft", "+", "a")] == [
        "Escape", "Next", "F5", "Left", "plus", "a",
    ]  # fmt: skip
    with pytest.raises(ValueError):
        combination(())


def test_actions_become_xdotool_calls() -> None:
    g = Geometry(800, 600)
    click = input_commands(Action("click", point=(10, 20), button="right", count=2,
                                  modifiers=("ctrl",)), g)  # fmt: skip
    assert click == [["mousemove", "10", "20", "keydown", "ctrl", "click", "--repeat", "2",
                      "--delay", "60", "3", "keyup", "ctrl"]]  # fmt: skip
    far = input_commands(Action("move", point=(5000, -3)), g)
    assert far == [["mousemove", "799", "0"]]  # clamped to the screen
    scroll = input_commands(Action("scroll", point=(1, 2), dy=-3, dx=2), g)[0]
    assert scroll[:3] == ["mousemove", "1", "2"] and scroll[-6:] == [
        "click", "--repeat", "2", "--delay", "10", "7"]  # fmt: skip
    assert "4" in scroll  # up
    typed = input_commands(Action("type", text="-rf $(x) ; `y`"), g)
    assert typed[0][-2:] == ["--", "-rf $(x) ; `y`"]  # one argument, after --
    drag = input_commands(Action("drag", path=((0, 0), (60, 60))), g)[0]
    assert drag[3] == "mousedown" and drag[-2:] == ["mouseup", "1"] and drag.count("mousemove") > 3
    with pytest.raises(ValueError):
        input_commands(Action("drag", path=((0, 0),)), g)


def test_the_probe_is_read() -> None:
    tools = DesktopTools.parse(
        "Xvfb=/usr/bin/Xvfb\nxdotool=/usr/bin/xdotool\nopenbox=/usr/bin/openbox\n"
        "xfwm4=\nchromium=/usr/bin/chromium\nscrot=/usr/bin/scrot\nimport=\n"
    )
    assert tools.x_server == "Xvfb" and tools.window_manager == "openbox"
    assert tools.browser == "chromium" and tools.capture == "scrot" and not tools.wmctrl


# -- a real desktop -------------------------------------------------------------
@pytest.mark.parametrize("provider", PROVIDERS)
def test_desktop_starts_screenshots_show_it_and_each_action_has_a_visible_effect(
    provider: str,
) -> None:
    """One desktop per provider for both halves (a desktop start is most of each
    half's CPU): it starts and its screenshots show it, then each action kind on
    the same page."""
    need_desktop(provider)

    async def go() -> None:
        async with sandbox(provider) as env:
            desktop = await Desktop.start(env, SIZE, start_url=EVENTS_PAGE)
            await _starts_and_screenshots_show_it(env, desktop)
            await _each_action_has_a_visible_effect(env, desktop)

    run_async(go())


async def _starts_and_screenshots_show_it(env: Environment, desktop: Desktop) -> None:
    for service in (SERVICE_X, SERVICE_WM, SERVICE_BROWSER):
        assert await env.service_running(service), service
    await title_shows(desktop, "events: ready")
    shot = read_png_header(await desktop.screenshot())
    assert shot == (800, 600)
    assert read_png_header(await desktop.screenshot(size=(400, 300))) == (400, 300)
    # The page's halves, seen through zoom crops at full resolution.
    await _page_top(desktop)
    left = await _crop(desktop, (40, 500, 60, 520))
    right = await _crop(desktop, (740, 500, 760, 520))
    assert (left.width, left.height) == (20, 20)
    assert left.colours() == {GREEN} and right.colours() == {BLUE}
    # Not blank: the browser's toolbar over the page, many colours.
    top = read_png(await desktop.screenshot((0, 0, 400, 140)))
    assert len(top.colours()) > 5 and GREEN in top.colours()
    # The other capture programs give the same crop.
    for capture in ("scrot", "xwd"):
        other = Desktop(env, desktop.geometry, replace(desktop.tools, capture=capture))
        crop = read_png(await other.screenshot((40, 500, 60, 520)))
        assert (crop.width, crop.height, crop.colours()) == (20, 20, {GREEN}), capture
        assert read_png_header(await other.screenshot()) == (800, 600), capture
    # A second start attaches: the same desktop, its real size.
    again = await Desktop.start(env, Geometry(1024, 768))
    assert again.geometry == SIZE
    assert (await titles(again)).count("Chromium") == 1


def read_png_header(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


async def _crop(desktop: Desktop, region: tuple[int, int, int, int]):  # type: ignore[no-untyped-def]
    result = await desktop.execute(Action("zoom", region=region))
    assert result.error is None
    return read_png(await desktop.screenshot())


async def _page_top(desktop: Desktop) -> int:
    """The screen row where the page starts (under the browser's toolbar): the
    first orange row of the text box, 40 px into the page, once it is painted."""
    rows: list[int] = []

    async def painted() -> bool:
        strip = read_png(await desktop.screenshot((60, 0, 61, SIZE.height)))
        rows[:] = [y for y in range(strip.height) if strip.pixel(0, y) == ORANGE]
        return bool(rows)

    await until(painted, "the page's text box on the screen")
    return rows[0] - 40


async def _each_action_has_a_visible_effect(env: Environment, d: Desktop) -> None:
    await title_shows(d, "events: ready")
    top = await _page_top(d)

    async def act(action: Action, expected: str) -> None:
        result = await d.execute(action)
        assert result.error is None, (action, result.error)
        await title_shows(d, expected)

    at = (200, top + 300)

    def spot(i: int) -> tuple[int, int]:  # apart: clicks there never join up
        return 100 + 40 * i, top + 320

    await act(Action("click", point=spot(0)), "events: up b0 n1 none")
    await act(Action("click", point=spot(1), count=2), "events: up b0 n2 none")
    await act(Action("click", point=spot(2), count=3), "events: up b0 n3 none")
    await act(Action("click", point=spot(3), button="right"), "events: up b2 n1 none")
    await act(Action("click", point=spot(4), button="middle"), "events: up b1 n1 none")
    await act(Action("click", point=spot(5), modifiers=("ctrl", "shift")),
              "events: up b0 n1 ctrl+shift")  # fmt: skip
    await act(Action("move", point=(321, top + 123)), "events: move 321 123")
    await act(Action("drag", path=((100, top + 200), (300, top + 260))),
              "events: drag 100,200 300,260 moves")  # fmt: skip
    await act(Action("scroll", point=at, dy=3), "events: wheel dx 0 dy 3 none")
    await act(Action("scroll", point=at, dy=-1, dx=-2), "events: wheel dx -2 dy 2 none")
    await act(Action("click", point=(100, top + 60)), "events: up b0 n1")
    typed = "Hello, world! $HOME"
    await act(Action("type", text=typed), f"events: text {typed}")
    await act(Action("click", point=at), "events: up b0 n1 none")  # out of the box
    await act(Action("key", keys=("ctrl", "shift", "y")), "events: key ctrl+shift Y")
    await act(Action("key", keys=("tab",)), "events: key none Tab")
    await act(Action("key", keys=("pagedown",)), "events: key none PageDown")
    mark = time.monotonic()
    await act(Action("hold_key", keys=("b",), seconds=0.6), "events: held b ms")
    assert time.monotonic() - mark >= 0.6
    held_ms = int((await titles(d)).split("events: held b ms ")[1].split()[0])
    assert held_ms >= 450
    mark = time.monotonic()
    assert (await d.execute(Action("wait", seconds=0.3))).error is None
    assert time.monotonic() - mark >= 0.3
    await act(Action("navigate", url="data:text/html,<title>navigated here</title>"),
              "navigated here")  # fmt: skip
    answer = "HX-7Q4K 'quoted' \"twice\"\nline two"
    assert (await d.execute(Action("done", text=answer))).error is None
    written = await env.exec("cat /logs/agent/final_answer.txt", cwd="/")
    assert written.stdout == answer
    bash = await d.execute(Action("bash", text="echo $DISPLAY"))
    assert bash.output.strip() == ":1"
    # What cannot be done is an error for the model, never an exception.
    for bad in (Action("key", keys=()), Action("drag", path=((1, 1),)),
                Action("zoom", region=(5, 5, 5, 50)), Action("navigate")):  # fmt: skip
        assert (await d.execute(bad)).error, bad
    assert "no window" not in await titles(d)


def test_an_image_without_xvfb_has_no_desktop(need_docker: None) -> None:
    async def go() -> None:
        async with sandbox("docker", spec_for("docker", image="debian:bookworm-slim")) as env:
            with pytest.raises(DesktopUnavailable, match="no Xvfb"):
                await Desktop.start(env, SIZE)

    run_async(go())


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_x_server_that_dies_is_reported_at_once(provider: str) -> None:
    """Xvfb refuses a display whose lock names a live process: the wait ends with the
    service's state and its log, not at the deadline."""
    need_desktop(provider)

    async def go() -> None:
        async with sandbox(provider) as env:
            await env.exec("printf '%10d\\n' 1 > /tmp/.X1-lock", cwd="/")
            mark = time.monotonic()
            with pytest.raises(DesktopUnavailable, match=r"not running.*already active"):
                await Desktop.start(env, SIZE, timeout=60)
            assert time.monotonic() - mark < 30

    run_async(go())


def test_each_capture_program_has_its_command() -> None:
    crop = (10, 20, 110, 70)
    assert capture_command("import", crop, convert=True, scratch="/t.png") == (
        "import -silent -window root -crop 100x50+10+20 +repage png:-"
    )
    assert capture_command("scrot", None, convert=False, scratch="/t.png") == (
        "scrot -o /t.png && cat /t.png"
    )
    assert "-a 10,20,100,50" in capture_command("scrot", crop, convert=False, scratch="/t.png")
    assert capture_command("xwd", crop, convert=True, scratch="/t.png").startswith(
        "xwd -root -silent | convert xwd:- -crop 100x50+10+20"
    )
    assert "exit 127" in capture_command(None, None, convert=False, scratch="/t.png")
