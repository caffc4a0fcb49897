"""`--watch` / `--interactive`: a trial's desktop in a browser, served on loopback
only, from the sandbox's x11vnc over a checked unix socket."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import unquote

import aiohttp
import pytest
from rich.console import Console

from helios.display import watch
from helios.display.progress import BatchProgress
from helios.engine.events import DesktopReady, TrialFinished, TrialStarted
from helios.environments.base import Environment
from helios.environments.desktop import vnc
from helios.environments.desktop.actions import Action, Geometry
from helios.environments.desktop.desktop import Desktop

from .cli_inprocess import helios_inprocess
from .conftest import helios_cmd
from .desktop_helpers import (
    EVENTS_PAGE,
    GUI_EXAMPLES,
    PROVIDERS,
    need_desktop,
    run_async,
    sandbox,
    title_shows,
)
from .headless_browser import chromium, open_page
from .png_reader import read_png

SIZE = Geometry(800, 600)
GREEN, BLUE = (0, 192, 0), (0, 0, 255)
#: the colour noVNC's canvas has at the desktop's point (40, 500), once drawn
CANVAS_PIXEL = """(() => {
  const c = document.querySelector('#noVNC_container canvas, canvas');
  if (!c || c.width < 100) return '';
  const d = c.getContext('2d').getImageData(40, 500, 1, 1).data;
  return d[0] + ',' + d[1] + ',' + d[2];
})()"""


def _ready(endpoint: vnc.VncEndpoint, trial: str = "t1") -> DesktopReady:
    return DesktopReady(trial, "events", SIZE.width, SIZE.height, endpoint.socket,
                        endpoint.namespace, endpoint.interactive)  # fmt: skip


async def _desktop_with_view(env: Environment, interactive: bool = False) -> vnc.VncEndpoint:
    desktop = await Desktop.start(env, SIZE, start_url=EVENTS_PAGE)
    await title_shows(desktop, "events: ready")
    return await vnc.start_vnc(env, interactive=interactive)


async def _rfb_greeting(server: watch.WatchServer, trial: str = "t1") -> bytes:
    """What the bridge sends first: an RFB server's version line, or b'' if closed."""
    url = f"ws://127.0.0.1:{server.port}/{server.token}/desktops/{trial}/websockify"
    async with aiohttp.ClientSession() as http:
        try:
            async with http.ws_connect(url, protocols=("binary",)) as ws:
                message = await ws.receive(timeout=20)
        except aiohttp.WSServerHandshakeError as exc:
            assert exc.status == 404
            return b""
        return message.data if message.type == aiohttp.WSMsgType.BINARY else b""


