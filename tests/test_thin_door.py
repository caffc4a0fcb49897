"""A door is thin: the throwaway `PromptDoor` (under 80 lines) gets resume,
scheduling, recording and interrupts from the engine's batch service."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from helios.engine.batch import BatchService
from helios.engine.config import ConcurrencyConfig
from helios.engine.store import RunStore

from .thin_door import PromptDoor, PromptUnit

PROMPTS = [f"{'good' if i % 3 else 'bad'} prompt {i}" for i in range(12)]


def _units() -> list[PromptUnit]:
    return [PromptUnit(prompt, line) for line, prompt in enumerate(PROMPTS, start=1)]


def _service(store: RunStore, delay: float) -> BatchService[PromptUnit, dict[str, object]]:
    return BatchService(PromptDoor(delay), store, ConcurrencyConfig(in_flight=3), provider="null")


def test_thin_door_resumes_after_an_interrupt(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    store = RunStore.create(run_dir, {"run_id": "thin"})

    async def interrupted_run() -> None:
        service = _service(store, delay=0.05)
        four_done = asyncio.Event()
        service.on_recorded = lambda unit, result: (
            four_done.set() if len(service.recorded) >= 4 else None
        )
        task = asyncio.ensure_future(service.run(service.plan(_units())))
        await four_done.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert service.interrupted

    asyncio.run(interrupted_run())
    store.close()
    reader = RunStore.open_existing(run_dir, readonly=True)
    done_first = len(reader.load_records())
    assert 4 <= done_first < len(PROMPTS)

    resumed = _service(RunStore.open_existing(run_dir), delay=0.0)
    plan = resumed.plan(_units())
    assert len(plan.finished) == done_first and len(plan.pending) == len(PROMPTS) - done_first
    asyncio.run(resumed.run(plan))
    assert resumed.store is not None
    resumed.store.close()

    lines = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert sorted(r["line"] for r in lines) == list(range(1, 13))  # each prompt exactly once
    passed = {r["line"] for r in lines if r["status"] == "passed"}
    assert passed == {line for line in range(1, 13) if (line - 1) % 3}


def test_thin_door_in_memory_without_a_store() -> None:
    service = _service(None, delay=0.0)  # type: ignore[arg-type]
    results = asyncio.run(service.run(service.plan(_units())))
    assert len(results) == 12 and sum(r["status"] == "passed" for r in results) == 8
