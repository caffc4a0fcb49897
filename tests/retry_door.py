"""A toy door whose units score what a test says, and can be retried
(`engine.retries`): tests/test_retry_below.py's, imported by its killed process too."""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from helios.engine import ConcurrencyConfig, OutputsConfig, Run, RunConfig, SandboxConfig
from helios.engine.batch import Verdict
from helios.engine.episode import EpisodeContext
from helios.slots import Slot


@dataclass(frozen=True)
class Item:
    name: str
    trial_id: str = ""
    folder: str | None = None
    label: str = ""
    retry: int = 0


def item(name: str) -> Item:
    return Item(name, hashlib.sha256(name.encode()).hexdigest()[:16], name, name)


@dataclass
class ScoreDoor:
    """Each unit's reward is `rewards[name][retry]` (the last one past the end; None:
    an error); `hang` units wait until cancelled (a kill mid-round)."""

    run_dir: Path
    rewards: dict[str, list[float | None]]
    hang: frozenset[tuple[str, int]] = frozenset()

    def __post_init__(self) -> None:
        self.ran: list[tuple[str, int]] = []

    async def run_unit(self, unit: Item, ctx: EpisodeContext, slot: Slot) -> dict[str, Any]:
        self.ran.append((unit.name, unit.retry))
        if (unit.name, unit.retry) in self.hang:
            await asyncio.Event().wait()
        scores = self.rewards[unit.name]
        reward = scores[min(unit.retry, len(scores) - 1)]
        status = "error" if reward is None else "passed" if reward >= 1 else "failed"
        return {"trial_id": unit.trial_id, "name": unit.name, "status": status,
                "reward": reward or 0.0, "folder": unit.folder}  # fmt: skip

    def retried(self, unit: Item, n: int, trial_id: str) -> Item:
        return replace(unit, trial_id=trial_id, folder=f"{unit.folder}__retry{n}", retry=n)

    def write_files(self, unit: Item, result: dict[str, Any]) -> None:
        assert unit.folder is not None
        (self.run_dir / unit.folder).mkdir(parents=True, exist_ok=True)
        (self.run_dir / unit.folder / "result.json").write_text(json.dumps(result))

    def to_record(self, unit: Item, result: dict[str, Any]) -> dict[str, Any]:
        return result

    def crashed(self, unit: Item, error: Any) -> dict[str, Any]:
        return {"trial_id": unit.trial_id, "name": unit.name, "status": "error", "reward": 0.0}

    def verdict(self, result: dict[str, Any]) -> Verdict:
        return Verdict(passed=result["status"] == "passed", detail=result["status"],
                       error_kind="Failed" if result["status"] == "error" else None)  # fmt: skip


ITEMS = [item("a"), item("b"), item("c"), item("d")]


async def drive(folder: Path, door: ScoreDoor, below: float | None = None,
                 units: list[Item] = ITEMS) -> dict[str, dict[str, Any]]:  # fmt: skip
    """One invocation; returns the counted record of each unit, by name."""
    async with Run() as run:
        await run.open(RunConfig(kind="scores", sandbox=SandboxConfig(provider=None),
                                 concurrency=ConcurrencyConfig(retry_below=below),
                                 outputs=OutputsConfig(fixed=folder)))  # fmt: skip

        def finish(outcome: Any) -> dict[str, dict[str, Any]]:
            counted = outcome.counted(outcome.plan.finished) + outcome.recorded
            names = [r["name"] for r in counted]
            assert len(names) == len(set(names)), names  # one record per unit
            return {r["name"]: r for r in counted}

        return await run.drive(door, units, finish=finish)
