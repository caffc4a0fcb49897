"""Turn task paths and settings into an ordered list of TrialSpecs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helios.agents.registry import create_agent
from helios.errors import HeliosError, TaskFormatError
from helios.identity import trial_id
from helios.tasks.summary import InvalidTask
from helios.tasks.task import Task, discover_tasks, load_task
from helios.tasks.trial import TrialSpec


@dataclass
class LoadedTasks:
    tasks: list[Task] = field(default_factory=list)
    invalid: list[InvalidTask] = field(default_factory=list)


def resolve_task_dirs(paths: Sequence[str | Path] | str | Path, pattern: str) -> list[Path]:
    """Expand each path: a task folder stays itself, any other folder is searched."""
    items = [paths] if isinstance(paths, str | Path) else list(paths)
    found: list[Path] = []
    seen: set[Path] = set()
    for item in items:
        path = Path(item)
        if not path.exists():
            raise TaskFormatError("no such file or directory", file=str(path))
        for task_dir in discover_tasks(path, pattern):
            if task_dir not in seen:
                seen.add(task_dir)
                found.append(task_dir)
    return found


def load_tasks(task_dirs: list[Path]) -> LoadedTasks:
    """Load every task; a bad one becomes an `InvalidTask` and the rest go on."""
    loaded = LoadedTasks()
    for task_dir in task_dirs:
        try:
            loaded.tasks.append(load_task(task_dir))
        except HeliosError as exc:
            loaded.invalid.append(InvalidTask(path=str(task_dir), error=str(exc)))
        except OSError as exc:
            loaded.invalid.append(InvalidTask(path=str(task_dir), error=f"{task_dir}: {exc}"))
    return loaded


def trial_folder(index: int, task: Task, attempt: int, n_attempts: int) -> str:
    base = f"{index + 1:03d}_{task.name}"
    return f"{base}/attempt_{attempt:03d}" if n_attempts > 1 else base


def build_specs(
    tasks: list[Task],
    *,
    n_attempts: int,
    agent: str,
    agent_settings: dict[str, Any],
    model: str | None,
    provider: str,
    result_settings: dict[str, Any] | None = None,
) -> list[TrialSpec]:
    """Attempts interleaved across tasks: task1#1, task2#1, …, task1#2, …"""
    prototype = create_agent(agent, **agent_settings)
    identity = prototype.identity()
    model = model if prototype.uses_model else None
    settings = {"provider": provider, **(result_settings or {})}
    specs: list[TrialSpec] = []
    for attempt in range(1, n_attempts + 1):
        for index, task in enumerate(tasks):
            tid = trial_id(
                # the name too: two identical task folders are still two tasks
                input_checksum=f"{task.name}:{task.checksum}",
                attempt=attempt,
                agent=identity,
                model=model,
                settings=settings,
            )
            specs.append(
                TrialSpec(
                    trial_id=tid,
                    task=task,
                    attempt=attempt,
                    agent=agent,
                    agent_settings=agent_settings,
                    model=model,
                    provider=provider,
                    folder=trial_folder(index, task, attempt, n_attempts),
                    label=task.name + (f" #{attempt}" if n_attempts > 1 else ""),
                )
            )
    return specs


def dedupe_folders(specs: list[TrialSpec], taken: dict[str, str]) -> list[TrialSpec]:
    """Give a spec a fresh folder if a finished trial with another id owns its folder.

    `taken` maps folder → trial id of finished records (from a resumed run).
    """
    result: list[TrialSpec] = []
    for spec in specs:
        owner = taken.get(spec.folder)
        if owner is None or owner == spec.trial_id:
            result.append(spec)
            continue
        n = 2
        while f"{spec.folder}-{n}" in taken:
            n += 1
        folder = f"{spec.folder}-{n}"
        taken[folder] = spec.trial_id
        result.append(TrialSpec(**{**spec.__dict__, "folder": folder}))
    return result
