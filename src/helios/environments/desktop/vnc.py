"""The desktop's VNC view: an x11vnc *service* in the sandbox on a unix socket in
the sandbox's exchange folder, and the host's checked way to connect to it.

The sandbox's processes can write the exchange folder, so what is there may have
been replaced by the agent (a symlink to a host socket, a file, another socket).
`connect` opens the path with O_PATH|O_NOFOLLOW (a link is refused), checks with
fstat that it is a socket, connects through /proc/self/fd/N (the very inode it
checked), and takes the peer only if SO_PEERCRED names a process of the sandbox's
pid namespace: the namespace of the x11vnc that answered the first connection,
made by `start_vnc` before any agent process existed, and never the host's own.

Nothing here listens on a network: x11vnc runs with `-rfbport 0 -rfbportv6 0
-noipv6`.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import socket
import stat
import struct
import time
from dataclasses import dataclass

from helios._proc import within
from helios.environments.base import Environment
from helios.environments.desktop.desktop import DISPLAY, DesktopUnavailable
from helios.environments.desktop.services import SERVICE_VNC
from helios.environments.desktop.view_mode import ViewMode as ViewMode

SOCKET_NAME = "helios-vnc.sock"
#: what every RFB server says first ("RFB 003.008\n")
RFB_BANNER = b"RFB 00"
_PEERCRED = struct.Struct("3i")


class VncRefused(OSError):
    """The socket in the exchange folder is not the sandbox's x11vnc."""


@dataclass(frozen=True)
class VncEndpoint:
    #: the socket's host path
    socket: str
    #: the inode of the pid namespace whose processes may serve it
    namespace: int
    interactive: bool


def x11vnc_command(socket_path: str, *, interactive: bool) -> str:
    options = [
        # no TCP at all: `-rfbport 0` alone still listens on [::]:5900
        "-display", DISPLAY, "-unixsock", socket_path, "-rfbport", "0", "-rfbportv6", "0",
        "-noipv6",
        "-forever", "-shared", "-nopw", "-quiet", "-nolookup",
    ]  # fmt: skip
    if not interactive:
        options.append("-viewonly")
    return "exec x11vnc " + " ".join(shlex.quote(option) for option in options)


async def start_vnc(env: Environment, *, interactive: bool, timeout: float = 30.0) -> VncEndpoint:
    """Start x11vnc on the running desktop as a service and return where the host
    may connect. Call it before the agent runs: the namespace of the first peer
    is what later connections are checked against. `DesktopUnavailable` if the
    sandbox has no exchange folder or x11vnc does not answer."""
    exchange = env.exchange_dir()
    if exchange is None:
        raise DesktopUnavailable(f"the {env.name} provider has no exchange folder for a VNC socket")
    inside, host = exchange
    inner = f"{inside.rstrip('/')}/{SOCKET_NAME}"
    outer = str(host / SOCKET_NAME)
    await env.exec(f"rm -f {shlex.quote(inner)}", cwd="/", timeout=timeout)
    await env.start_service(SERVICE_VNC, x11vnc_command(inner, interactive=interactive),
                            env={"DISPLAY": DISPLAY})  # fmt: skip
    deadline = time.monotonic() + timeout
    # about a second of polls per command; between them, an x11vnc that died ends it
    polls = (
        f"i=0; until [ -S {shlex.quote(inner)} ]; do i=$((i+1)); [ $i -lt 50 ] || exit 3; "
        "sleep 0.02; done"
    )
    while not (await env.exec(polls, cwd="/", timeout=timeout)).ok:
        if time.monotonic() > deadline or not await env.service_running(SERVICE_VNC):
            raise DesktopUnavailable(f"x11vnc made no socket at {inner} within {timeout:g}s")
    try:
        namespace = await within(max(1.0, deadline - time.monotonic()), _first_peer(outer))
    except (OSError, TimeoutError) as exc:
        raise DesktopUnavailable(f"x11vnc does not answer on {inner}: {exc}") from None
    return VncEndpoint(outer, namespace, interactive)


async def _first_peer(path: str) -> int:
    """The pid namespace of the server on `path`, once it greets (retried until then)."""
    while True:
        try:
            sock, namespace = await asyncio.to_thread(connect, path, None)
        except ConnectionRefusedError:
            await asyncio.sleep(0.02)
            continue
        with sock:
            reader, writer = await asyncio.open_unix_connection(sock=sock)
            try:
                banner = await reader.readexactly(len(RFB_BANNER))
            finally:
                writer.close()
        if banner != RFB_BANNER:
            raise VncRefused(f"{path} does not speak RFB")
        return namespace


def connect(path: str, namespace: int | None) -> tuple[socket.socket, int]:
    """A connected socket to the unix socket at `path` (no link followed), served
    by a process of pid namespace `namespace` (None: any but the host's), and that
    namespace. `VncRefused` (an `OSError`) otherwise; blocking, so call it in a thread."""
    fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            raise VncRefused(f"{path} is not a socket")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(5.0)
            sock.connect(f"/proc/self/fd/{fd}")
            peer = _peer_namespace(sock)
            if peer is None or peer == _own_namespace():
                raise VncRefused(f"{path} is served from outside the sandbox")
            if namespace is not None and peer != namespace:
                raise VncRefused(f"{path} is served by a process of another sandbox")
            sock.settimeout(None)
            return sock, peer
        except BaseException:
            sock.close()
            raise
    finally:
        os.close(fd)


def _peer_namespace(sock: socket.socket) -> int | None:
    pid, _, _ = _PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                 _PEERCRED.size))  # fmt: skip
    if pid <= 0:  # a peer in no namespace of ours
        return None
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return None


def _own_namespace() -> int:
    return os.stat("/proc/self/ns/pid").st_ino
