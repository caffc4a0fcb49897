"""The host side of the shell server's wire protocol: one long-lived server process
per sandbox runs the sandbox's commands, instead of one process (a bwrap, or a
daemon exec) per command. Both providers use it: local (`local.pool`, the server
inside bwrap) and docker (`docker.shell`, the static server as the container's init).

Local: the server (`shell/server.c`, or its twin `shell/server.py`) runs in the
sandbox under the same bwrap command line a one-shot exec gets (read-only system
folders, empty environment plus the sandbox's own, rlimits, no network unless
allowed, its own pid namespace, die-with-parent), so every property of a one-shot
exec holds; what it adds is that the sandbox's init survives between commands.
After each command the server kills every other process of its pid namespace, so
no process outlives its command, exactly as when the namespace itself ended.

The host side here frames one request per command over the server's stdin and
reads typed frames back (see the server's docstring). Anything unexpected (a
torn frame, the server killed by the command itself, a cancel mid-command)
kills the whole shell; the next command starts a fresh one. A shell that runs
*services* (`start_service`: Helios's own long-lived processes, which the
server's kills spare) is not killed for a cancel, a timeout or a refused output:
the command's processes are killed from the host instead, and the shell, with
its services, serves on (`_abort`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass
from typing import Protocol

from helios._proc import CappedOutput, decode, release, run_to_end, spawn, within
from helios.environments.base import ExecResult
from helios.environments.local.cleanup import kill_marked
from helios.environments.shell.procs import (
    ServerState,
    children,
    identity,
    server_pidfd,
    server_state,
)
from helios.errors import EnvironmentExecError

#: a frame larger than this is a broken (or forged) stream, not output
MAX_FRAME = 1 << 20
#: the server must say it is ready within this time
START_TIMEOUT = 30.0
#: beyond a command's own timeout (which the server enforces), the host waits this long
BACKSTOP = 15.0
#: what a command's result says when its shell died under it (as a SIGKILL would)
DIED_CODE = 128 + signal.SIGKILL
#: how long a command in flight may take to end once its processes are killed
ABORT_SECONDS = 10.0
#: how long the server may take to start a service or to say which run
SERVICE_TIMEOUT = 30.0
#: where a service's output goes, `<name>.log`, in the sandbox
SERVICE_LOGS = "/logs/helios/services"


class ShellUnavailable(Exception):
    """The server could not start here (no usable python3 in the sandbox's view)."""


class Sink(Protocol):
    """Where a command's stdout goes instead of the result (a download's archive).
    `add` may raise to refuse the output (past a bound): the command is then
    stopped at once (`SandboxShell.refused`) and the sink's error raised."""

    def add(self, data: bytes) -> None: ...


class _Refused(Exception):
    """The sink refused the command's output; `reason` is what it raised."""

    def __init__(self, reason: Exception) -> None:
        super().__init__(str(reason))
        self.reason = reason


class Dropped:
    """A sink that keeps nothing (what a refused command still writes)."""

    def add(self, data: bytes) -> None:
        return None


def _text(out: CappedOutput | Sink) -> str:
    return decode(out.value()) if isinstance(out, CappedOutput) else ""


@dataclass(frozen=True)
class ServiceId:
    """A service as its server knows it: its pid (in the sandbox) and start time."""

    pid: int
    start: int


class SandboxShell:
    """One running server; `run` one command at a time (`busy` says when not)."""

    start_timeout = START_TIMEOUT

    def __init__(self, argv: list[str], env: dict[str, str], marker: str) -> None:
        self.argv, self.env, self.marker = argv, env, marker
        self.proc: asyncio.subprocess.Process | None = None
        self._idle = asyncio.Event()
        self.busy = False
        self.dead = False
        #: the services this server started, by name
        self.services: dict[str, ServiceId] = {}
        #: a frame's header read before a cancel: its payload comes next
        self._header: bytes | None = None
        #: the server is not dumpable: no process of the sandbox can trace it or
        #: open its pipes, so it may outlive the agent's phase (see `keeps`)
        self.sealed = False
        #: the server (the sandbox's pid 1): killing it ends the whole pid namespace
        self._server: int | None = None
        #: the last close killed the server by its pidfd: nothing of it can be left
        self.clean = False
        #: the server's host pid, and what a command could change in it (below)
        self._server_pid: int | None = None
        self._state: ServerState | None = None
        self._stderr: asyncio.Task[bytes] | None = None

    async def start(self) -> None:
        try:
            self.proc = await spawn(self.argv, stdin=True, env=self.env)
            assert self.proc.stderr is not None
            self._stderr = asyncio.ensure_future(_tail(self.proc.stderr))
            # asyncio.timeout, not wait_for: on 3.11 wait_for loses a cancel that
            # lands as the ready frame arrives (gh-86296), and the command then runs
            # on, uncancelled (tests/test_sandbox_interrupts.py caught it).
            async with asyncio.timeout(self.start_timeout):
                kind, data = await self._frame()
            if kind != b"R":
                raise ShellUnavailable(f"unexpected first frame {kind!r}")
            self.sealed = data == b"sealed"
            found = server_pidfd(self.proc.pid)
            if found is not None:
                self._server, self._server_pid = found
                self._state = server_state(self._server_pid)
        except BaseException as exc:
            # To its end even through another cancel: the server must not be left
            # running (nor its transport to outlive the event loop).
            reason = await run_to_end(self._fail())
            if isinstance(exc, ShellUnavailable | asyncio.IncompleteReadError | TimeoutError):
                raise ShellUnavailable(reason or str(exc)) from None
            raise

    @property
    def busy(self) -> bool:
        return self._busy

    @busy.setter
    def busy(self, value: bool) -> None:
        self._busy = value
        if value:
            self._idle.clear()
        else:
            self._idle.set()

    async def wait_idle(self) -> None:
        """Until no command holds the shell (a command ends within its timeout)."""
        while self.busy:
            await self._idle.wait()

    def head(self, operation: bytes, user: str = "") -> tuple[bytes, ...]:
        """The fields before a request's own: the operation (container mode: and
        the user, `docker.shell`)."""
        return (operation,)

    async def start_service(self, name: str, script: str, env: dict[str, str], *,
                            user: str = "") -> ServiceId:  # fmt: skip
        """Start `script` as the service `name` (the caller checked the name and made
        the log's folder): its output is appended to SERVICE_LOGS/<name>.log."""
        await self.wait_idle()
        log = f"{SERVICE_LOGS}/{name}.log".encode()
        result = await self.run(script, env, SERVICE_TIMEOUT, data=log,
                                head=self.head(b"service", user))  # fmt: skip
        fields = result.stdout.split()
        if not result.ok or len(fields) != 2 or not all(f.isdigit() for f in fields):
            why = result.stderr.strip() or f"exit {result.exit_code}"
            raise EnvironmentExecError(f"the service {name!r} did not start: {why[:300]}")
        service = self.services[name] = ServiceId(int(fields[0]), int(fields[1]))
        return service

    async def running_services(self) -> set[int]:
        """The pids of this server's services still alive (its pid *and* start time)."""
        if not self.services or self.dead:
            return set()
        await self.wait_idle()
        result = await self.run("", {}, SERVICE_TIMEOUT, head=self.head(b"status"))
        if not result.ok:
            return set()
        return {int(pid) for pid in result.stdout.split() if pid.isdigit()}

    async def stop_others(self, timeout: float) -> ExecResult:
        """Kill every process of the sandbox but the server and what its services
        spare; ok when none is left."""
        return await self.run("", {}, timeout, head=self.head(b"stop"))

    async def _fail(self) -> str:
        """After a failed start: why (the server's stderr), once the shell is closed."""
        reason = await self._failure_reason()
        await self.close()
        return reason

    async def _failure_reason(self) -> str:
        task = self._stderr
        if task is not None and not task.done():
            # The process failed: its stderr ends with it (or soon after).
            with contextlib.suppress(TimeoutError):
                await within(1, asyncio.shield(task))
        if task is None or not task.done() or task.cancelled():
            return ""
        return decode(task.result()).strip()[-300:]

    async def _frame(self) -> tuple[bytes, bytes]:
        """The next frame. A cancel between its header and its payload keeps the
        header, so that the stream can still be read on (`_abort`)."""
        assert self.proc is not None and self.proc.stdout is not None
        if self._header is None:
            self._header = await self.proc.stdout.readexactly(5)
        header = self._header
        size = int.from_bytes(header[1:], "big")
        if size > MAX_FRAME:
            raise asyncio.IncompleteReadError(header, None)
        payload = await self.proc.stdout.readexactly(size)
        self._header = None
        return header[:1], payload

    async def run(
        self,
        script: str,
        env: dict[str, str],
        timeout: float | None,
        *,
        data: bytes = b"",
        sink: Sink | None = None,
        head: tuple[bytes, ...] = (),
    ) -> ExecResult:
        """Run one command. `data` is its stdin; with `sink`, its stdout goes there
        (uncapped: the sink bounds it) and the result's stdout is empty. `head`:
        the fields the server reads before the command's (`head()`: a "run")."""
        if self.proc is None or self.proc.stdin is None or self.dead:
            raise ShellUnavailable("the shell is not running")
        self.busy = True
        out: CappedOutput | Sink = CappedOutput() if sink is None else sink
        err = CappedOutput()
        try:
            backstop = None if timeout is None else timeout + BACKSTOP
            async with asyncio.timeout(backstop):
                fields = head or self.head(b"run")
                self.proc.stdin.write(_request(script, env, timeout, data, fields))
                await self.proc.stdin.drain()
                return await self._collect(out, err)
        except TimeoutError:
            await run_to_end(self._interrupt())
            return ExecResult(_text(out), _text(err), -signal.SIGKILL, timed_out=True)
        except _Refused as refused:
            # Not left to stream on until its timeout: stopped now.
            await run_to_end(self.refused())
            raise refused.reason from None
        except (asyncio.IncompleteReadError, ConnectionError, ValueError, KeyError):
            # The command killed its shell, or the stream broke: this command's
            # result is what came so far; the next command gets a fresh shell.
            await self._kill()
            err.add(b"\n[the sandbox's shell died during this command]\n")
            return ExecResult(_text(out), _text(err), DIED_CODE)
        except BaseException:
            # A cancel mid-command: what runs must not go on unseen.
            await run_to_end(self._interrupt())
            raise
        finally:
            self.busy = False

    async def _collect(self, out: CappedOutput | Sink, err: CappedOutput) -> ExecResult:
        while True:
            kind, data = await self._frame()
            if kind == b"O":
                try:
                    out.add(data)
                except Exception as exc:
                    raise _Refused(exc) from exc
            elif kind == b"E":
                err.add(data)
            elif kind == b"X":
                status, timed = data.split(b" ")
                timed_out = timed == b"1"
                # A timed-out command reads as killed, as a one-shot exec's bwrap does.
                code = -signal.SIGKILL if timed_out else int(status)
                return ExecResult(_text(out), _text(err), code, timed_out)
            else:
                raise ValueError(f"unknown frame {kind!r}")

    @property
    def reusable(self) -> bool:
        """May serve the next phase (a verifier): alive, idle, sealed, its server
        known. Between commands its namespace holds nothing but the server, which
        killed everything else when the last command ended."""
        if not self.sealed or self.dead or self.busy or self._server is None:
            return False
        # Lower limits, a higher nice value or another CPU set given to the server
        # by a command would pass on to the verifier's processes: then it goes.
        return self._server_pid is not None and server_state(self._server_pid) == self._state

    async def refused(self) -> None:
        """Stop a command whose output was refused. Here the whole shell goes: its
        namespace, the command with it, ends at once; the next command starts a
        fresh shell (the sandbox's files stay). A shell with services stays."""
        await self._interrupt()

    async def _interrupt(self) -> None:
        """Stop the command in flight: the whole shell, unless it has services and
        they can be spared (`_abort`)."""
        if not (self.services and await self._abort()):
            await self._kill()

    async def _abort(self) -> bool:
        """Kill, from the host, the server's children that are not its services (the
        command, and the orphans it left); the server then kills the rest, sparing
        the services, and ends the command's answer, which is read and dropped.
        False when that fails (the caller kills the whole shell)."""
        server = self._server_pid
        if server is None or self.proc is None or self.dead:
            return False
        spared = {(s.pid, s.start) for s in self.services.values()}
        try:
            async with asyncio.timeout(ABORT_SECONDS):
                for child in children(server):
                    if identity(child) not in spared:
                        with contextlib.suppress(OSError):
                            os.kill(child, signal.SIGKILL)
                await self._collect(Dropped(), CappedOutput())
        except Exception:
            return False
        return True

    async def _kill(self) -> None:
        self.dead = True
        await self.close()

    async def close(self) -> None:
        """Kill the shell and everything in its sandbox namespace; idempotent. It runs
        to its end even if cancelled meanwhile (then the cancel goes on): a server
        killed but not reaped would outlive its event loop."""
        await run_to_end(self._close())

    async def _close(self) -> None:
        self.dead = True
        proc, self.proc = self.proc, None
        server, self._server = self._server, None
        if proc is None and server is None:
            return  # closed before
        if server is not None:
            # The namespace's init: the kernel kills every process of it.
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(server, signal.SIGKILL)
            os.close(server)
        if proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            if proc.stdin is not None:
                proc.stdin.close()
        exited = False
        if proc is not None:
            try:
                await within(5, ended(proc))
                exited = True
            except TimeoutError:
                release(proc)
        self.clean = server is not None and exited
        if not self.clean and (proc is not None or server is not None):
            # The server was never known (a failed start): find it by its marker.
            await kill_marked(self.marker)
        if self._stderr is not None:
            self._stderr.cancel()
            with contextlib.suppress(BaseException):
                await self._stderr


async def ended(proc: asyncio.subprocess.Process) -> None:
    """The process's end, what it left unread on stdout dropped: asyncio's `wait`
    also waits for its pipes to close, and one whose reading stopped midway (a
    refused download's) is not read to its end otherwise."""

    async def drop(stream: asyncio.StreamReader | None) -> None:
        while stream is not None and await stream.read(65536):
            pass

    await asyncio.gather(proc.wait(), drop(proc.stdout))


def _request(
    script: str, env: dict[str, str], timeout: float | None, data: bytes,
    head: tuple[bytes, ...] = (),
) -> bytes:  # fmt: skip
    """One command for the server: length-prefixed fields (see `shell.server`)."""
    fields = [*head, b"" if timeout is None else repr(float(timeout)).encode(), script.encode(),
              data, str(len(env)).encode()]  # fmt: skip
    for name, value in env.items():
        fields += [name.encode(), value.encode()]
    return b"".join(b"%d\n%s" % (len(f), f) for f in fields)


async def _tail(stream: asyncio.StreamReader, keep: int = 4096) -> bytes:
    """Read the server's stderr to its end (a traceback, if it failed), keeping the tail."""
    kept = b""
    while chunk := await stream.read(65536):
        kept = (kept + chunk)[-keep:]
    return kept
