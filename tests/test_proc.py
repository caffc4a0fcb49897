"""`_proc.within`: a bounded wait that, unlike `asyncio.wait_for` on Python 3.11,
keeps a cancel that lands just as the awaited thing finishes (CPython gh-86296)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from helios._proc import within

from .waiting import wait_until

Waiter = Callable[[float, Awaitable[Any]], Awaitable[Any]]


async def _cancel_as_it_finishes(wait: Waiter) -> str:
    future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    task = asyncio.ensure_future(wait(5, future))
    for _ in range(3):
        await asyncio.sleep(0)  # the task now waits on the future
    future.set_result(1)
    task.cancel()  # in the same turn of the loop as the result
    try:
        return f"returned {await task}"
    except asyncio.CancelledError:
        return "cancelled"


async def _wait_for(seconds: float, work: Awaitable[Any]) -> Any:
    return await asyncio.wait_for(work, seconds)


def test_a_cancel_that_lands_as_the_work_finishes_is_kept() -> None:
    assert asyncio.run(_cancel_as_it_finishes(within)) == "cancelled"


def test_the_race_is_real_for_wait_for_on_3_11() -> None:
    # What the helper is for: from 3.12 wait_for is built on asyncio.timeout.
    lost = sys.version_info < (3, 12)
    expected = "returned 1" if lost else "cancelled"
    assert asyncio.run(_cancel_as_it_finishes(_wait_for)) == expected


def test_within_times_out_and_returns() -> None:
    async def main() -> tuple[int, bool]:
        value = await within(1, asyncio.sleep(0, result=7))
        try:
            await within(0.05, asyncio.sleep(5))
        except TimeoutError:
            return value, True
        return value, False

    assert asyncio.run(main()) == (7, True)


# -- a cancelled process is reaped before its loop closes ----------------------------------
def _unraisables(run: Callable[[], object]) -> list[str]:
    """What `run` left to be reported at collection: a subprocess transport that outlived
    its loop ('Event loop is closed' from its __del__), say."""
    import gc

    found: list[str] = []
    previous = sys.unraisablehook
    sys.unraisablehook = lambda u: found.append(f"{u.exc_value!r} in {u.object!r}")
    try:
        run()
        gc.collect()
    finally:
        sys.unraisablehook = previous
    return found


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_second_cancel_while_the_process_is_killed_still_reaps_it(tmp_path: Any) -> None:
    from helios._proc import run_process

    pid_file = tmp_path / "pid"
    pids: list[int] = []

    async def main() -> None:
        task = asyncio.ensure_future(
            run_process(["sh", "-c", f"echo $$ > {pid_file}; exec sleep 60"], timeout=None)
        )
        started = lambda: pid_file.exists() and pid_file.read_text().strip()  # noqa: E731
        await asyncio.to_thread(wait_until, started, "the process started")
        pids.append(int(pid_file.read_text()))
        task.cancel()  # the kill, then a bounded wait for the process
        await asyncio.sleep(0)
        task.cancel()  # a second cancel (Ctrl-C twice, a timeout and a cancel) during that wait
        with contextlib.suppress(asyncio.CancelledError):
            await task

    assert _unraisables(lambda: asyncio.run(main())) == []
    assert not _alive(pids[0])
