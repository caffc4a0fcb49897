"""Ctrl-C and SIGTERM, seen by a thread of their own: they end Helios within seconds
even while the main thread is stuck inside one long C call.

Python runs a signal handler only between two bytecodes of the main thread, so a
`repr` of a huge value, a regex or a blocking call holds off every handler until
it returns (a hostile config once kept Helios alive for ten minutes after SIGTERM).
The C-level handler still runs at once and writes the signal's number to the
wakeup pipe (`signal.set_wakeup_fd`); a thread waits on that pipe and decides:

- outside a run (reading inputs, planning, writing summaries): exit 130 at once,
  with one line; nothing is in flight, and finished work is already on disk;
- in a run: the first signal cancels the run on its event loop. The loop must take
  it within RESPONSE_GRACE seconds (a loop blocked in C cannot), and then has
  CLEANUP_GRACE seconds to stop its sandboxes. A second signal, or either grace
  running out, exits at once; sandboxes left behind are `helios cleanup`'s.

The same signal again within SAME_INTERRUPT seconds of the first is that same interrupt:
`timeout -s INT` (coreutils) sends its signal to the child and then to the child's
group, so Helios gets two SIGINTs microseconds apart for one request to stop.
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when a run starts: `helios --help` needs no event loop
    import asyncio

#: seconds a run's event loop has to take the interrupt
RESPONSE_GRACE = 5.0
#: seconds the cleanup after Ctrl-C / SIGTERM may take before Helios exits anyway
CLEANUP_GRACE = 45.0
EXIT_INTERRUPTED = 130
#: seconds within which a further signal is the same interrupt, not a second one
SAME_INTERRUPT = 0.05
SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: a byte on the pipe that is no signal: "look at the deadline again"
_WAKE = b"\0"


def _noop(signum: int, frame: FrameType | None) -> None:
    """The Python-level handler: the watch thread does the work (a handler must be set
    for the C-level one to write to the wakeup pipe)."""


def _name(signum: int) -> str:
    return "SIGTERM" if signum == signal.SIGTERM else "Ctrl-C"


def exit_now(message: str) -> None:
    """One line on stderr and exit 130, from any thread, with no cleanup: finished
    trials are on disk already (appends are flushed)."""
    os.write(2, f"{message}\n".encode())
    os._exit(EXIT_INTERRUPTED)


@dataclass
class _Run:
    loop: asyncio.AbstractEventLoop
    cancel: Callable[[], object]
    signalled: bool = False
    #: the first signal, and when it came (time.monotonic)
    first: tuple[int, float] = (0, 0.0)
    #: when the current grace ends, and what its end means
    deadline: float | None = None
    expiry: str = ""


class SignalWatch:
    """The process's one watch on SIGINT and SIGTERM (main thread only)."""

    _current: SignalWatch | None = None

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)
        self._lock = threading.Lock()
        self._run: _Run | None = None
        self._stopped = False
        self._previous: list[object] = []
        self._previous_fd = -1
        self._thread = threading.Thread(target=self._watch, name="helios-signals", daemon=True)

    @classmethod
    def install(cls) -> SignalWatch:
        """Start watching, for the rest of the process (the `helios` command)."""
        if cls._current is None:
            watch = cls()
            watch._start()
            cls._current = watch
        return cls._current

    @classmethod
    @contextmanager
    def installed(cls) -> Iterator[SignalWatch]:
        """The process's watch; one made here (a library caller's process) is removed
        on the way out, with the handlers it replaced put back."""
        if cls._current is not None:
            yield cls._current
            return
        watch = cls.install()
        try:
            yield watch
        finally:
            watch._stop()
            cls._current = None

    @classmethod
    @contextmanager
    def paused(cls) -> Iterator[None]:
        """The watch's thread stopped for the body, then started again: a signal that
        comes meanwhile waits in the pipe and is taken then. For a fork before the
        loop (`helios.engine.workers.preforked`), which must find one thread."""
        watch = cls._current
        if watch is None or not watch._thread.is_alive():
            yield
            return
        with watch._lock:
            watch._stopped = True
        watch._wake()
        watch._thread.join()
        try:
            yield
        finally:
            watch._stopped = False
            watch._thread = threading.Thread(
                target=watch._watch, name="helios-signals", daemon=True
            )
            watch._thread.start()

    @classmethod
    def forget(cls) -> None:
        """In a child forked by this process: its parent's watch is not its own. The
        wakeup descriptor is unset and the watch's pipe closed in it."""
        watch = cls._current
        cls._current = None
        if watch is not None:
            signal.set_wakeup_fd(-1)
            for fd in (watch._read, watch._write):
                with suppress(OSError):
                    os.close(fd)

    @contextmanager
    def running(self, cancel: Callable[[], object]) -> Iterator[None]:
        """While the body runs on the current event loop, an interrupt calls `cancel`
        on that loop instead of exiting."""
        import asyncio

        run = _Run(asyncio.get_running_loop(), cancel)
        with self._lock:
            self._run = run
        try:
            yield
        finally:
            with self._lock:
                self._run = None

    def _start(self) -> None:
        # the pipe first: a signal that comes once its handler is _noop must find it (with
        # the handlers first, a SIGINT in between ran _noop alone and was lost)
        self._previous_fd = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        self._previous = [signal.signal(signum, _noop) for signum in SIGNALS]
        self._thread.start()

    def _stop(self) -> None:
        signal.set_wakeup_fd(self._previous_fd)
        for signum, previous in zip(SIGNALS, self._previous, strict=True):
            signal.signal(signum, previous)  # type: ignore[arg-type]
        with self._lock:
            self._stopped = True
        self._wake()
        self._thread.join()
        os.close(self._read)
        os.close(self._write)

    def _watch(self) -> None:
        while True:
            with self._lock:
                if self._stopped:
                    return
                run = self._run
                deadline = run.deadline if run is not None else None
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            readable, _, _ = select.select([self._read], [], [], timeout)
            if not readable:
                if run is not None and run.deadline is not None:
                    exit_now(f"{run.expiry}: exiting now; run `helios cleanup` for leftovers")
                continue
            for number in os.read(self._read, 64):
                if number:
                    self._on_signal(number)

    def _on_signal(self, signum: int) -> None:
        with self._lock:
            run = self._run
        if run is None:
            exit_now(f"interrupted ({_name(signum)}): exiting")
            return
        now = time.monotonic()
        if run.signalled:
            if run.first[0] == signum and now - run.first[1] < SAME_INTERRUPT:
                return  # the same interrupt, sent again (to the process and its group)
            exit_now("second interrupt: exiting now; run `helios cleanup` for leftovers")
        run.signalled, run.first = True, (signum, now)
        self._grace(run, RESPONSE_GRACE, f"no response to {_name(signum)}")
        try:
            run.loop.call_soon_threadsafe(self._take, run)
        except RuntimeError:  # the loop has closed meanwhile
            exit_now(f"interrupted ({_name(signum)}): exiting")

    def _take(self, run: _Run) -> None:
        """On the run's loop: the interrupt is taken; the cleanup's grace starts."""
        self._grace(run, CLEANUP_GRACE, "cleanup took too long")
        run.cancel()

    def _grace(self, run: _Run, seconds: float, expiry: str) -> None:
        with self._lock:
            run.deadline, run.expiry = time.monotonic() + seconds, expiry
        self._wake()

    def _wake(self) -> None:
        with suppress(BlockingIOError):  # a full pipe wakes the thread anyway
            os.write(self._write, _WAKE)
