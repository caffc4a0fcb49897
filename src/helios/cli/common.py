"""What every command shares: running a coroutine with clean interrupts, exit codes."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Coroutine
from typing import Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from helios.cli.entry import early_exit
from helios.errors import ConfigError, EnvironmentUnavailable, HeliosError, InputError

T = TypeVar("T")

EXIT_OK = 0
EXIT_BELOW_THRESHOLD = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130

err_console = Console(stderr=True)


class Interrupted(Exception):
    """Ctrl-C or SIGTERM arrived; the store was left consistent."""


#: seconds the cleanup after Ctrl-C / SIGTERM may take before Helios exits anyway
CLEANUP_GRACE = 45.0


def _force_exit(reason: str) -> None:
    # Finished trials are already on disk (appends are flushed), so leaving now
    # keeps the store consistent; only sandboxes may be left for `helios cleanup`.
    err_console.print(f"[yellow]{reason}[/]: exiting now; run `helios cleanup` for leftovers")
    os._exit(EXIT_INTERRUPTED)


def run_coroutine(coro: Coroutine[Any, Any, T]) -> T:
    """asyncio.run where Ctrl-C and SIGTERM cancel the work, let it clean up, then raise
    Interrupted. A second signal, or a cleanup longer than CLEANUP_GRACE, exits at once."""

    async def main() -> T:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        interrupted = False

        def on_signal() -> None:
            nonlocal interrupted
            if interrupted:
                _force_exit("second interrupt")
            interrupted = True
            loop.call_later(CLEANUP_GRACE, _force_exit, "cleanup took too long")
            if task is not None:
                task.cancel()

        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, on_signal)
        return await coro

    try:
        return asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError):
        raise Interrupted() from None
    finally:
        # The loop's handlers are gone: a late signal still means "exit 130, one line".
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, early_exit)


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    err_console.print(f"[red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
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
        f"[red]internal error:[/] {type(exc).__name__}: {escape(str(exc))} "
        "(rerun with --debug for a traceback)",
        highlight=False,
        soft_wrap=True,
    )
    sys.exit(EXIT_BAD_INPUT if isinstance(exc, ValueError) else 3)
