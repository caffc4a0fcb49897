"""A task run's `RunConfig`: what run.json records and a resume must match.

Built from the batch's settings once its tasks are planned: the identity (the
settings that change results), what `--resume RUN_DIR` alone continues with (never
a secret), the saved config, and the `"rerun"` record (`helios.tasks.reproduce`).
Also the agents and model a batch runs with, settled (and checked) before any work.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helios.agents.registry import agent_class, agent_version, choose_agent, create_agent
from helios.engine.config import ConcurrencyConfig, OutputsConfig, RunConfig, SandboxConfig
from helios.engine.saved_config import dump_config
from helios.engine.workers import default_workers
from helios.errors import ConfigError
from helios.models.routing import DEFAULT_MODEL, key_variable
from helios.secrets import public_url
from helios.tasks.reproduce import MAX_IMAGES, RERUN_KEY, differences, ready_images, rerun_record
from helios.tasks.settings import TaskBatchSettings
from helios.tasks.task import Task
from helios.tasks.trial import TrialSpec

TaskPaths = Sequence[str | Path] | str | Path


def as_list(paths: TaskPaths) -> list[str | Path]:
    return [paths] if isinstance(paths, str | Path) else list(paths)


def dataset_paths(settings: TaskBatchSettings, task_paths: TaskPaths) -> TaskPaths:
    """`task_paths`, or the task folders of a dataset the settings name ("NAME@VERSION",
    `tasks.datasets`), in the cache; the settings then keep its record (run.json's)."""
    if not isinstance(settings.dataset, str):
        return task_paths
    from helios.tasks.datasets import dataset_tasks  # git, urllib: only for a dataset

    if as_list(task_paths):
        raise ConfigError("give task_paths or dataset=, not both", field="dataset")
    fetched = dataset_tasks(settings.dataset, settings.registry)
    settings.dataset, settings.pattern = fetched.record(), "**/task.toml"  # each folder itself
    return fetched.task_dirs


def combinations(settings: TaskBatchSettings) -> int:
    """Models × agents (or the pairs given): the trials of one task and attempt."""
    s = settings
    if s.pairs is not None:
        return len(s.pairs)
    return len(s.models.every()) * (1 + len(s.other_agents))


def settle_agents(settings: TaskBatchSettings) -> tuple[str, bool]:
    """The agent (the one named, else chosen by the model: a computer-use model gets
    the computer agent; per task, its desktop may choose too) and whether any agent
    uses a model. Each agent's settings are checked here, before any work; with
    several agents each is named, and a model is chosen when none is given."""
    agent = choose_agent(settings.agent, settings.models.model)
    create_agent(agent, **settings.agent_settings)
    if settings.other_agents and settings.agent is None:
        settings.agent = agent  # several agents: each named (and recorded)
    for other in settings.other_agents:
        create_agent(choose_agent(other.name, settings.models.model), **other.settings)
    uses_model = agent_class(agent).uses_model or any(
        agent_class(other.name).uses_model for other in settings.other_agents
    )
    if (uses_model or settings.models.others) and settings.models.model is None:
        settings.models.model = DEFAULT_MODEL
    return agent, uses_model


@dataclass
class Planned:
    """What the batch planned, as run.json records it for a rerun."""

    tasks: list[Task] = field(default_factory=list)
    #: each ready image's digest (None: unknown)
    images: dict[str, str | None] = field(default_factory=dict)
    #: each agent's identity (its version and settings)
    agents: dict[str, Any] = field(default_factory=dict)
    #: with a selection of tasks: the task folders found before it (the header's "3 of 8")
    found: int | None = None


def agent_identities(specs: Sequence[TrialSpec], agents: Sequence[str]) -> dict[str, Any]:
    """Each agent's identity (its version and settings), from its first trial's settings."""
    settings_of: dict[str, dict[str, Any]] = {}
    for spec in specs:
        settings_of.setdefault(spec.agent, spec.agent_settings)
        if len(settings_of) == len(agents):
            break
    return {agent: create_agent(agent, **kept).identity() for agent, kept in settings_of.items()}


async def ready_image_digests(
    settings: TaskBatchSettings, tasks: list[Task]
) -> dict[str, str | None]:
    """The digest of each ready image the tasks name (docker only; else unknown)."""
    names = ready_images(tasks)
    resuming = settings.resume is not None  # its run.json is written already
    if settings.provider != "docker" or not names or resuming:
        return dict.fromkeys(names)
    from helios.environments.docker.cli import image_digests

    return await image_digests(names, MAX_IMAGES)


def rerun_differences(settings: TaskBatchSettings, planned: Planned) -> list[str]:
    """With `rerun_of`: each thing that can no longer be as in that run."""
    earlier = settings.rerun_of
    if earlier is None:
        return []
    recorded = earlier.get(RERUN_KEY)
    return differences(recorded if isinstance(recorded, dict) else {}, planned.tasks,
                       planned.images, helios_version=earlier.get("helios_version"),
                       agents=planned.agents)  # fmt: skip


def run_config(
    settings: TaskBatchSettings, task_paths: TaskPaths, *, agent: str, uses_model: bool,
    planned: Planned,
) -> RunConfig:  # fmt: skip
    s = settings
    return RunConfig(
        kind=s.run_prefix,
        concurrency=ConcurrencyConfig(
            in_flight=s.n_concurrent,
            processes=s.workers or default_workers(s.n_concurrent),
            sandbox_starts=s.max_starts,
            retry_errors=s.retry_errors,
            retry_below=s.retry_failed_below,
            executor=s.executor,
            ray_address=s.ray_address,
        ),
        sandbox=SandboxConfig(provider=s.provider),
        outputs=OutputsConfig(
            parent=s.output_dir, prefix=s.run_prefix, resume=s.resume, force=s.force
        ),
        budget=s.budget,
        identity=identity(s, agent=agent, uses_model=uses_model),
        recorded=recorded(s, task_paths, planned),
        config={
            "tasks": [str(Path(p).absolute()) for p in as_list(task_paths)],
            "settings": dump_config(s),
            "api_key_env": key_variables(s, uses_model=uses_model),
        },
        labels=s.labels,
    )


def identity(settings: TaskBatchSettings, *, agent: str, uses_model: bool) -> dict[str, Any]:
    """The settings a resume must match: they change results."""
    s = settings
    found: dict[str, Any] = {
        "agent": agent, "model": s.models.model, "provider": s.provider,
        "n_attempts": s.n_attempts, "agent_settings": s.agent_settings,
    }  # fmt: skip
    version = agent_version(agent, s.agent_settings)
    if version is not None:  # an installed agent: the release it runs
        found["agent_version"] = version
    if uses_model:
        found["generation"] = s.models.generation.identity()
    # a run over several models or agents: each of them (a run of one keeps the
    # identity it always had, so its resumes still match)
    if s.models.others:
        found["models"] = [
            {"model": m.model, "generation": m.generation.identity()} for m in s.models.every()
        ]
    if s.other_agents:
        found["agents"] = agents_recorded(s)
    if s.pairs is not None:
        found["pairs"] = [list(pair) for pair in s.pairs]
    if s.timeouts.identity() is not None:
        found["timeouts"] = s.timeouts.identity()
    if s.network_default == "public":  # a run of before (unset: none) still matches "none"
        found["network_default"] = s.network_default
    return json.loads(json.dumps(found, default=str))  # type: ignore[no-any-return]


def agents_recorded(settings: TaskBatchSettings) -> list[dict[str, Any]]:
    s = settings
    return [{"name": s.agent, "settings": s.agent_settings}] + [
        {"name": a.name, "settings": a.settings} for a in s.other_agents
    ]


def key_variables(settings: TaskBatchSettings, *, uses_model: bool) -> dict[str, str | None]:
    """Each model's key, named only by the variable it is read from (or --api-key)."""
    every = settings.models.every() if uses_model else []
    return {str(m.model): key_variable(str(m.model)) for m in every if m.model}


def recorded(
    settings: TaskBatchSettings, task_paths: TaskPaths, planned: Planned
) -> dict[str, Any]:
    """What `--resume RUN_DIR` alone continues with (never a secret: the endpoint
    without a key in it, no API key)."""
    s = settings
    base_url = s.models.base_url
    return {
        "task_paths": [str(Path(p).absolute()) for p in as_list(task_paths)],
        "n_concurrent": s.n_concurrent, "pattern": s.pattern, "workers": s.workers,
        "base_url": public_url(base_url) if base_url else None,
        "prices": str(s.models.prices.absolute()) if s.models.prices else None,
        # a run on a Ray cluster is resumed on it (a local one records nothing here)
        **({"executor": s.executor, "ray_address": s.ray_address}
           if s.executor == "ray" else {}),
        **({"rerun_of": {"run_id": s.rerun_of.get("run_id")}} if s.rerun_of else {}),
        # the dataset named with -d: its version and each task's commit (issue 33)
        **({"dataset": s.dataset} if s.dataset else {}),
        RERUN_KEY: json.loads(json.dumps(rerun_record(
            planned.tasks, images=planned.images, agents=planned.agents,
        ), default=str)),
        # a run over several models: each one's endpoint (its model and generation
        # are in the identity's "models")
        **({"model_base_urls": [public_url(m.base_url) if m.base_url else None
                                for m in s.models.every()]}
           if s.models.others else {}),
    }  # fmt: skip
