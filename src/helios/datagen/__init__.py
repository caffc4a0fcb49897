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

from typing import TYPE_CHECKING

from helios.lazy import lazy_exports

if TYPE_CHECKING:
    from helios.datagen.distributions import BUILTIN_DISTRIBUTIONS as BUILTIN_DISTRIBUTIONS
    from helios.datagen.distributions import Distribution as Distribution
    from helios.datagen.runner import BatchRunner as BatchRunner
    from helios.datagen.runner import GenerateResult as GenerateResult
    from helios.datagen.settings import GenerateSettings as GenerateSettings

__getattr__, __dir__ = lazy_exports(globals())
