"""Turn task paths and settings into an ordered list of TrialSpecs."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helios.agents.registry import agent_class, choose_agent, create_agent
from helios.environments.base import Environment
from helios.environments.desktop.view_mode import ViewMode
from helios.errors import ConfigError, HeliosError, InputError, TaskFormatError
from helios.identity import trial_id
from helios.models.services import ModelOptions
from helios.tasks.features import agent_limits, unsupported
from helios.tasks.phases import TimeoutScale
from helios.tasks.selection import TaskSelection, selected_line
from helios.tasks.settings import TaskBatchSettings
from helios.tasks.summary import InvalidTask, UnsupportedTask
from helios.tasks.task import Task, discover_tasks, load_task
from helios.tasks.trial import TrialSpec


@dataclass
class LoadedTasks:
    tasks: list[Task] = field(default_factory=list)
    invalid: list[InvalidTask] = field(default_factory=list)
    #: valid tasks that need what Helios (or the provider) cannot give
    unsupported: list[UnsupportedTask] = field(default_factory=list)
    #: keys no schema version defines → how many tasks have them
    unknown_keys: dict[str, int] = field(default_factory=dict)
    #: with a selection (`tasks.selection`): the task folders found before it, else None
    found: int | None = None

    def unknown_keys_line(self, limit: int = 8) -> str | None:
        """One warning for the whole batch, or None."""
        if not self.unknown_keys:
            return None
        items = sorted(self.unknown_keys.items(), key=lambda kv: (-kv[1], kv[0]))
        shown = [f"{key} ({n} task{'s' if n > 1 else ''})" for key, n in items[:limit]]
        more = f", and {len(items) - limit} more" if len(items) > limit else ""
        return f"task.toml keys Helios does not know were ignored: {', '.join(shown)}{more}"

    def warning_lines(self) -> list[tuple[str, str]]:
        """(label, text): one line per invalid or unsupported task, one for unknown keys."""
        lines = [("invalid task", bad.error) for bad in self.invalid]
        lines += [("unsupported task", task.error) for task in self.unsupported]
        unknown = self.unknown_keys_line()
        return lines + ([("warning", unknown)] if unknown is not None else [])


def resolve_task_dirs(paths: Sequence[str | Path] | str | Path, pattern: str) -> list[Path]:
    """Expand each path: a task folder stays itself, any other folder is searched."""
    items = [paths] if isinstance(paths, str | Path) else list(paths)
    found: list[Path] = []
    seen: set[Path] = set()
    if Path(pattern).is_absolute() or pattern.startswith("/"):
        raise ConfigError(
            f"the pattern {pattern!r} is absolute: give one relative to the tasks folder, "
            "e.g. '**/task.toml'",
            field="--pattern",
        )
    for item in items:
        path = Path(item)
        if not path.exists():
            raise TaskFormatError("no such file or directory", file=str(path))
        for task_dir in discover_tasks(path, pattern):
            if task_dir not in seen:
                seen.add(task_dir)
                found.append(task_dir)
    return found


def task_keys(task_dirs: list[Path]) -> dict[Path, str]:
    """Each task's path relative to the batch root (the common parent of all the
    batch's task folders): two identical folders `a/t` and `b/t` are two units,
    and moving or renaming the root keeps every key."""
    if not task_dirs:
        return {}
    root = Path(os.path.commonpath([str(d) for d in task_dirs]))
    if len(task_dirs) == 1 or root in task_dirs:
        root = root.parent
    return {d: d.relative_to(root).as_posix() for d in task_dirs}


def load_tasks(
    task_dirs: list[Path], provider: type[Environment] | None = None, *,
    network_default: bool = True, host_env: dict[str, str] | None = None,
    digests: bool = True,
) -> LoadedTasks:  # fmt: skip
    """Load every task; a bad one becomes an `InvalidTask`, one that needs what
    Helios or `provider` cannot give an `UnsupportedTask`, and the rest go on.
    `network_default`: the network of a sandbox whose task leaves it unset;
    `digests`: hash each task's files now (False: a listing, `load_task`)."""
    loaded = LoadedTasks()
    keys = task_keys(task_dirs)
    for task_dir in task_dirs:
        try:
            task = load_task(task_dir, key=keys[task_dir], network_default=network_default,
                             host_env=host_env, digests=digests)  # fmt: skip
            for key in task.unknown_keys:
                loaded.unknown_keys[key] = loaded.unknown_keys.get(key, 0) + 1
            limits = unsupported(task, provider)
            if limits:
                reasons = [str(limit) for limit in limits]
                loaded.unsupported.append(UnsupportedTask(path=str(task_dir), reasons=reasons))
            else:
                loaded.tasks.append(task)
        except HeliosError as exc:
            loaded.invalid.append(InvalidTask(path=str(task_dir), error=str(exc)))
        except UnicodeError:
            reason = "not valid UTF-8 (rename or re-encode it)"
            where = shown_path(_undecodable_file(task_dir) or task_dir)
            invalid = InvalidTask(path=shown_path(task_dir), error=f"{where}: {reason}")
            loaded.invalid.append(invalid)
        except OSError as exc:
            loaded.invalid.append(InvalidTask(path=str(task_dir), error=f"{task_dir}: {exc}"))
    return loaded


