"""The egress proxy of an allowlisted sandbox: HTTP CONNECT and plain HTTP,
filtered by an `AllowList`, one per sandbox, in Helios's own event loop.

Why a proxy of Helios's own rather than tinyproxy, squid or mitmproxy: the rules
are Harbor's (names, `*.suffix` wildcards, addresses and CIDR blocks, with a
literal address denied when only its name is allowed, and no lookup of a name
that no rule allows). tinyproxy filters by a regular expression on the name and
knows no CIDR; squid can say all of it, with a config, a cache folder and a
daemon per trial (or one shared daemon whose per-trial rules must be reloaded);
mitmproxy is a large dependency that wants a TLS CA. This one is ~200 lines of
asyncio with no package to install, takes a new policy at once when a phase
switches it (`policy`), listens where each provider needs it (a socket in the
sandbox's own network namespace for local, the trial network's gateway for
docker), and keeps each trial's denials apart for its folder (`denials`).

It never decrypts: CONNECT is a byte pipe once allowed. Lookups go through
`HELIOS_EGRESS_HOSTS` first (an /etc/hosts-style file: tests map their names to
127.0.0.1 there), then the host's resolver.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

from helios._proc import within
from helios.environments.egress.policy import AllowList
from helios.settings import current as helios_settings

log = logging.getLogger(__name__)

#: the setting that maps test names for the proxy (`hosts_override`)
HOSTS_VARIABLE = "HELIOS_EGRESS_HOSTS"
#: a request's head may not be longer (bytes) nor take longer (seconds)
MAX_HEAD = 64 * 1024
HEAD_TIMEOUT = 30.0
CONNECT_TIMEOUT = 15.0
#: how long a refused client may go on sending before its connection closes
LINGER = 2.0
#: connections through one proxy at once; denials kept for the trial's log
MAX_CONNECTIONS = 256
MAX_DENIALS = 10_000
_CHUNK = 64 * 1024
#: what ends one client's connection quietly (a bad request, a peer gone)
_CLIENT_ERRORS = (TimeoutError, OSError, asyncio.IncompleteReadError,
                  asyncio.LimitOverrunError, ValueError)  # fmt: skip
_HOP_HEADERS = (b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive")


def hosts_override() -> dict[str, list[str]]:
    """HELIOS_EGRESS_HOSTS's names -> addresses (empty when unset or unreadable)."""
    path = helios_settings().egress_hosts
    found: dict[str, list[str]] = {}
    if not path:
        return found
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        log.warning("%s=%s cannot be read: %s", HOSTS_VARIABLE, path, exc)
        return found
    for line in lines:
        fields = line.split("#", 1)[0].split()
        for name in fields[1:]:
            found.setdefault(name.lower().rstrip("."), []).append(fields[0])
    return found


