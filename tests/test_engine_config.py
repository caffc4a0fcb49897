"""The run's config (`engine/config.py`) holds the rules every door shares, once: how
many sandboxes start at once when not given, and which executor settings go together."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from helios.datagen.run_config import run_config
from helios.datagen.settings import GenerateSettings
from helios.engine.config import ConcurrencyConfig, check_executor, default_sandbox_starts
from helios.errors import ConfigError
from helios.tasks.runner import ParallelRunner
from helios.tasks.settings import TaskBatchSettings

TASKS = Path(__file__).parent / "fixtures" / "run_before_rerun" / "tasks"


def _generate(**fields: object) -> GenerateSettings:
    return GenerateSettings(dataset_file=Path("prompts.jsonl"), batch_size=1, run_name="r",
                            **fields)  # type: ignore[arg-type]  # fmt: skip


@pytest.mark.parametrize("in_flight", [1, 2, 8])
@pytest.mark.parametrize("provider", ["local", "docker"])
def test_generate_starts_as_many_sandboxes_at_once_as_the_engine_rule(
    in_flight: int, provider: str
) -> None:
    config = run_config(_generate(concurrency=in_flight, provider=provider))
    assert config.concurrency.sandbox_starts == default_sandbox_starts(in_flight)
    assert config.concurrency.sandbox_starts == min(in_flight, 4)
    # given: kept as given, whatever in_flight says
    assert ConcurrencyConfig(in_flight=in_flight, sandbox_starts=7).starts_at_once == 7


def test_the_task_and_generate_doors_start_the_same_sandboxes_at_once(
    tmp_path: Path, need_bwrap: None
) -> None:
    """Eight in flight: both doors record the engine's one number in run.json (the
    generate door used to start all eight at once on the local provider, tasks four)."""
    shutil.copytree(TASKS, tmp_path / "tasks")
    runner = ParallelRunner([tmp_path / "tasks"], settings=TaskBatchSettings(
        agent="oracle", provider="local", n_concurrent=8, show_progress=False,
        output_dir=tmp_path / "out",
    ))  # fmt: skip
    asyncio.run(runner.run())
    assert runner.run_dir is not None
    saved = json.loads((runner.run_dir / "run.json").read_text())["config"]
    tasks_starts = saved["concurrency"]["sandbox_starts"]
    generate = run_config(_generate(concurrency=8, provider="local")).saved()["config"]
    assert tasks_starts == generate["concurrency"]["sandbox_starts"] == 4


@pytest.mark.parametrize(
    ("executor", "ray_address", "message", "field"),
    [
        ("k8s", None, "unknown executor 'k8s' (use local or ray)", "--executor"),
        ("local", "auto", "--ray-address needs --executor ray", "--ray-address"),
    ],
)
def test_every_door_refuses_bad_executor_settings_with_the_one_check(
    executor: str, ray_address: str | None, message: str, field: str
) -> None:
    errors = []
    for make in (
        lambda: check_executor(executor, ray_address),
        lambda: TaskBatchSettings(executor=executor, ray_address=ray_address),  # type: ignore[arg-type]
        lambda: _generate(executor=executor, ray_address=ray_address),
    ):
        with pytest.raises(ConfigError) as caught:
            make()
        errors.append((str(caught.value), caught.value.field))
    assert errors[0] == errors[1] == errors[2]
    assert message in errors[0][0] and errors[0][1] == field
