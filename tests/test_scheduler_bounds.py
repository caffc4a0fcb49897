"""Jobs that give their slot back during a backoff still count against the bound on
jobs in flight, so live sandboxes stay bounded when every trial is retrying."""

from __future__ import annotations

import asyncio

from helios.engine.scheduler import Scheduler, Slot, backoff_sleep


def test_backoffs_free_slots_but_jobs_in_flight_stay_bounded() -> None:
    live = 0
    peak = 0
    running_peak = 0
    running = 0

    async def job(item: int, slot: Slot) -> int:
        nonlocal live, peak, running, running_peak
        live += 1
        peak = max(peak, live)
        for _ in range(3):
            running += 1
            running_peak = max(running_peak, running)
            await asyncio.sleep(0.005)
            running -= 1
            await backoff_sleep(slot, 0.02)  # waits without its slot
        live -= 1
        return item

    results = asyncio.run(Scheduler(job, n_concurrent=2).run(range(20)))
    assert sorted(results) == list(range(20))
    assert running_peak <= 2  # work at once: -n
    assert 2 < peak <= 4  # waiting ones let others start, up to 2 × n alive
