"""Door 2: prompt datasets into tool-use trajectories, a drop-in for Hermes's batch runner.

    from helios.datagen import BatchRunner
    runner = BatchRunner(dataset_file="prompts.jsonl", batch_size=10, run_name="my_run",
                         model="anthropic/claude-sonnet-4.6", num_workers=4)
    runner.run(resume=False)

Outputs land in `<output_dir>/<run_name>/` (default `data/`) with Hermes's file
names and schemas; see `helios.datagen.folder` for the layout.
"""

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