def _listeners(port: int) -> list[str]:
    """The local addresses of the listening TCP sockets on `port` (v4 and v6)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, state = fields[1], fields[3]
            if state == "0A" and int(address.rsplit(":", 1)[1], 16) == port:
                found.append(address.rsplit(":", 1)[0])
    return found


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_watch_url_shows_the_live_desktop_on_loopback_only_and_a_swapped_socket_is_refused(
    provider: str, tmp_path: Path
) -> None:
    """Both on one desktop per provider (its start is most of each half's CPU): the
    view as served, then the agent's swap of x11vnc's socket."""
    need_desktop(provider)
    if chromium() is None:
        pytest.fail("chromium is not installed (scripts/setup-system.sh installs it)")
    host_path = tmp_path / "host.sock"
    host = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    host.bind(str(host_path))
    host.listen(8)
    host.setblocking(False)
    os.chmod(tmp_path, 0o755)

    async def go() -> None:
        async with sandbox(provider) as env, watch.serving() as server:
            endpoint = await _desktop_with_view(env)
            await _the_watch_url_shows_the_live_desktop_on_loopback_only(env, server, endpoint)
            await _a_socket_swapped_by_the_agent_is_refused(env, server, endpoint, host_path)

    with host:
        run_async(go())
        with pytest.raises(BlockingIOError):
            host.accept()  # nothing ever connected to the host's socket


async def _the_watch_url_shows_the_live_desktop_on_loopback_only(
    env: Environment, server: watch.WatchServer, endpoint: vnc.VncEndpoint
) -> None:
    url = server.add(_ready(endpoint))
    assert url is not None and url.startswith(f"http://127.0.0.1:{server.port}/")
    # Nothing listens beyond loopback: the server, and in the sandbox, nothing.
    assert _listeners(server.port) == ["0100007F"]
    inside = await env.exec("cat /proc/net/tcp /proc/net/tcp6 2>/dev/null", cwd="/")
    assert [ln for ln in inside.stdout.splitlines() if ln.split()[3:4] == ["0A"]] == []
    # A VNC (RFB) handshake answers through the bridge.
    assert (await _rfb_greeting(server)).startswith(b"RFB 003.")
    # A browser opens the URL as printed and sees the desktop.
    async with open_page(url) as page:
        drawn = await page.until(f"{CANVAS_PIXEL} === '0,192,0' && {CANVAS_PIXEL}")
        assert drawn == "0,192,0"
        shot = read_png(await page.screenshot((412, 284, 200, 200)))
        assert GREEN in shot.colours() and BLUE in shot.colours()
    server.remove("t1")
    assert await _rfb_greeting(server) == b""  # gone with its trial


async def _a_socket_swapped_by_the_agent_is_refused(
    env: Environment, server: watch.WatchServer, endpoint: vnc.VncEndpoint, host_path: Path
) -> None:
    """An agent that replaces x11vnc's socket with a link to a host socket, or the
    host's own socket, gets nothing: no connection reaches the host's socket."""
    server.add(_ready(endpoint))
    exchange = env.exchange_dir()
    assert exchange is not None
    inner = f"{exchange[0]}/{vnc.SOCKET_NAME}"
    swap = await env.exec(f"rm -f {inner} && ln -s {host_path} {inner}", cwd="/")
    assert swap.ok, swap.stderr
    assert os.path.islink(endpoint.socket)
    assert await _rfb_greeting(server) == b""
    with pytest.raises(OSError):
        await asyncio.to_thread(vnc.connect, endpoint.socket, endpoint.namespace)
    # A socket served from the host itself, put in its place, is refused too.
    os.unlink(endpoint.socket)
    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    other.bind(endpoint.socket)
    other.listen(1)
    with other, pytest.raises(vnc.VncRefused, match="outside the sandbox"):
        await asyncio.to_thread(vnc.connect, endpoint.socket, None)
    assert await _rfb_greeting(server) == b""


def test_the_live_display_lists_each_desktops_url() -> None:
    out = io.StringIO()
    console = Console(file=out, width=300, force_terminal=False)

    async def go() -> None:
        async with watch.serving() as server:
            progress = BatchProgress(console, total=2)
            progress.handle(TrialStarted("t1", "form"))
            progress.handle(TrialStarted("t2", "calibration"))
            progress.handle(DesktopReady("t1", "form", 800, 600, "/nowhere.sock", 4026531836))
            progress.handle(DesktopReady("t2", "calibration", 800, 600))  # no view
            url = server.url("t1")
            assert progress._running["t1"].url == url
            assert url in out.getvalue() and "desktop of calibration: no view" in out.getvalue()
            async with aiohttp.ClientSession() as http:
                async with http.get(f"{server.base}/{server.token}/") as index:
                    assert index.status == 200 and "form" in await index.text()
                async with http.get(url, allow_redirects=False) as short:
                    viewer = short.headers["Location"]
                assert short.status == 302 and "/novnc/vnc.html?autoconnect=1" in viewer
                assert "view_only=1" in viewer and "desktops/t1/websockify" in unquote(viewer)
                async with http.get(viewer) as page:
                    assert page.status == 200 and "noVNC" in await page.text()
                async with http.get(f"{server.base}/desktops/t1/") as guessed:
                    assert guessed.status == 404  # no token, nothing
            progress.handle(TrialFinished("t1", "form", True, "reward 1"))
            assert "t1" not in server._desktops

    asyncio.run(go())


def test_watch_and_interactive_refuse_several_attempts(tmp_path: Path) -> None:
    # in this process (tests/cli_inprocess.py): a refused option starts nothing, and a
    # fresh interpreter per flag would add only its start
    for flag in ("--watch", "--interactive", "-i"):
        result = helios_inprocess(
            "run", str(GUI_EXAMPLES / "browser-form"), "-k", "2", flag, "--agent", "oracle",
            "-o", str(tmp_path), cwd=tmp_path,
        )  # fmt: skip
        assert result.returncode == 2, result.stderr
        assert "The -k option is incompatible with --watch and --interactive modes" in (
            result.stderr
        )


def test_run_watch_prints_the_desktops_url(tmp_path: Path) -> None:
    need_desktop("docker")
    result = subprocess.run(
        helios_cmd("run", str(GUI_EXAMPLES / "browser-form"), "--watch", "--agent", "oracle",
                   "--provider", "docker", "-o", str(tmp_path)),
        capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "250"},
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "watching: the desktops are listed at http://127.0.0.1:" in output
    assert "desktop of browser-form: http://127.0.0.1:" in output


async def _click_through_vnc(server: watch.WatchServer, x: int, y: int) -> None:
    """A viewer's click at (x, y), sent as RFB over the bridge (no authentication,
    as x11vnc -nopw offers): handshake, a press and a release, then a whole-screen
    update, which x11vnc sends only after it has handled the input before it."""
    url = f"ws://127.0.0.1:{server.port}/{server.token}/desktops/t1/websockify"
    async with aiohttp.ClientSession() as http, http.ws_connect(url, protocols=("binary",)) as ws:
        buffered = b""

        async def read(n: int) -> bytes:
            nonlocal buffered
            while len(buffered) < n:
                message = await ws.receive(timeout=20)
                assert message.type == aiohttp.WSMsgType.BINARY, message
                buffered += message.data
            data, buffered = buffered[:n], buffered[n:]
            return data

        def u16(value: int) -> bytes:
            return value.to_bytes(2, "big")

        assert (await read(12)).startswith(b"RFB 003.")
        await ws.send_bytes(b"RFB 003.008\n")
        types = await read((await read(1))[0])
        assert 1 in types  # None
        await ws.send_bytes(b"\x01")
        assert await read(4) == b"\x00\x00\x00\x00"
        await ws.send_bytes(b"\x01")  # ClientInit, shared
        init = await read(24)
        width, height = int.from_bytes(init[0:2], "big"), int.from_bytes(init[2:4], "big")
        depth = init[4]  # bits per pixel
        await read(int.from_bytes(init[20:24], "big"))  # the desktop's name
        for mask in (1, 0):
            await ws.send_bytes(bytes([5, mask]) + u16(x) + u16(y))
        await ws.send_bytes(bytes([3, 0]) + u16(0) + u16(0) + u16(width) + u16(height))
        while (kind := (await read(1))[0]) != 0:  # bells and cut text before it
            if kind == 3:
                await read(int.from_bytes((await read(7))[3:], "big"))
        for _ in range(int.from_bytes((await read(3))[1:], "big")):
            rect = await read(12)
            assert rect[8:12] == b"\x00\x00\x00\x00"  # raw: we asked for no other
            w, h = int.from_bytes(rect[4:6], "big"), int.from_bytes(rect[6:8], "big")
            await read(w * h * depth // 8)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_only_interactive_lets_the_viewer_act(provider: str) -> None:
    need_desktop(provider)

    async def go(interactive: bool) -> str:
        async with sandbox(provider) as env, watch.serving() as server:
            endpoint = await _desktop_with_view(env, interactive=interactive)
            server.add(_ready(endpoint))
            desktop = await Desktop.start(env)  # attached: to read the page's title
            await _click_through_vnc(server, 200, 400)
            if interactive:
                await title_shows(desktop, "events: up b0 n1 none")
            # A probe click of Helios's own after the viewer's: once it shows, the
            # viewer's (sent first) has had its chance to show too; the page counts
            # every click it saw.
            await desktop.execute(Action("click", point=(300, 400), button="right"))
            await title_shows(desktop, "events: up b2 n1 none ups")
            return (await desktop.run("wmctrl -l")).stdout

    async def both() -> None:
        assert "ups 2" in await go(interactive=True)
        assert "ups 1" in await go(interactive=False)  # the viewer's click never arrived

    run_async(both())


def test_batch_watch_lists_each_gui_trials_url(tmp_path: Path) -> None:
    """Through the worker processes too (-n 2: two workers), each GUI trial's URL
    reaches the live display of the parent, which serves it."""
    need_desktop("local")
    proc = subprocess.Popen(
        helios_cmd("batch", str(GUI_EXAMPLES), "--watch", "--agent", "oracle", "-n", "2",
                   "--workers", "2", "--provider", "local", "-o", str(tmp_path)),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "COLUMNS": "250"},
    )  # fmt: skip
    # While the GUI trials run, the run folder lists their desktops (for helios view).
    listed: list[str] = []
    deadline = time.monotonic() + 240
    while not listed and proc.poll() is None and time.monotonic() < deadline:
        for path in tmp_path.glob(f"batch_*/{watch.DESKTOPS_FILE}"):
            with contextlib.suppress(OSError, ValueError):
                listed = [d["url"] for d in json.loads(path.read_text())["desktops"]]
        time.sleep(0.05)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, output
    for task in ("browser-form", "click-calibration"):
        assert f"desktop of {task}: http://127.0.0.1:" in output, output
    assert listed and all(url in output for url in listed)
    assert list(tmp_path.glob(f"batch_*/{watch.DESKTOPS_FILE}")) == []  # gone at the end


def test_the_watch_server_lists_its_desktops_in_the_run_folder(tmp_path: Path) -> None:
    """For `helios view`: `desktops.json` (0600: the URLs carry the token) follows
    the desktops as they come and go, and is gone when the server stops."""

    async def go() -> None:
        server = watch.WatchServer()
        await server.start()
        try:
            server.publish_in(tmp_path)
            listed = tmp_path / watch.DESKTOPS_FILE
            assert json.loads(listed.read_text())["desktops"] == []
            assert listed.stat().st_mode & 0o777 == 0o600
            ready = DesktopReady("t1", "click-ok", 320, 200, vnc_socket="/x", vnc_namespace=1)
            url = server.add(ready)
            assert json.loads(listed.read_text())["desktops"] == [
                {"trial_id": "t1", "label": "click-ok", "url": url}
            ]
            server.remove("t1")
            assert json.loads(listed.read_text())["desktops"] == []
        finally:
            await server.stop()
        assert not (tmp_path / watch.DESKTOPS_FILE).exists()

    asyncio.run(go())
