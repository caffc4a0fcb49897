"""A line-oriented stdio pipe to a program that runs INSIDE the sandbox, carried by
the sandbox's own exec: its stdin is a file the host appends to, its stdout a file
the host reads from. So it works on every provider (local, docker) without a
socket, a socat or a Python in the image.

Two users: the tool agent's stdio MCP servers (`mcp_tools`, the program is a
Helios service) and the ACP client (`installed.acp`, the program is the agent,
run by one long exec of the agent phase). The reader polls the output file with
a backoff while a request is pending, and not at all when idle.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import re
import shlex
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from helios.environments.base import Environment

#: bytes read from the program's stdout per poll
READ_CHUNK = 256 * 1024
_POLL_MIN, _POLL_MAX = 0.01, 0.2
_SAFE = re.compile(r"[^A-Za-z0-9_-]")


def safe_name(name: str, default: str = "pipe") -> str:
    return _SAFE.sub("_", name)[:40] or default


class PipeClosed(Exception):
    """The program ended (or said something that cannot be read)."""


class SandboxPipe:
    """The program's stdin and stdout, as files in the sandbox read and written by
    exec: `in`, `out` and `err` in `dir`."""

    def __init__(self, env: Environment, dir: str, idle_after: float, label: str = "") -> None:
        self.env = env
        self.dir = dir
        self.label = label
        #: seconds after the last write past which nothing is awaited (no request is
        #: pending that has not timed out): the reader stops polling until the next
        self.idle_after = idle_after
        self.last_write = 0.0
        self.offset = 0
        self.wake = asyncio.Event()

    async def make(self) -> None:
        """Make the folder and its empty files."""
        d = shlex.quote(self.dir)
        made = await self.env.exec(
            f"mkdir -p {d} && : > {d}/in && : > {d}/out", cwd="/", timeout=30
        )
        if not made.ok:
            raise PipeClosed(f"cannot make {self.dir}: {made.stderr.strip()[:200]}")

    def feed(self, argv: str) -> str:
        """The shell command that runs `argv` (already quoted) fed from `in`; it
        never ends by itself (a service's command)."""
        d = shlex.quote(self.dir)
        return f"tail -s 0.05 -n +1 -f {d}/in | {argv} > {d}/out 2> {d}/err"

    async def send(self, line: str) -> None:
        d = shlex.quote(self.dir)
        result = await self.env.exec(
            f"printf '%s\\n' {shlex.quote(line)} >> {d}/in", cwd="/", timeout=30
        )
        if not result.ok:
            raise OSError(f"cannot write to {self.label or 'the program'}: "
                          f"{result.stderr.strip()[:200]}")  # fmt: skip
        self.last_write = asyncio.get_running_loop().time()
        self.wake.set()

    async def read(self) -> bytes:
        d = shlex.quote(self.dir)
        result = await self.env.exec(
            f"tail -c +{self.offset + 1} {d}/out | head -c {READ_CHUNK} | base64 | tr -d '\\n'",
            cwd="/", timeout=30,
        )  # fmt: skip
        if not result.ok:
            raise OSError(f"cannot read the output of {self.label or 'the program'}: "
                          f"{result.stderr.strip()[:200]}")  # fmt: skip
        data = base64.b64decode(result.stdout.strip() or b"")
        self.offset += len(data)
        return data

    async def stderr_tail(self, chars: int = 400) -> str:
        result = await self.env.exec(f"tail -c {chars} {shlex.quote(self.dir)}/err",
                                     cwd="/", timeout=30)  # fmt: skip
        return result.stdout.strip()

    async def lines(
        self, alive: Callable[[], Awaitable[bool]], max_line: int
    ) -> AsyncIterator[bytes]:
        """Each line the program writes, as it comes; `PipeClosed` once it ended
        (`alive` says so) or wrote a line past `max_line` bytes."""
        buffer = b""
        delay = _POLL_MIN
        while True:
            data = await self.read()
            if not data and delay >= _POLL_MAX and not await alive():
                data = await self.read()  # what it wrote before it ended
                if not data:
                    raise PipeClosed("the program exited")
            if not data:
                self.wake.clear()
                if asyncio.get_running_loop().time() - self.last_write > self.idle_after:
                    await self.wake.wait()  # idle: no exec until the next request
                    delay = _POLL_MIN
                    continue
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self.wake.wait()
                delay = _POLL_MIN if self.wake.is_set() else min(delay * 2, _POLL_MAX)
                continue
            delay = _POLL_MIN
            buffer += data
            *done, buffer = buffer.split(b"\n")
            if len(buffer) > max_line:
                raise PipeClosed(f"the program wrote a line past {max_line} bytes")
            for line in done:
                if line.strip():
                    yield line
