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
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

from aiohttp import WSMsgType, web
from rich.console import Console

from helios.atomic_write import write_text_atomic
from helios.engine.events import DesktopReady
from helios.environments.desktop.vnc import connect
from helios.text import visible

NOVNC_DIR = Path("/usr/share/novnc")
HOST = "127.0.0.1"
#: the subprotocol noVNC asks for
SUBPROTOCOL = "binary"
CHUNK = 1 << 16
#: the desktops being served, in the run folder of the batch being watched
DESKTOPS_FILE = "desktops.json"

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


class WatchServer:
    """The desktops of a run, each at its own URL, while they are up."""

    def __init__(self, novnc: Path = NOVNC_DIR) -> None:
        self.novnc = novnc
        self.token = secrets.token_urlsafe(16)
        self.port = 0
        self._desktops: dict[str, _Desktop] = {}
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
        self._desktops[event.trial_id] = _Desktop(
            event.label, event.vnc_socket, event.vnc_namespace, event.interactive
        )
        self._publish()
        return self.url(event.trial_id)

    def remove(self, trial_id: str) -> None:
        if self._desktops.pop(trial_id, None) is not None:
            self._publish()

    # -- serving -------------------------------------------------------------
    async def start(self) -> None:
        app = web.Application()
        app.router.add_get(f"/{self.token}/desktops/{{trial}}/websockify", self._bridge)
        app.router.add_get(f"/{self.token}/desktops/{{trial}}/", self._viewer)
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
        rows = "".join(
            f'<li><a href="{self.url(tid)}">{_html(d.label)}</a> ({tid[:12]})</li>'
            for tid, d in self._desktops.items()
        )
        rows = rows or "<li>none yet</li>"
        body = f"<!doctype html><title>Helios desktops</title><ul>{rows}</ul>"
        return web.Response(text=body, content_type="text/html")

    async def _viewer(self, request: web.Request) -> web.Response:
        trial = request.match_info["trial"]
        if trial not in self._desktops:
            raise web.HTTPNotFound(text="no such desktop (the trial may have ended)")
        raise web.HTTPFound(self.viewer_url(trial))

    async def _bridge(self, request: web.Request) -> web.StreamResponse:
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


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
