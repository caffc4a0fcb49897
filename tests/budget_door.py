"""A fourth toy door, with a budget of its own: each prompt costs its word count,
and once the next one would pass the budget, it is recorded as over budget
without running. The run (folder, lock, resume, time) is the engine's `Run`."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helios.engine import (
    Door,
    EpisodeContext,
    EpisodeSpec,
    OutputsConfig,
    Run,
    RunConfig,
    SandboxConfig,
    Slot,
    Verdict,
    run_episode,
)
from helios.environments import NULL_SPEC
from helios.failures import ErrorInfo


@dataclass(frozen=True)
class Prompt:
    text: str
    folder: str | None = None

    @property
    def trial_id(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()[:16]

    @property
    def label(self) -> str:
        return self.text[:20]

    @property
    def cost(self) -> int:
        return len(self.text.split())


@dataclass
class BudgetDoor:
    budget: int
    spent: int = 0

    async def run_unit(self, unit: Prompt, ctx: EpisodeContext, slot: Slot) -> dict[str, Any]:
        if self.spent + unit.cost > self.budget:
            return {"trial_id": unit.trial_id, "status": "over_budget", "cost": 0}
        self.spent += unit.cost  # reserved before the await: concurrent units see it
        spec = EpisodeSpec(
            trial_id=unit.trial_id, label=unit.label, folder=None, sandbox=NULL_SPEC,
            provider="null", agent="nop", agent_settings={}, instruction=unit.text,
            agent_timeout=5,
        )  # fmt: skip
        episode = await run_episode(spec, ctx, slot)
        status = "error" if episode.error else "ran"
        return {"trial_id": unit.trial_id, "status": status, "cost": unit.cost}

    def write_files(self, unit: Prompt, result: dict[str, Any]) -> None:
        return None

    def to_record(self, unit: Prompt, result: dict[str, Any]) -> dict[str, Any]:
        return result

    def crashed(self, unit: Prompt, error: ErrorInfo) -> dict[str, Any]:
        return {"trial_id": unit.trial_id, "status": "error", "cost": 0}

    def verdict(self, result: dict[str, Any]) -> Verdict:
        return Verdict(passed=result["status"] == "ran", detail=result["status"])


async def run_prompts(prompts: list[str], budget: int, folder: Path) -> BudgetDoor:
    door = BudgetDoor(budget)
    async with Run() as run:
        await run.open(RunConfig(kind="budget", sandbox=SandboxConfig(provider="null"),
                                 outputs=OutputsConfig(fixed=folder),
                                 identity={"budget": budget}))  # fmt: skip
        await run.drive(door, [Prompt(p) for p in prompts], finish=lambda outcome: None)
    return door


DOOR: type[Door[Prompt, dict[str, Any]]] = BudgetDoor  # what the engine asks of a door
