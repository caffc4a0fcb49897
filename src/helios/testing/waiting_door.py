"""A door whose units only wait and leave one file in their trial folder: what an
executor costs its driver per unit, apart from any sandbox or model (`benchmarks/ray.py`).
Importable on every node of a cluster, so its units travel by reference."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from helios.engine.door import Verdict
from helios.engine.episode import EpisodeContext, unit_dir
from helios.events import PhaseChanged
from helios.failures import ErrorInfo
from helios.slots import Slot


@dataclass(frozen=True)
class WaitingUnit:
    index: int

    @property
    def trial_id(self) -> str:
        return f"unit-{self.index:06d}"

    @property
    def folder(self) -> str:
        return f"{self.index:06d}"

    @property
    def label(self) -> str:
        return self.trial_id


@dataclass
class WaitingDoor:
    """A unit says it is "waiting" (an event), waits `seconds` (its sandbox and model
    time), then leaves a file of `file_bytes` in its folder."""

    seconds: float
    file_bytes: int
    writes_files = False

    async def run_unit(self, unit: WaitingUnit, ctx: EpisodeContext,
                       slot: Slot) -> dict[str, Any]:  # fmt: skip
        if ctx.emit is not None:
            ctx.emit(PhaseChanged(unit.trial_id, "waiting"))
        await asyncio.sleep(self.seconds)
        folder = unit_dir(ctx, unit.folder)
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "trajectory.json").write_bytes(b"x" * self.file_bytes)
        return {"trial_id": unit.trial_id, "status": "passed"}

    def write_files(self, unit: WaitingUnit, result: dict[str, Any]) -> None:
        return None

    def to_record(self, unit: WaitingUnit, result: dict[str, Any]) -> dict[str, Any]:
        return result

    def crashed(self, unit: WaitingUnit, error: ErrorInfo) -> dict[str, Any]:
        return {"trial_id": unit.trial_id, "status": "error", "error": error.message}

    def verdict(self, result: dict[str, Any]) -> Verdict:
        return Verdict(passed=result["status"] == "passed", detail=result["status"])
