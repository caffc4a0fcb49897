"""Door 2: prompt datasets into tool-use trajectories, a drop-in for Hermes's batch runner.

    from helios.datagen import BatchRunner
    runner = BatchRunner(dataset_file="prompts.jsonl", batch_size=10, run_name="my_run",
                         model="anthropic/claude-sonnet-4.5", num_workers=4)
    runner.run(resume=False)

Outputs land in `<output_dir>/<run_name>/` (default `data/`) with Hermes's file
names and schemas; see `helios.datagen.folder` for the layout. The names below
are imported on first use, so the CLI's start (`helios --help`, `helios batch`)
does not pay for the model clients and tools.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from helios.datagen.distributions import BUILTIN as BUILTIN_DISTRIBUTIONS
    from helios.datagen.distributions import Distribution
    from helios.datagen.runner import BatchRunner, GenerateResult
    from helios.datagen.settings import GenerateSettings

__all__ = [
    "BUILTIN_DISTRIBUTIONS",
    "BatchRunner",
    "Distribution",
    "GenerateResult",
    "GenerateSettings",
]

_WHERE = {
    "BUILTIN_DISTRIBUTIONS": ("helios.datagen.distributions", "BUILTIN"),
    "Distribution": ("helios.datagen.distributions", "Distribution"),
    "BatchRunner": ("helios.datagen.runner", "BatchRunner"),
    "GenerateResult": ("helios.datagen.runner", "GenerateResult"),
    "GenerateSettings": ("helios.datagen.settings", "GenerateSettings"),
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'helios.datagen' has no attribute {name!r}")
    module, attribute = _WHERE[name]
    return getattr(importlib.import_module(module), attribute)
