"""Async subprocesses with a timeout, an output cap and a clean kill on cancel."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

#: bytes kept per stream; the rest is dropped with a marker, so a chatty
#: command cannot exhaust memory
OUTPUT_CAP = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ProcResult:
    stdout: bytes
    stderr: bytes
    returncode: int
    timed_out: bool


class CappedOutput:
    """One output stream kept up to `cap` bytes; the rest is counted and dropped,
    with a marker at the end (one-shot processes and the sandbox's shell alike)."""

    def __init__(self, cap: int = OUTPUT_CAP) -> None:
        self.cap = cap
        self.chunks: list[bytes] = []
        self.size = 0
        self.dropped = 0

    def add(self, data: bytes) -> None:
        keep = data[: max(self.cap - self.size, 0)]
        if keep:
            self.chunks.append(keep)
            self.size += len(keep)
        self.dropped += len(data) - len(keep)

    def value(self) -> bytes:
        marker = f"\n[... {self.dropped} bytes dropped ...]\n".encode() if self.dropped else b""
        return b"".join(self.chunks) + marker


async def _read_capped(stream: asyncio.StreamReader | None, cap: int) -> bytes:
    output = CappedOutput(cap)
    if stream is not None:
        while chunk := await stream.read(65536):
            output.add(chunk)
    return output.value()


class Process:
    """A child process whose pipes are asyncio streams and whose exit is seen through
    a pidfd, on whatever event loop runs (asyncio's or uvloop).

    Started by `subprocess.Popen`, which uses vfork (or posix_spawn): the child does not
    copy this process's memory before it runs its program. uvloop's own subprocesses
    fork the whole process first, which costs more than its faster loop saves (see
    benchmarks/README.md); and asyncio's default on 3.11 waits for each child in a
    thread of its own. The surface is the part of `asyncio.subprocess.Process` Helios
    uses: pid, returncode, stdin, stdout, stderr, wait(), kill(), send_signal()."""

    def __init__(self, popen: subprocess.Popen[bytes], loop: asyncio.AbstractEventLoop) -> None:
        self._popen = popen
        self._loop = loop
        self.pid = popen.pid
        self.returncode: int | None = None
        self.stdin: asyncio.StreamWriter | None = None
        self.stdout: asyncio.StreamReader | None = None
        self.stderr: asyncio.StreamReader | None = None
        self._pipes: list[asyncio.BaseTransport] = []
        self._exited: asyncio.Future[int] = loop.create_future()
        self._pidfd = os.pidfd_open(popen.pid)
        loop.add_reader(self._pidfd, self._reap)

    async def _connect(self) -> None:
        loop, popen = self._loop, self._popen
        for name in ("stdout", "stderr"):
            pipe = getattr(popen, name)
            if pipe is not None:
                reader = asyncio.StreamReader(limit=2**16, loop=loop)
                protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
                transport, _ = await loop.connect_read_pipe(_given(protocol), pipe)
                self._pipes.append(transport)
                setattr(self, name, reader)
        if popen.stdin is not None:
            sink = asyncio.StreamReaderProtocol(asyncio.StreamReader(loop=loop), loop=loop)
            writer, _ = await loop.connect_write_pipe(_given(sink), popen.stdin)
            self._pipes.append(writer)
            self.stdin = asyncio.StreamWriter(writer, sink, None, loop)

    def _reap(self) -> None:
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere: its status is lost
            pid, status = self.pid, 255 << 8
        if pid == 0:
            return
        self._stop_watching()
        self.returncode = self._popen.returncode = os.waitstatus_to_exitcode(status)
        if not self._exited.done():
            self._exited.set_result(self.returncode)

    def _stop_watching(self) -> None:
        if self._pidfd >= 0:
            with contextlib.suppress(Exception):  # the loop may be closed
                self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = -1

    async def wait(self) -> int:
        if self.returncode is not None:
            return self.returncode
        return await asyncio.shield(self._exited)

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def release(self) -> None:
        """Close the pipes and stop watching for the exit, now."""
        for transport in self._pipes:
            with contextlib.suppress(Exception):
                transport.close()
        self._stop_watching()


def _given(protocol: asyncio.StreamReaderProtocol) -> Callable[[], asyncio.StreamReaderProtocol]:
    return lambda: protocol


def release(proc: Process) -> None:
    """Close a process's pipes now, while the loop runs: one whose bounded wait ran out
    (a pipe held open by something that escaped the kill) must not leave them to the
    garbage collector after the loop has closed."""
    proc.release()


def _kill_group(proc: Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


async def _start(argv: list[str], stdin: bool, env: dict[str, str] | None) -> Process:
    # Popen blocks until the child has exec'd (vfork: well under a millisecond), as
    # asyncio's own subprocess start does on the loop's thread.
    popen = subprocess.Popen(  # noqa: ASYNC220
        argv,
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
        bufsize=0,
    )
    proc = Process(popen, asyncio.get_running_loop())
    try:
        await proc._connect()
    except BaseException:
        _kill_group(proc)
        proc.release()
        raise
    return proc


async def spawn(
    argv: list[str],
    *,
    stdin: bool = False,
    env: dict[str, str] | None = None,
) -> Process:
    """Start `argv` in its own process group, with piped output.

    A cancel that lands while the process's pipes are being attached would leave it
    running unseen (as CPython gh-103847 does for asyncio's own): a sandbox init it
    forked holds the pipes. So the start runs shielded; if we are cancelled
    meanwhile, the whole group is killed as soon as the process exists, and the
    cancel goes on.
    """
    starting = asyncio.ensure_future(_start(argv, stdin, env))
    try:
        return await asyncio.shield(starting)
    except BaseException:
        # Let the start finish (milliseconds), then kill and reap what it made, so
        # the caller's own cleanup sees the process gone. All of it runs to its
        # end: a second cancel must not leave the process running, or its
        # pipes to outlive the event loop.
        with contextlib.suppress(BaseException):
            await run_to_end(_kill_when_started(starting))
        raise


async def _kill_when_started(starting: asyncio.Future[Process]) -> None:
    try:
        proc = await within(10, asyncio.shield(starting))
    except Exception:
        return  # the start failed (or hung): there is no process to kill
    _kill_group(proc)
    try:
        await within(5, proc.wait())
    except TimeoutError:
        release(proc)


async def run_process(
    argv: list[str],
    *,
    stdin: bytes | None = None,
    timeout: float | None = None,
    env: dict[str, str] | None = None,
    cap: int = OUTPUT_CAP,
) -> ProcResult:
    """Run `argv` without blocking the loop. On timeout or cancel the whole group is killed."""
    proc = await spawn(argv, stdin=stdin is not None, env=env)

    async def feed_stdin() -> None:
        if stdin is not None and proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                proc.stdin.write(stdin)
                await proc.stdin.drain()
            proc.stdin.close()

    readers = asyncio.gather(
        _read_capped(proc.stdout, cap), _read_capped(proc.stderr, cap), feed_stdin()
    )
    out, err, timed_out = await _wait_readers(proc, readers, timeout)
    return ProcResult(out, err, proc.returncode if proc.returncode is not None else -1, timed_out)


async def run_streaming(
    argv: list[str],
    sink: Callable[[bytes], object],
    *,
    limit: int,
    timeout: float | None = None,
) -> tuple[ProcResult, bool]:
    """Run `argv`, handing its stdout to `sink` chunk by chunk, with no output cap
    but `limit`: past it the process is killed and the second value is True."""
    proc = await spawn(argv)
    overflow = False

    async def pump() -> bytes:
        nonlocal overflow
        size = 0
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(65536):
            size += len(chunk)
            if size > limit:
                overflow = True
                _kill_group(proc)
                break
            sink(chunk)
        return b""

    readers = asyncio.gather(pump(), _read_capped(proc.stderr, OUTPUT_CAP))
    _, err, timed_out = await _wait_readers(proc, readers, timeout)
    code = proc.returncode if proc.returncode is not None else -1
    return ProcResult(b"", err, code, timed_out), overflow


async def _wait_readers(
    proc: Process,
    readers: asyncio.Future[Any],
    timeout: float | None,
) -> tuple[bytes, bytes, bool]:
    timed_out = False
    try:
        # asyncio.timeout, not wait_for: on 3.11 wait_for loses a cancel that lands
        # as the awaited thing finishes (gh-86296), and the caller's cancel must hold.
        async with asyncio.timeout(timeout):
            await asyncio.shield(readers)
    except TimeoutError:
        timed_out = True
        _kill_group(proc)
    except BaseException:
        _kill_group(proc)
        readers.cancel()
        # Mark the outcome as retrieved so asyncio does not log it at exit.
        readers.add_done_callback(lambda f: f.cancelled() or f.exception())
        # Bounded: on Python 3.11 wait() also waits for the pipes to close, and a
        # process that escaped the group could hold them open forever. Run to its end
        # even through a second cancel: a process killed but not reaped leaves its
        # transport to outlive the event loop (and a zombie).
        try:
            await run_to_end(within(5, proc.wait()))
        except BaseException:
            release(proc)
        raise
    try:
        # After a kill the pipes close, so the readers finish with what was written;
        # a grandchild that escaped the group could hold them open, hence the bound.
        async with asyncio.timeout(10):
            results = await readers
        out, err = results[0], results[1]
    except TimeoutError:
        out, err = b"", b"[output lost: pipes held open after kill]"
    await proc.wait()
    return out, err, timed_out


async def within(seconds: float, work: Awaitable[T]) -> T:
    """`work`'s result, or TimeoutError after `seconds`. Unlike `asyncio.wait_for` on
    Python 3.11, a cancel that lands just as `work` finishes is not lost (CPython
    gh-86296): teardown that waits a bounded time must still stop when told to."""
    async with asyncio.timeout(seconds):
        return await work


async def run_to_end(work: Awaitable[T]) -> T:
    """Await `work` to its end even if we are cancelled meanwhile, then let the
    cancel go on. For teardown: a plain shield returns at once on cancel, and the
    event loop may then close with the teardown half done. (A second signal
    exits the process at once, and the grace timer bounds the wait.)"""
    task = asyncio.ensure_future(work)
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(task)
            break
        except asyncio.CancelledError:
            if task.done():
                raise
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    return result


def decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def last_line(text: str, default: str) -> str:
    """The last line of a command's stderr: where docker and bwrap put the reason."""
    lines = text.strip().splitlines()
    return lines[-1] if lines else default
