"""`--watch` and `--interactive`: the trials' desktops in a browser, on 127.0.0.1.

A small aiohttp server on a free loopback port serves Debian's noVNC
(/usr/share/novnc) and, per desktop, a WebSocket bridged to the x11vnc service of
that trial's sandbox (its unix socket, connected through `vnc.connect`'s checks:
no link followed, a socket, a peer of the sandbox's own pid namespace). Each URL
carries a random token, so another user of the machine cannot guess it; nothing
listens beyond loopback.

The trial door announces a desktop with the engine's `DesktopReady` event; the
live display (`progress.py`) hands it to the server of this process (`active()`)
and shows the URL it gets back.

While a batch is watched, the desktops being served are also listed in its run
folder (`desktops.json`, mode 0600: the URLs carry the token), rewritten as they
come and go and removed when the server stops, so `helios view` links each GUI
trial in flight to its live desktop.

When a trial ends its sandbox goes, but its URL stays until the batch ends: it then
shows the trial's last screenshot (the screen the verifier saw, `final.png`, else
the agent's newest one), read-only, from the trial's folder on the host.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import socket
import stat
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from rich.console import Console

from helios.atomic_write import write_text_atomic
from helios.engine.events import DesktopReady
from helios.environments.desktop.vnc import connect
from helios.text import visible
from helios.trajectories.images import FINAL_SCREEN, IMAGES_DIR

if TYPE_CHECKING:  # aiohttp is imported when a server starts: --watch only
    from aiohttp import web

NOVNC_DIR = Path("/usr/share/novnc")
HOST = "127.0.0.1"
#: the subprotocol noVNC asks for
SUBPROTOCOL = "binary"
CHUNK = 1 << 16
#: the desktops being served, in the run folder of the batch being watched
DESKTOPS_FILE = "desktops.json"
#: the largest screenshot an ended trial's URL serves
MAX_SCREENSHOT_BYTES = 64 * 1024 * 1024
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

_active: WatchServer | None = None


def active() -> WatchServer | None:
    """The watch server of this process, while one serves."""
    return _active


def show_desktop(console: Console, event: DesktopReady) -> str | None:
    """A trial's desktop is up: under `--watch`, serve it and print its URL (one line,
    for every view: a batch's live line and `helios run`'s trial). Its URL, or None."""
    server = active()
    if server is None:
        return None
    url = server.add(event)
    shown = url or "no view (the image has no x11vnc, or it did not answer)"
    console.print(visible(f"desktop of {event.label}: {shown}", one_line=True),
                  highlight=False, soft_wrap=True, markup=False)  # fmt: skip
    return url


def forget_desktop(trial_id: str) -> None:
    """The trial ended: its desktop is no longer served."""
    server = active()
    if server is not None:
        server.remove(trial_id)


@dataclass(frozen=True)
class _Desktop:
    label: str
    socket: str
    namespace: int
    interactive: bool
    #: the trial's host folder (its screenshots), if it keeps one
    folder: str | None = None


class WatchServer:
    """The desktops of a run, each at its own URL, while they are up."""

    def __init__(self, novnc: Path = NOVNC_DIR) -> None:
        self.novnc = novnc
        self.token = secrets.token_urlsafe(16)
        self.port = 0
        self._desktops: dict[str, _Desktop] = {}
        #: the desktops of trials that ended: their last screenshot, until the batch ends
        self._ended: dict[str, _Desktop] = {}
        self._runner: web.AppRunner | None = None
        self._bridges: set[asyncio.Task[None]] = set()
        self._published: Path | None = None

    def publish_in(self, run_dir: Path) -> None:
        """List the desktops being served in `run_dir`'s DESKTOPS_FILE from now on."""
        self._published = run_dir / DESKTOPS_FILE
        self._publish()

    def _publish(self) -> None:
        if self._published is None:
            return
        listing = {
            "listing": f"{self.base}/{self.token}/",
            "desktops": [{"trial_id": tid, "label": d.label, "url": self.url(tid)}
                         for tid, d in self._desktops.items()],
        }  # fmt: skip
        # a listing for the viewer: the batch goes on without it
        with contextlib.suppress(OSError):
            write_text_atomic(self._published, json.dumps(listing, indent=1), mode=0o600)

    @property
    def base(self) -> str:
        return f"http://{HOST}:{self.port}"

    def url(self, trial_id: str) -> str:
        """A short URL of `trial_id`'s desktop: it redirects to `viewer_url`."""
        return f"{self.base}/{self.token}/desktops/{trial_id}/"

    def viewer_url(self, trial_id: str) -> str:
        """The page that shows `trial_id`'s desktop (noVNC, connecting at once)."""
        desktop = self._desktops.get(trial_id)
        query = {
            "autoconnect": "1", "reconnect": "1", "reconnect_delay": "1000",
            "resize": "scale", "path": f"{self.token}/desktops/{trial_id}/websockify",
            "view_only": "0" if desktop is not None and desktop.interactive else "1",
        }  # fmt: skip
        return f"{self.base}/novnc/vnc.html?{urlencode(query)}"

    def add(self, event: DesktopReady) -> str | None:
        """Serve the desktop of `event`; its URL, or None when it has no view."""
        if event.vnc_socket is None or event.vnc_namespace is None:
            return None
        self._ended.pop(event.trial_id, None)
        self._desktops[event.trial_id] = _Desktop(
            event.label, event.vnc_socket, event.vnc_namespace, event.interactive, event.folder
        )
        self._publish()
        return self.url(event.trial_id)

    def remove(self, trial_id: str) -> None:
        """The trial ended: its live view goes, and its URL shows its last screenshot."""
        desktop = self._desktops.pop(trial_id, None)
        if desktop is not None:
            self._ended[trial_id] = desktop
            self._publish()

    # -- serving -------------------------------------------------------------
    async def start(self) -> None:
        from aiohttp import web

        app = web.Application()
        app.router.add_get(f"/{self.token}/desktops/{{trial}}/websockify", self._bridge)
        app.router.add_get(f"/{self.token}/desktops/{{trial}}/", self._viewer)
        app.router.add_get(f"/{self.token}/desktops/{{trial}}/{FINAL_SCREEN}", self._final)
        app.router.add_get(f"/{self.token}/", self._index)
        if self.novnc.is_dir():
            app.router.add_static("/novnc/", self.novnc, follow_symlinks=False)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        # Loopback only, and a port nobody chose: the kernel's free one.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind((HOST, 0))
        self.port = sock.getsockname()[1]
        site = web.SockSite(self._runner, sock)
        await site.start()

    async def stop(self) -> None:
        if self._published is not None:
            with contextlib.suppress(OSError):
                self._published.unlink()
            self._published = None
        for task in list(self._bridges):
            task.cancel()
        if self._bridges:
            await asyncio.gather(*self._bridges, return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _index(self, request: web.Request) -> web.Response:
        """A list of the desktops being served, each a link to its view."""
        from aiohttp import web

        rows = "".join(
            f'<li><a href="{self.url(tid)}">{_html(d.label)}</a> ({tid[:12]}){ended}</li>'
            for desktops, ended in ((self._desktops, ""), (self._ended, ": ended, its last screen"))
            for tid, d in desktops.items()
        )
        rows = rows or "<li>none yet</li>"
        body = f"<!doctype html><title>Helios desktops</title><ul>{rows}</ul>"
        return web.Response(text=body, content_type="text/html")

    async def _viewer(self, request: web.Request) -> web.Response:
        from aiohttp import web

        trial = request.match_info["trial"]
        ended = self._ended.get(trial)
        if ended is not None:
            body = (f"<!doctype html><title>{_html(ended.label)}: ended</title>"
                    f"<p>{_html(ended.label)} has ended: its last screen (read-only)</p>"
                    f'<img alt="no screenshot was kept" src="{FINAL_SCREEN}" '
                    'style="max-width:100%">')  # fmt: skip
            return web.Response(text=body, content_type="text/html")
        if trial not in self._desktops:
            raise web.HTTPNotFound(text="no such desktop")
        raise web.HTTPFound(self.viewer_url(trial))

    async def _final(self, request: web.Request) -> web.Response:
        """An ended trial's last screenshot, as PNG."""
        from aiohttp import web

        ended = self._ended.get(request.match_info["trial"])
        if ended is None or ended.folder is None:
            raise web.HTTPNotFound(text="no screenshot of this trial")
        data = await asyncio.to_thread(last_screenshot, Path(ended.folder))
        if data is None:
            raise web.HTTPNotFound(text="no screenshot of this trial was kept")
        return web.Response(body=data, content_type="image/png",
                            headers={"Cache-Control": "no-store"})  # fmt: skip

    async def _bridge(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        desktop = self._desktops.get(request.match_info["trial"])
        if desktop is None:
            raise web.HTTPNotFound(text="no such desktop (the trial may have ended)")
        ws = web.WebSocketResponse(protocols=(SUBPROTOCOL,), max_msg_size=CHUNK * 16)
        await ws.prepare(request)
        try:
            sock, _ = await asyncio.to_thread(connect, desktop.socket, desktop.namespace)
        except OSError:
            await ws.close(code=1011, message=b"the desktop's view is not available")
            return ws
        task = asyncio.current_task()
        assert task is not None
        self._bridges.add(task)
        try:
            await _pump(ws, sock)
        finally:
            self._bridges.discard(task)
        return ws


async def _pump(ws: web.WebSocketResponse, sock: socket.socket) -> None:
    """Bytes both ways between the browser and x11vnc until either side ends."""
    from aiohttp import WSMsgType

    reader, writer = await asyncio.open_unix_connection(sock=sock)

    async def to_vnc() -> None:
        async for message in ws:
            if message.type != WSMsgType.BINARY:
                break
            writer.write(message.data)
            await writer.drain()

    async def to_browser() -> None:
        while data := await reader.read(CHUNK):
            await ws.send_bytes(data)

    tasks = [asyncio.ensure_future(to_vnc()), asyncio.ensure_future(to_browser())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        writer.close()
        with contextlib.suppress(OSError, ConnectionError):
            await writer.wait_closed()
        await ws.close()


@contextlib.asynccontextmanager
async def serving(novnc: Path = NOVNC_DIR) -> AsyncIterator[WatchServer]:
    """A watch server for the block, as this process's `active()` one."""
    global _active
    server = WatchServer(novnc)
    await server.start()
    previous, _active = _active, server
    try:
        yield server
    finally:
        _active = previous
        await server.stop()


def last_screenshot(trial: Path) -> bytes | None:
    """The trial's last screen: the newest `final.png` of its steps' `agent/images`
    (the screen the verifier saw), else its newest screenshot; None if it kept none.
    Links are never followed and a file past MAX_SCREENSHOT_BYTES is not read."""
    folders = [trial / "agent" / IMAGES_DIR]
    with contextlib.suppress(OSError), os.scandir(trial) as entries:
        folders += [Path(e.path) / "agent" / IMAGES_DIR for e in entries
                    if e.is_dir(follow_symlinks=False)]  # fmt: skip
    finals: list[tuple[float, Path]] = []
    others: list[tuple[float, Path]] = []
    for folder in folders:
        if any(part.is_symlink() for part in (folder.parent, folder)):
            continue
        with contextlib.suppress(OSError), os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.endswith(".png") and entry.is_file(follow_symlinks=False):
                    kept = (entry.stat(follow_symlinks=False).st_mtime, Path(entry.path))
                    (finals if entry.name == FINAL_SCREEN else others).append(kept)
    for _, path in sorted(finals, reverse=True) + sorted(others, reverse=True):
        data = _read_png(path)
        if data is not None:
            return data
    return None


def _read_png(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_SCREENSHOT_BYTES:
            return None
        data = file.read(MAX_SCREENSHOT_BYTES + 1)
    return data if data.startswith(PNG_MAGIC) and len(data) <= MAX_SCREENSHOT_BYTES else None


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
