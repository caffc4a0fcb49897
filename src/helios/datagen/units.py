"""A prompt as a unit of work: its stable id, its sampled toolsets, its batch.

The trial id hashes the prompt's content (text, image, cwd), which occurrence of
that content it is, the agent's settings, the model and the settings that change
results (generation, toolsets, sandbox provider); never positions or times.
Toolsets are sampled per prompt from a generator seeded with the run's seed and
the prompt's content key, so a resume samples the same toolsets whatever the order.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, replace
from typing import Any

from helios.datagen.dataset import PromptRow, content_hash
from helios.datagen.distributions import ToolsetSampler
from helios.identity import trial_id


@dataclass(frozen=True)
class PromptUnit:
    trial_id: str
    row: PromptRow
    toolsets: tuple[str, ...]
    #: the batch file and checkpoint entry this prompt's row belongs to (-1: not yet set)
    batch_num: int = -1
    #: prompts keep no folder: their outputs are rows in batch files
    folder: str | None = None

    @property
    def label(self) -> str:
        return f"prompt {self.row.index}"

    @property
    def key(self) -> str:
        return self.row.key


def sample_rng(seed: int, key: str) -> random.Random:
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def build_units(
    rows: list[PromptRow],
    sampler: ToolsetSampler,
    *,
    seed: int,
    agent: dict[str, Any],
    model: str,
    settings: dict[str, Any],
) -> list[PromptUnit]:
    units: list[PromptUnit] = []
    for row in rows:
        toolsets = tuple(sampler.sample(sample_rng(seed, row.key)))
        unit_id = trial_id(
            input_checksum=content_hash(row.prompt, row.image, row.cwd),
            attempt=row.occurrence,
            agent=agent,
            model=model,
            settings={**settings, "toolsets": list(toolsets)},
        )
        units.append(PromptUnit(unit_id, row, toolsets))
    return units


def assign_batches(units: list[PromptUnit], batch_size: int, first: int) -> list[PromptUnit]:
    """Group pending prompts, in dataset order, into batches numbered from `first`."""
    return [replace(u, batch_num=first + i // batch_size) for i, u in enumerate(units)]