def load_batch(
    paths: Sequence[str | Path] | str | Path, pattern: str,
    provider: type[Environment] | None = None,
    report: Callable[[list[tuple[str, str]]], None] | None = None, *,
    network_default: bool = True, host_env: dict[str, str] | None = None,
    selection: TaskSelection | None = None, digests: bool = True,
) -> LoadedTasks:  # fmt: skip
    """The batch's tasks (those `selection` keeps), each skipped one `report`ed (label,
    text) first; `InputError` when no task matches or none can run. `digests`: False
    for a listing, which needs no task's hash (`load_task`)."""
    task_dirs = resolve_task_dirs(paths, pattern)
    if not task_dirs:
        where = ", ".join(str(p) for p in ([paths] if isinstance(paths, str | Path) else paths))
        raise InputError(f"no task.toml matching {pattern!r} under {where}")
    loaded = load_tasks(task_dirs, provider, network_default=network_default,
                        host_env=host_env, digests=digests)  # fmt: skip
    if selection is not None and selection.active:
        loaded = select_tasks(loaded, selection, len(task_dirs))
    if report is not None:
        report(loaded.warning_lines())
    if not loaded.tasks:
        skipped = [t.error for t in loaded.invalid] + [t.error for t in loaded.unsupported]
        first = skipped[0] if skipped else "none found"
        raise InputError(
            f"no task to run ({len(loaded.invalid)} invalid, "
            f"{len(loaded.unsupported)} unsupported): {first}"
        )
    return loaded


def select_tasks(loaded: LoadedTasks, selection: TaskSelection, found: int) -> LoadedTasks:
    """`loaded` with only the tasks `selection` keeps. A task that could not be loaded
    (invalid, unsupported) stays when the globs keep its folder and the selection reads
    nothing more (metadata, a count); else it is not among those selected.
    `InputError` when none is selected."""
    tasks = selection.apply(loaded.tasks)
    keep_skipped = not selection.narrows_by_content

    def kept(path: str) -> bool:
        return keep_skipped and selection.matches_path(Path(path).name, "", path)

    chosen = LoadedTasks(
        tasks=tasks, invalid=[t for t in loaded.invalid if kept(t.path)],
        unsupported=[t for t in loaded.unsupported if kept(t.path)],
        unknown_keys=loaded.unknown_keys, found=found,
    )  # fmt: skip
    if not chosen.tasks and not chosen.invalid and not chosen.unsupported:
        raise InputError(f"no task selected: {selected_line(0, found)} by "
                         f"{selection.describe()}")  # fmt: skip
    return chosen


def refuse_for_agents(
    specs: list[TrialSpec], agents: str,
    report: Callable[[list[tuple[str, str]]], None] | None = None,
) -> tuple[list[TrialSpec], list[UnsupportedTask]]:  # fmt: skip
    """The trials whose agent takes what their task offers it (skills, MCP servers:
    `features.agent_limits`), and one `UnsupportedTask` per task and agent that does
    not, each `report`ed: the task still runs with the other agents of the run.
    `InputError` when no trial is left (`agents`: the run's, for that line)."""
    judged: dict[tuple[Path, str], list[str]] = {}
    dropped: dict[tuple[Path, str], int] = {}
    kept: list[TrialSpec] = []
    for spec in specs:
        key = (spec.task.source, spec.agent)
        if key not in judged:
            limits = agent_limits(spec.task, agent_class(spec.agent))
            judged[key] = [str(limit) for limit in limits]
        if judged[key]:
            dropped[key] = dropped.get(key, 0) + 1
        else:
            kept.append(spec)
    refused = [UnsupportedTask(path=str(path), reasons=judged[path, agent], agent=agent,
                               trials=trials)
               for (path, agent), trials in dropped.items()]  # fmt: skip
    if refused and report is not None:
        report(LoadedTasks(unsupported=refused).warning_lines())
    if not kept:
        raise InputError(f"no task to run for the agent(s) {agents}: {refused[0].error}")
    return kept, refused


