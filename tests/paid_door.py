"""A toy door whose every unit is one paid model call to the scripted server: a cheap
way to run hundreds of trials against a budget (no sandbox, no agent)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helios.engine import EpisodeContext, Slot, Verdict
from helios.failures import ErrorInfo
from helios.models.base import Message
from helios.models.services import ModelServices, open_model_services
from helios.usage import Usage

MODEL = "openai-compatible/scripted"
KEY = "sk-helios-budget-test"
#: USD per 1M tokens: a call of the scripted server costs about $0.0001
PRICES = {MODEL: {"input": 2.0, "output": 10.0}}
SCRIPT = {"scenarios": [{"match": "*", "turns": [{"text": "ok"}]}]}


@dataclass(frozen=True)
class Ask:
    index: int
    folder: str | None = None

    @property
    def trial_id(self) -> str:
        return hashlib.sha256(f"ask {self.index}".encode()).hexdigest()[:16]

    @property
    def label(self) -> str:
        return f"ask {self.index}"


@dataclass
class Answer:
    trial_id: str
    status: str
    usage: Usage = field(default_factory=Usage)
    error: str | None = None


@dataclass
class PaidDoor:
    #: seconds each unit waits after its call (lets a test stop it mid-flight)
    hold: float = 0.0
    #: only the units from this index on wait (`hold`)
    hold_from: int = 0
    writes_files = False

    async def run_unit(self, unit: Ask, ctx: EpisodeContext, slot: Slot) -> Answer:
        assert ctx.services is not None
        usage = Usage()
        message = Message(role="user", content=f"question number {unit.index}")
        try:
            await ctx.services.generate([message], [], slot=slot, usage=usage)
        except Exception as exc:
            return Answer(unit.trial_id, "error", usage, f"{type(exc).__name__}: {exc}")
        if self.hold and unit.index >= self.hold_from:
            await asyncio.sleep(self.hold)
        return Answer(unit.trial_id, "passed", usage)

    def write_files(self, unit: Ask, result: Answer) -> None:
        return None

    def to_record(self, unit: Ask, result: Answer) -> dict[str, Any]:
        return {"trial_id": result.trial_id, "status": result.status,
                "cost_usd": result.usage.cost_usd, "error": result.error}  # fmt: skip

    def crashed(self, unit: Ask, error: ErrorInfo) -> Answer:
        return Answer(unit.trial_id, "error", Usage(), f"{error.type}: {error.message}")

    def verdict(self, result: Answer) -> Verdict:
        kind = result.error.split(":")[0] if result.error else None
        return Verdict(passed=result.status == "passed", detail=result.status,
                       error_kind=kind, error_message=result.error or "")  # fmt: skip


def services(base_url: str, folder: Path) -> ModelServices:
    prices = folder / "prices.json"
    prices.parent.mkdir(parents=True, exist_ok=True)
    prices.write_text(json.dumps(PRICES))
    return open_model_services(MODEL, base_url=base_url, api_key=KEY, prices_path=prices)
