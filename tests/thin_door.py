"""A throwaway front door, to prove a door is thin: prompts in, scored records out.

It supplies only what a unit is, how one runs (null sandbox, nop agent, a fake
scorer) and how a result becomes a record. Resume, scheduling, recording and
interrupts are the engine's.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helios.agents.base import AgentOutcome
from helios.engine import Door, EpisodeContext, EpisodeSpec, Score, Slot, Verdict, run_episode
from helios.environments import NULL_SPEC, Environment
from helios.failures import ErrorInfo


@dataclass(frozen=True)
class PromptUnit:
    prompt: str
    line: int
    folder: str | None = None

    @property
    def trial_id(self) -> str:
        return hashlib.sha256(f"{self.line}:{self.prompt}".encode()).hexdigest()[:16]

    @property
    def label(self) -> str:
        return self.prompt[:20]


@dataclass
class WordScorer:
    """Reward 1 when the prompt says "good"; `delay` lets a test interrupt mid-batch."""

    prompt: str
    delay: float
    phase: str = "evaluator"

    async def score(self, env: Environment, outcome: AgentOutcome, out_dir: Path) -> Score:
        await asyncio.sleep(self.delay)
        return Score(reward=1.0 if "good" in self.prompt else 0.0)


@dataclass
class PromptDoor:
    delay: float = 0.0

    async def run_unit(self, unit: PromptUnit, ctx: EpisodeContext, slot: Slot) -> dict[str, Any]:
        spec = EpisodeSpec(
            trial_id=unit.trial_id, label=unit.label, folder=None, sandbox=NULL_SPEC,
            provider="null", agent="nop", agent_settings={}, instruction=unit.prompt,
            agent_timeout=5, scorer=WordScorer(unit.prompt, self.delay),
        )  # fmt: skip
        episode = await run_episode(spec, ctx, slot)
        status = "error" if episode.error else ("passed" if episode.reward >= 1 else "failed")
        return {"trial_id": unit.trial_id, "line": unit.line, "status": status}

    def write_files(self, unit: PromptUnit, result: dict[str, Any]) -> None:
        return None

    def to_record(self, unit: PromptUnit, result: dict[str, Any]) -> dict[str, Any]:
        return result

    def crashed(self, unit: PromptUnit, error: ErrorInfo) -> dict[str, Any]:
        return {"trial_id": unit.trial_id, "line": unit.line, "status": "error"}

    def verdict(self, result: dict[str, Any]) -> Verdict:
        return Verdict(passed=result["status"] == "passed", detail=result["status"])


DOOR: type[Door[PromptUnit, dict[str, Any]]] = PromptDoor  # what the engine asks of a door