def shown_path(path: Path) -> str:
    """A path as text that can be printed and stored: undecodable bytes as \\xNN."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _undecodable_file(task_dir: Path) -> Path | None:
    """The first task file whose name or text is not UTF-8, to name it in the error."""
    for name in ("task.toml", "instruction.md"):
        try:
            (task_dir / name).read_text("utf-8")
        except UnicodeDecodeError:
            return task_dir / name
        except OSError:
            continue
    for path in task_dir.rglob("*"):
        try:
            str(path).encode("utf-8")
        except UnicodeEncodeError:
            return path
    return None


def trial_folder(index: int, task: Task, attempt: int, n_attempts: int, suffix: str = "") -> str:
    base = f"{index + 1:03d}_{task.name}{suffix}"
    return f"{base}/attempt_{attempt:03d}" if n_attempts > 1 else base


def folder_labels(names: Sequence[str]) -> dict[str, str]:
    """A short label per name for folder names: a model id's last part
    ('openai/gpt-4o' → 'gpt-4o'), its whole id when two last parts clash; any
    character but letters, digits, '.', '_' and '-' becomes '-'."""

    def clean(text: str) -> str:
        return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "x"

    short = {name: clean(name.rsplit("/", 1)[-1]) for name in names}
    clashes = {label for label in short.values() if list(short.values()).count(label) > 1}
    return {name: clean(name) if short[name] in clashes else short[name] for name in names}


def build_specs(
    tasks: list[Task],
    *,
    n_attempts: int,
    agent: str,
    agent_settings: dict[str, Any],
    model: str | None,
    provider: str,
    result_settings: dict[str, Any] | None = None,
    watch: ViewMode | None = None,
    keep_model: bool = False,
    suffix: str = "",
    timeouts: TimeoutScale | None = None,
    network_default: str = "public",
) -> list[TrialSpec]:
    """Attempts interleaved across tasks: task1#1, task2#1, …, task1#2, …

    `keep_model`: the trials name the model even when the agent uses none (a run over
    several models: its trials are told apart). `suffix` ends each folder's name and
    label (the model and agent of a run over several)."""
    prototype = create_agent(agent, **agent_settings)
    identity = prototype.identity()
    model = model if prototype.uses_model or keep_model else None
    settings = {"provider": provider, **(result_settings or {})}
    scaled = timeouts.identity() if timeouts is not None else None
    if scaled is not None:  # only then: the ids of runs without multipliers stay
        settings["timeouts"] = scaled
    # Where a task leaves its network unset and the run's default is public, its
    # meaning is not what it was before the default (none): so are its trial ids.
    public = {**settings, "network_default": "public"}
    specs: list[TrialSpec] = []
    for attempt in range(1, n_attempts + 1):
        for index, task in enumerate(tasks):
            tid = trial_id(
                # the path under the batch root too: two identical folders are two tasks
                input_checksum=f"{task.key}:{task.checksum}",
                attempt=attempt,
                agent=identity,
                model=model,
                settings=public if network_default == "public" and task.network_unset else settings,
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
                    folder=trial_folder(index, task, attempt, n_attempts, suffix),
                    label=task.name + suffix + (f" #{attempt}" if n_attempts > 1 else ""),
                    watch=watch,
                    timeouts=timeouts,
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


def product_specs(
    tasks: list[Task], settings: TaskBatchSettings, *, uses_model: bool
) -> tuple[list[TrialSpec], list[str]]:
    """The trials of a batch: every model × every agent × task × attempt (only the
    settings' `pairs` of them when it lists some), attempts interleaved across tasks;
    and the agents they run. Each combination's folders end in its model's and agent's
    labels when the run has more than one of them."""
    s = settings
    models = s.models.every()
    agents = [(s.agent, s.agent_settings), *((a.name, a.settings) for a in s.other_agents)]
    model_labels = folder_labels([m.model or "" for m in models])
    agent_labels = folder_labels([str(a) for a, _ in agents])
    combos: list[list[TrialSpec]] = []
    names: list[str] = []
    for options in models:
        for agent, agent_settings in agents:
            if s.pairs is not None and (options.model, agent) not in s.pairs:
                continue
            suffix = (f"__{model_labels[options.model or '']}" if len(models) > 1 else "") + (
                f"__{agent_labels[str(agent)]}" if len(agents) > 1 else ""
            )
            specs, chosen = _combination_specs(
                tasks, s, options, agent, agent_settings, suffix, uses_model=uses_model
            )
            combos.append(specs)
            names.extend(chosen)
    n = len(tasks)
    ordered = [specs[a * n + i] for a in range(s.n_attempts) for specs in combos for i in range(n)]
    return ordered, list(dict.fromkeys(names))


def _combination_specs(
    tasks: list[Task], s: TaskBatchSettings, options: ModelOptions, agent: str | None,
    agent_settings: dict[str, Any], suffix: str, *, uses_model: bool,
) -> tuple[list[TrialSpec], list[str]]:  # fmt: skip
    """One model's and agent's trials, each task with its agent: when none is named,
    a task with a desktop gets the computer agent (same order and folders either way)."""
    agents = [
        choose_agent(agent, options.model, desktop=task.config.desktop is not None)
        for task in tasks
    ]
    by_agent = {
        name: build_specs(
            tasks,
            n_attempts=s.n_attempts,
            agent=name,
            agent_settings=agent_settings,
            model=options.model,
            provider=s.provider,
            result_settings={"generation": options.generation.identity()} if uses_model else {},
            watch=s.watch,
            keep_model=bool(s.models.others),
            suffix=suffix,
            timeouts=s.timeouts,
            network_default=s.network_default,
        )
        for name in dict.fromkeys(agents)
    }
    specs = [by_agent[agents[i % len(tasks)]][i] for i in range(len(tasks) * s.n_attempts)]
    return specs, list(by_agent)
