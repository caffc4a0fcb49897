"""What every command shares: running a coroutine with clean interrupts, exit codes."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import sys
from collections.abc import Coroutine, Iterator
from typing import Any, NoReturn, TypeVar

import typer
from rich.markup import escape

from helios.display.console import SafeConsole
from helios.engine.interrupts import SignalWatch
from helios.engine.workers import preforked
from helios.errors import ConfigError, EnvironmentUnavailable, HeliosError, InputError
from helios.secrets import redact
from helios.text import visible

T = TypeVar("T")

EXIT_OK = 0
EXIT_BELOW_THRESHOLD = 1
EXIT_BAD_INPUT = 2
#: a budget (--max-cost, --max-total-tokens, --max-duration) stopped the run
EXIT_BUDGET = 3
EXIT_INTERRUPTED = 130

#: every command's error lines; it shows control characters (`SafeConsole`)
err_console = SafeConsole(stderr=True)


class Interrupted(Exception):
    """Ctrl-C or SIGTERM arrived; the store was left consistent."""


def run_coroutine(coro: Coroutine[Any, Any, T], *, workers: int = 1) -> T:
    """asyncio.run where Ctrl-C and SIGTERM cancel the work, let it clean up, then raise
    Interrupted. A second signal, a loop that does not respond, or a cleanup longer than
    the grace exits at once (`helios.engine.interrupts`). With `workers` > 1 the batch's
    worker processes are forked first, before the loop (`helios.engine.workers`)."""

    async def main() -> T:
        task = asyncio.current_task()
        assert task is not None
        with SignalWatch.installed() as watch, watch.running(task.cancel):
            return await coro

    try:
        with frozen_heap(), preforked(workers):
            return asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError):
        raise Interrupted() from None


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """What the command imported and built so far (modules, classes, validators: ~50,000
    objects, alive to its end) is left out of the garbage collector's passes while the
    work runs (`gc.freeze`): a full pass over them costs ~50 ms of CPU, and a worker
    forked from here does not copy their pages by writing the collector's marks. They go
    back to the collector afterwards; a heap the caller froze is left as it is."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def shown(message: str) -> str:
    """A message for a markup line: it may quote a task, a dataset, a config or a URL,
    so keys are redacted, control characters shown and brackets escaped."""
    return escape(visible(redact(message)))


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    err_console.print(f"[red]error:[/] {shown(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def handle_errors(exc: BaseException, debug: bool) -> NoReturn:
    """Map an exception to one clear line and an exit code; traceback only with --debug."""
    if debug:
        raise exc
    if isinstance(exc, Interrupted):
        err_console.print(
            "[yellow]interrupted[/]: finished trials are saved", highlight=False, soft_wrap=True
        )
        raise typer.Exit(EXIT_INTERRUPTED)
    if isinstance(exc, InputError | ConfigError | EnvironmentUnavailable):
        fail(str(exc))
    if isinstance(exc, HeliosError):
        fail(str(exc))
    if isinstance(exc, FileNotFoundError):
        fail(str(exc))
    if isinstance(exc, OSError) and exc.strerror:
        fail(f"{exc.filename or 'output'}: {exc.strerror}")
    err_console.print(
        f"[red]internal error:[/] {type(exc).__name__}: {shown(str(exc))} "
        "(rerun with --debug for a traceback)",
        highlight=False,
        soft_wrap=True,
    )
    sys.exit(EXIT_BAD_INPUT if isinstance(exc, ValueError) else 3)
