"""Async subprocesses with a timeout, an output cap and a clean kill on cancel."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
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


def release(proc: asyncio.subprocess.Process) -> None:
    """Close a process's transport now, while the loop runs: one whose bounded wait
    ran out (a pipe held open by something that escaped the kill) is otherwise
    closed by the garbage collector after the loop has closed, which raises
    "Event loop is closed" from `BaseSubprocessTransport.__del__`."""
    transport = getattr(proc, "_transport", None)
    if transport is not None:
        with contextlib.suppress(Exception):
            transport.close()


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


async def spawn(
    argv: list[str],
    *,
    stdin: bool = False,
    env: dict[str, str] | None = None,
) -> asyncio.subprocess.Process:
    """Start `argv` in its own process group, with piped output.

    A cancel that lands while asyncio is still starting the process (CPython
    gh-103847) would leave it running unseen: asyncio kills only the direct
    child, and a sandbox init it forked holds the pipes. So the start runs
    shielded; if we are cancelled meanwhile, the whole group is killed as soon
    as the process exists, and the cancel goes on.
    """
    starting = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
    )
    try:
        return await asyncio.shield(starting)
    except BaseException:
        # Let the start finish (milliseconds), then kill and reap what it made, so
        # the caller's own cleanup sees the process gone. All of it runs to its
        # end: a second cancel must not leave the process running, or its
        # transport to outlive the event loop.
        with contextlib.suppress(BaseException):
            await run_to_end(_kill_when_started(starting))
        raise


async def _kill_when_started(starting: asyncio.Future[asyncio.subprocess.Process]) -> None:
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
    proc: asyncio.subprocess.Process,
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
