"""Keys sent before any click reach the browser: when `Desktop.start` returns, the
browser's window holds the X input focus, on docker and on local, with each window
manager Helios can start that the sandbox has (and with none)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace

import pytest

from helios.environments.desktop.actions import Action, Geometry
from helios.environments.desktop.desktop import WINDOW_MANAGERS, Desktop, DesktopTools

from .desktop_helpers import FIXTURES, PROVIDERS, need_desktop, run_async, sandbox, spec_for, until

pytestmark = [pytest.mark.desktop, pytest.mark.slow]

SIZE = Geometry(800, 600)
#: the window managers tried: each one Helios can start, and none at all
MANAGERS = (*WINDOW_MANAGERS, "none")
#: the window managers tried on local
LOCAL_MANAGERS = ("openbox", "none")
#: the desktop image with every window manager (tests/fixtures/desktop/window-managers)
WM_IMAGE = "helios-desktop-wms:test"


def _wm_image() -> str:
    """The image with every window manager, built once (about 40 s) from Debian's
    archive."""
    probe = subprocess.run(["docker", "image", "inspect", WM_IMAGE], capture_output=True,
                           timeout=60)  # fmt: skip
    if probe.returncode == 0:
        return WM_IMAGE
    build = subprocess.run(
        ["docker", "build", "--network", "host", "-q", "-t", WM_IMAGE,
         str(FIXTURES / "window-managers")],
        capture_output=True, timeout=900,
    )  # fmt: skip
    assert build.returncode == 0, f"building {WM_IMAGE} failed: {build.stderr.decode()[-2000:]}"
    return WM_IMAGE


def _cases() -> list[object]:
    marks = {"docker": pytest.mark.docker, "local": pytest.mark.bwrap}
    # Every window manager in docker's image; on local, the one its desktops get (the
    # host's first: not xfwm4, which the host leaves out) and none: the focus code is
    # the same on both, what differs is the window manager.
    return [pytest.param(p, wm, id=f"{p}-{wm}", marks=marks[p])
            for p in PROVIDERS for wm in MANAGERS
            if p == "docker" or wm in LOCAL_MANAGERS]  # fmt: skip


@pytest.mark.parametrize(("provider", "manager"), _cases())
def test_keys_before_any_click_reach_the_page(provider: str, manager: str) -> None:
    need_desktop(provider)
    if provider == "local" and manager != "none" and shutil.which(manager, path="/usr/bin") is None:
        pytest.skip(f"the host has no {manager}")

    async def go() -> None:
        spec = spec_for(provider, image=_wm_image()) if provider == "docker" else None
        async with sandbox(provider, spec) as env:
            if manager != "none":
                found = await env.exec(f"command -v {manager}", cwd="/")
                if not found.ok:
                    pytest.skip(f"the sandbox has no {manager}")
            # Start with that window manager (or none): the probe's finding replaced.
            probe = DesktopTools.parse

            def forced(text: str) -> DesktopTools:
                tools = probe(text)
                return replace(tools, window_manager=None if manager == "none" else manager)

            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(DesktopTools, "parse", staticmethod(forced))
                desktop = await Desktop.start(env, SIZE)
            # A model's first actions: the URL bar, the page's address, Enter.
            for action in (Action("key", keys=("ctrl", "l")),
                           Action("type", text="file:///app/events.html"),
                           Action("key", keys=("Return",))):  # fmt: skip
                result = await desktop.execute(action)
                assert result.error is None, result.error
            await _title_shows(desktop, "events: ")

    run_async(go())


async def _title_shows(desktop: Desktop, text: str) -> None:
    """A window titled `text`, asked of X itself (no window manager: no `wmctrl`)."""

    async def shown() -> bool:
        found = await desktop.run(f"xdotool search --name {text!r}")
        return found.ok and bool(found.stdout.strip())

    try:
        await until(shown, f"a window titled {text!r}", 20.0)
    except AssertionError:
        names = await desktop.run("for w in $(xdotool search --name .); do "
                                  "xdotool getwindowname $w; done")  # fmt: skip
        raise AssertionError(f"no window titled {text!r}; windows: {names.stdout!r}") from None