class EgressProxy:
    """One sandbox's proxy. `policy` may be replaced at any time (a phase's own)."""

    def __init__(self, policy: AllowList) -> None:
        self.policy = policy
        #: one line per denied request, oldest first (bounded)
        self.denials: list[str] = []
        self._servers: list[asyncio.Server] = []
        self._slots = asyncio.Semaphore(MAX_CONNECTIONS)
        self._hosts = hosts_override()
        #: the connections being served (ended at `close`: a tunnel never ends by itself)
        self._tasks: set[asyncio.Task[None]] = set()

    async def serve(self, sock: socket.socket) -> None:
        """Accept connections on a listening socket (the proxy closes it at `close`)."""
        sock.setblocking(False)
        self._servers.append(await asyncio.start_server(self._client, sock=sock))

    async def close(self) -> None:
        servers, self._servers = self._servers, []
        for server in servers:
            server.close()
        tasks, self._tasks = list(self._tasks), set()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5)
        for server in servers:
            with contextlib.suppress(Exception):
                await within(5, server.wait_closed())

    def _deny(self, method: str, target: str, reason: str) -> None:
        if len(self.denials) < MAX_DENIALS:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            self.denials.append(f"{stamp} denied {method} {target}: {reason}")

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is None or not self._servers:
            writer.close()
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        async with self._slots:
            try:
                if not await self._handle(reader, writer):
                    await _linger(reader, writer)
            except _CLIENT_ERRORS:
                pass
            except asyncio.CancelledError:
                # `close` ended it; the server's own callback would log a cancel
                # it cannot tell from a failure
                return
            finally:
                writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Serve one request; False when it was refused."""
        head = await within(HEAD_TIMEOUT, _read_head(reader))
        line, _, rest = head.partition(b"\r\n")
        method, target, version = line.decode("latin-1").split(" ", 2)
        if method.upper() == "CONNECT":
            host, port = _split_host_port(target, 443)
            upstream = await self._open(method, target, host, port, writer)
            if upstream is None:
                return False
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await _pipe(reader, writer, *upstream)
            return True
        url = urlsplit(target)
        if url.scheme.lower() != "http" or not url.hostname:
            self._deny(method, target, "not an absolute http:// URL")
            await _refuse(writer, 400, "a proxy request names an http:// URL")
            return False
        upstream = await self._open(method, target, url.hostname, url.port or 80, writer)
        if upstream is None:
            return False
        path = url.path or "/"
        path += f"?{url.query}" if url.query else ""
        headers = [h for h in rest.split(b"\r\n") if h and
                   h.split(b":", 1)[0].strip().lower() not in _HOP_HEADERS]  # fmt: skip
        upstream[1].write(
            f"{method} {path} {version}\r\n".encode("latin-1")
            + b"".join(h + b"\r\n" for h in headers) + b"Connection: close\r\n\r\n"
        )
        await _pipe(reader, writer, *upstream)
        return True

    async def _open(
        self, method: str, target: str, host: str, port: int, writer: asyncio.StreamWriter
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """The upstream connection if the policy allows `host`; else a 403, logged."""
        reason = self.policy.verdict(host, port)
        if reason is not None:
            self._deny(method, target, reason)
            await _refuse(writer, 403, f"{host} is not in this sandbox's allowed_hosts")
            return None
        try:
            addresses = await self._resolve(host, port)
            return await within(CONNECT_TIMEOUT, _connect(addresses, port))
        except (TimeoutError, OSError) as exc:
            await _refuse(writer, 502, f"cannot reach {host}:{port}: {exc}")
            return None

    async def _resolve(self, host: str, port: int) -> list[str]:
        bare = host.strip("[]")
        mapped = self._hosts.get(bare.lower().rstrip("."))
        if mapped:
            return mapped
        infos = await asyncio.get_running_loop().getaddrinfo(
            bare, port, type=socket.SOCK_STREAM
        )
        return [str(info[4][0]) for info in infos]


async def _connect(
    addresses: Iterable[str], port: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    error: OSError = OSError("no address")
    for address in addresses:
        try:
            return await asyncio.open_connection(address, port, limit=_CHUNK)
        except OSError as exc:
            error = exc
    raise error


async def _read_head(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    if len(head) > MAX_HEAD:
        raise ValueError("request head too long")
    return head[:-4]


def _split_host_port(target: str, default: int) -> tuple[str, int]:
    if target.startswith("["):
        host, _, tail = target[1:].partition("]")
        return host, int(tail[1:]) if tail.startswith(":") else default
    host, sep, port = target.rpartition(":")
    return (host, int(port)) if sep else (target, default)


async def _refuse(writer: asyncio.StreamWriter, status: int, text: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    body = (text + "\n").encode()
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body
    )
    with contextlib.suppress(OSError):
        await writer.drain()


async def _linger(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """After a refusal: end our side, and read what the client sent on (a tunnel's
    first bytes) before closing, or the kernel's reset may beat the answer to it."""
    with contextlib.suppress(*_CLIENT_ERRORS):
        if writer.can_write_eof():
            writer.write_eof()
        await within(LINGER, reader.read(MAX_HEAD))


async def _pipe(
    client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter,
    up_r: asyncio.StreamReader, up_w: asyncio.StreamWriter,
) -> None:  # fmt: skip
    """Copy bytes both ways until both sides have ended."""
    try:
        await asyncio.gather(_copy(client_r, up_w), _copy(up_r, client_w))
    finally:
        up_w.close()


async def _copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    try:
        while data := await src.read(_CHUNK):
            dst.write(data)
            await dst.drain()
        if dst.can_write_eof():
            dst.write_eof()
    except OSError:
        dst.close()
