"""The local provider's allowlisted network: a network namespace of its own whose
only listening socket is the egress proxy's, and no other interface than `lo`.

Helios makes the namespace from a short-lived thread (`unshare(CLONE_NEWNET)`
moves that thread alone), brings `lo` up, opens the proxy's socket on
127.0.0.1:PROXY_PORT there and returns to its own namespace. The socket is
served by the proxy in Helios's event loop, on the host side, so nothing in the
sandbox can stop it or reach past it. Each bwrap of the sandbox joins the
namespace (`nsenter --net=/proc/<helios>/fd/<n>`, then `--share-net`): the
sandbox's user namespace does not own it, so even its root cannot add a route,
an address or an interface. Its resolver (/etc/resolv.conf, the host's) is an
address with no route from here, so no lookup leaves the namespace: names are
resolved by the proxy, and only allowed ones.

Making and joining a namespace owned by the host's user namespace needs
CAP_SYS_ADMIN: Helios must run as root (`available`).
"""

from __future__ import annotations

import asyncio
import ctypes
import fcntl
import os
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass

CLONE_NEWNET = 0x40000000
PROXY_PORT = 3128
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


def available() -> str | None:
    """None when this host can make such namespaces; else why not, in one line."""
    if os.geteuid() != 0:
        return "allowlisted networks on the local provider need Helios to run as root"
    if not os.path.exists("/proc/thread-self/ns/net"):
        return "this host has no network namespaces"
    return None


@dataclass
class Namespace:
    #: Helios's own descriptor of the namespace (it lives while this is open)
    fd: int
    #: the proxy's listening socket inside it
    listener: socket.socket

    @property
    def path(self) -> str:
        """The path a child process of Helios opens to join it."""
        return f"/proc/{os.getpid()}/fd/{self.fd}"

    def close(self) -> None:
        self.listener.close()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        request = struct.pack("16sh22x", b"lo", 0)
        flags = struct.unpack("16sh22x", fcntl.ioctl(probe, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(probe, _SIOCSIFFLAGS, struct.pack("16sh22x", b"lo", flags | _IFF_UP))


def _make(address: tuple[str, int], setup: Callable[[], None] | None) -> Namespace:
    """Run in a thread of its own, which ends after (its namespace is then moot).
    `setup` runs inside the namespace first (a process it starts is in it too)."""
    libc = ctypes.CDLL(None, use_errno=True)
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        _check(libc.unshare(CLONE_NEWNET), "unshare(CLONE_NEWNET)")
        try:
            fd = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            _loopback_up()
            if setup is not None:
                setup()
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(address)
            listener.listen(128)
        finally:
            _check(libc.setns(own, CLONE_NEWNET), "setns back")
    finally:
        os.close(own)
    # A child process must be able to open /proc/<pid>/fd/<fd>, not inherit it.
    return Namespace(fd, listener)


async def make_namespace(
    address: tuple[str, int] = ("127.0.0.1", PROXY_PORT), setup: Callable[[], None] | None = None
) -> Namespace:
    """A fresh namespace with the proxy's socket listening in it at `address`, after
    `setup` (run inside it: the docker provider's interface on the trial network)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Namespace] = loop.create_future()

    def work() -> None:
        try:
            made = _make(address, setup)
        except BaseException as exc:  # handed to the awaiting task
            loop.call_soon_threadsafe(_settle, done, None, exc)
        else:
            loop.call_soon_threadsafe(_settle, done, made, None)

    threading.Thread(target=work, name="helios-netns", daemon=True).start()
    return await done


def _settle(done: asyncio.Future[Namespace], made: Namespace | None,
            exc: BaseException | None) -> None:  # fmt: skip
    if done.cancelled():
        if made is not None:
            made.close()
    elif exc is not None:
        done.set_exception(exc)
    elif made is not None:
        done.set_result(made)
