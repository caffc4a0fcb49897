"""The desktop tests' common parts: a sandbox of either provider with a desktop in
it, readiness waits on what the screen shows, and what each provider needs here."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from helios.environments.base import Environment
from helios.environments.desktop.desktop import Desktop
from helios.environments.registry import create_environment
from helios.environments.spec import SandboxSpec

DESKTOP_IMAGE = "helios-desktop:bookworm"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "desktop"
REPO = Path(__file__).resolve().parent.parent
GUI_EXAMPLES = REPO / "examples" / "gui"
EVENTS_PAGE = "file:///app/events.html"
#: the host programs a local desktop runs (the local sandbox binds the host's /usr)
HOST_PROGRAMS = ("Xvfb", "xdotool", "wmctrl", "xdpyinfo", "import", "openbox", "chromium",
                 "x11vnc")  # fmt: skip
PROVIDERS = ("docker", "local")


def _image_ok() -> bool:
    if shutil.which("docker") is None:
        return False
    probe = subprocess.run(["docker", "image", "inspect", DESKTOP_IMAGE], capture_output=True,
                           timeout=30)  # fmt: skip
    return probe.returncode == 0


def _host_ok() -> bool:
    if shutil.which("bwrap") is None:
        return False
    return all(shutil.which(p, path="/usr/bin:/bin") for p in HOST_PROGRAMS)


def need_desktop(provider: str) -> None:
    """Skip (fail under HELIOS_REQUIRE_DOCKER / _BWRAP=1) without what `provider`'s
    desktop needs: the desktop image, or the host's X programs and bubblewrap."""
    if provider == "docker":
        ok, flag, what = _image_ok(), "HELIOS_REQUIRE_DOCKER", f"the image {DESKTOP_IMAGE}"
    else:
        ok, flag, what = _host_ok(), "HELIOS_REQUIRE_BWRAP", "bwrap and Xvfb/chromium/xdotool"
    if ok:
        return
    if os.environ.get(flag) == "1":
        pytest.fail(f"{what} is required ({flag}=1) but not available "
                    "(scripts/setup-system.sh installs it)", pytrace=False)  # fmt: skip
    pytest.skip(f"{what} not available")


def spec_for(provider: str, **fields: object) -> SandboxSpec:
    fields.setdefault("image", DESKTOP_IMAGE if provider == "docker" else None)
    return SandboxSpec(label="desktop-test", memory_mb=2048, **fields)  # type: ignore[arg-type]


@asynccontextmanager
async def sandbox(provider: str, spec: SandboxSpec | None = None) -> AsyncIterator[Environment]:
    """A started sandbox with the tests' page at /app/events.html; always stopped."""
    env = create_environment(provider, spec or spec_for(provider),
                             trial_id=uuid.uuid4().hex[:8], run_id="desktop-test")  # fmt: skip
    await env.start()
    try:
        await env.upload(FIXTURES / "events.html", "/app/events.html")
        yield env
    finally:
        await env.stop()


async def until(check: Callable[[], Awaitable[bool]], what: str, deadline: float = 20.0) -> None:
    """Wait for `check` to hold (polled), failing the test past `deadline` seconds."""
    ends = time.monotonic() + deadline
    while not await check():
        if time.monotonic() > ends:
            raise AssertionError(f"not within {deadline:g}s: {what}")
        await asyncio.sleep(0.05)


async def titles(desktop: Desktop) -> str:
    return (await desktop.run("wmctrl -l")).stdout


async def title_shows(desktop: Desktop, text: str, deadline: float = 20.0) -> None:
    async def shown() -> bool:
        return text in await titles(desktop)

    try:
        await until(shown, f"a window titled {text!r}", deadline)
    except AssertionError:
        windows = await titles(desktop)
        raise AssertionError(f"no window titled {text!r}; windows: {windows!r}") from None


def run_async(work: Awaitable[None]) -> None:
    asyncio.run(work)  # type: ignore[arg-type]
