"""Headless Chromium driven over its DevTools protocol (loopback only), for the
`--watch` tests: open a URL as a person would, wait on what the page shows, then
take a screenshot."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

# The flags of the machine notes: no background traffic, a fresh profile.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--disable-dev-shm-usage", "--remote-debugging-address=127.0.0.1",
         "--remote-debugging-port=0")  # fmt: skip


#: the window of the view tests' shared browser (tests/conftest.py's `browser`)
VIEW_SIZE = (1280, 900)


def chromium() -> str | None:
    return shutil.which("chromium", path="/usr/bin:/bin")


class Page:
    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self._ids = itertools.count(1)

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        ident = next(self._ids)
        await self.ws.send_json({"id": ident, "method": method, "params": params})
        async for message in self.ws:
            data = json.loads(message.data)
            if data.get("id") == ident:
                if "error" in data:
                    raise RuntimeError(f"{method}: {data['error']}")
                return data.get("result", {})  # type: ignore[no-any-return]
        raise RuntimeError("the browser closed its DevTools socket")

    async def evaluate(self, expression: str) -> Any:
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    async def until(self, expression: str, deadline: float = 30.0) -> Any:
        """The value of `expression` once it is truthy (polled until `deadline`)."""
        ends = time.monotonic() + deadline
        while True:
            value = await self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > ends:
                raise AssertionError(f"the page never had {expression!r}")
            await asyncio.sleep(0.1)

    async def screenshot(self, clip: tuple[int, int, int, int] | None = None) -> bytes:
        params: dict[str, Any] = {"format": "png"}
        if clip is not None:
            x, y, w, h = clip
            params["clip"] = {"x": x, "y": y, "width": w, "height": h, "scale": 1}
        result = await self.call("Page.captureScreenshot", **params)
        return base64.b64decode(result["data"])


class Chromium:
    """One headless Chromium for many pages (a module's tests), at one window size:
    started once; each `open_page(url, size, browser=it)` is a tab of its own, closed
    with the page, which starts with no cookies (the viewer keeps no other state in
    the browser). Starting a Chromium costs about 1.6 s of CPU, a tab about 0.6 s,
    and a tab in a browser context of its own twice that."""

    def __init__(self, size: tuple[int, int] = (1024, 768)) -> None:
        binary = chromium()
        assert binary is not None, "chromium is not installed"
        self.size = size
        self.profile = Path(tempfile.mkdtemp(prefix="helios-headless-"))
        self.proc = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={self.profile}",
             f"--window-size={size[0]},{size[1]}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,  # its helpers too are stopped at the end, by the group
        )  # fmt: skip
        try:
            self.port = _devtools_port_now(self.profile)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


@contextlib.asynccontextmanager
async def open_page(
    url: str, size: tuple[int, int] = (1024, 768), browser: Chromium | None = None
) -> AsyncIterator[Page]:
    """A page at `url`: a tab of `browser`, else of a Chromium started for it alone."""
    if browser is not None:
        async with _tab(browser, url, size) as page:
            yield page
        return
    binary = chromium()
    assert binary is not None, "chromium is not installed"
    profile = Path(tempfile.mkdtemp(prefix="helios-headless-"))
    proc = await asyncio.create_subprocess_exec(
        binary, *FLAGS, f"--user-data-dir={profile}", f"--window-size={size[0]},{size[1]}",
        "about:blank", stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        start_new_session=True,  # its helpers too are stopped at the end, by the group
    )  # fmt: skip
    try:
        port = await _devtools_port(profile)
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/json/list") as response:
                targets = await response.json()
            target = next(t for t in targets if t.get("type") == "page")
            async with http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                page = Page(ws)
                await page.call("Page.enable")
                await page.call("Page.navigate", url=url)
                yield page
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        shutil.rmtree(profile, ignore_errors=True)


@contextlib.asynccontextmanager
async def _tab(browser: Chromium, url: str, size: tuple[int, int]) -> AsyncIterator[Page]:
    """A new tab of `browser`, without cookies, at `url`; closed at the end."""
    assert size == browser.size, f"the shared Chromium's windows are {browser.size}"
    base = f"http://127.0.0.1:{browser.port}"
    async with aiohttp.ClientSession() as http:
        async with http.put(f"{base}/json/new?about:blank") as response:
            target = await response.json()
        try:
            async with http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                page = Page(ws)
                await page.call("Network.clearBrowserCookies")
                await page.call("Page.enable")
                await page.call("Page.navigate", url=url)
                yield page
        finally:
            async with http.get(f"{base}/json/close/{target['id']}"):
                pass


async def _devtools_port(profile: Path, deadline: float = 30.0) -> int:
    """The port Chromium chose, from the file it writes once it listens."""
    return await asyncio.to_thread(_devtools_port_now, profile, deadline)


def _devtools_port_now(profile: Path, deadline: float = 30.0) -> int:
    """The port Chromium chose, waited for without an event loop (`Chromium()` may be
    made inside a coroutine)."""
    marker = profile / "DevToolsActivePort"
    ends = time.monotonic() + deadline
    while True:
        if marker.is_file():
            first = marker.read_text().split("\n", 1)[0].strip()
            if first.isdigit():
                return int(first)
        if time.monotonic() > ends:
            raise AssertionError("headless chromium never opened its DevTools port")
        time.sleep(0.05)
