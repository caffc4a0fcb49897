"""Which of the tasks found a run runs: globs, `[metadata]` fields, a limit, a sample.

    --include 'hello-*' --exclude '*slow*'     globs on the task's name or path
    --task-tag python --difficulty easy        the task.toml's [metadata] tags, difficulty
    --category web                             and category (a value of a flag given twice:
                                               either; two flags: both)
    --sample 20 --seed 7                       a random subset, the same for the same seed
    --limit 3                                  the first three of what is left

The steps run in that order. The sample is drawn from the tasks left in the order
they were found (sorted), with its own `random.Random(seed)`: the same tasks and seed
give the same sample on any machine, and a resume (whose saved config holds the
selection) runs the same sample.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from helios.errors import ConfigError
from helios.tasks.task import Task

#: the `[metadata]` fields a selection reads
METADATA_FIELDS = ("tags", "difficulty", "category")


@dataclass(frozen=True)
class TaskSelection:
    """A run's selection of tasks; empty (the default) selects every task found."""

    #: globs on the task's name, its path under the batch's root, or its folder: a task
    #: is kept when one of them matches (none given: every task)
    include: tuple[str, ...] = ()
    #: globs as `include`: a task any of them matches is left out
    exclude: tuple[str, ...] = ()
    #: `[metadata] tags`: a task with any of these is kept (`--task-tag`: `--tag` names
    #: the run's own tags)
    task_tags: tuple[str, ...] = ()
    #: `[metadata] difficulty`: one of these (case does not matter)
    difficulty: tuple[str, ...] = ()
    #: `[metadata] category`: one of these
    category: tuple[str, ...] = ()
    #: a random subset of this many tasks (with `seed`)
    sample: int | None = None
    seed: int = 0
    #: at most this many tasks, the first ones
    limit: int | None = field(default=None)

    def __post_init__(self) -> None:
        for name in ("include", "exclude", "task_tags", "difficulty", "category"):
            value = getattr(self, name)
            if isinstance(value, str):  # one value given as a string
                value = (value,)
            object.__setattr__(self, name, tuple(str(v) for v in value or ()))
        for name in ("limit", "sample"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):  # fmt: skip
                raise ConfigError(f"--{name} must be a whole number of at least 1, "
                                  f"not {value!r}", field=f"--{name}")  # fmt: skip

    @property
    def active(self) -> bool:
        return self != TaskSelection()

    @property
    def narrows_by_content(self) -> bool:
        """Whether the selection needs more than a task's path (its metadata, or a
        count): a task that could not be loaded is then not among those selected."""
        return bool(self.task_tags or self.difficulty or self.category or self.sample or self.limit)

    def matches_path(self, name: str, key: str, path: str | Path) -> bool:
        """Whether the globs keep a task of this name, key and folder."""
        texts = [name, key, str(path), Path(path).name]
        if self.include and not any(fnmatchcase(t, g) for g in self.include for t in texts):
            return False
        return not any(fnmatchcase(t, g) for g in self.exclude for t in texts)

    def matches_metadata(self, metadata: dict[str, Any]) -> bool:
        tags = {_norm(t) for t in self.task_tags}
        if tags and not tags & set(_values(metadata, "tags")):
            return False
        for name in ("difficulty", "category"):
            wanted = {_norm(v) for v in getattr(self, name)}
            if wanted and not wanted & set(_values(metadata, name)):
                return False
        return True

    def apply(self, tasks: Sequence[Task]) -> list[Task]:
        """The tasks selected, in the order found."""
        kept = [t for t in tasks if self.matches_path(t.name, t.key, t.origin or t.path)
                and self.matches_metadata(t.config.metadata)]  # fmt: skip
        if self.sample is not None and self.sample < len(kept):
            chosen = set(random.Random(self.seed).sample(range(len(kept)), self.sample))
            kept = [t for i, t in enumerate(kept) if i in chosen]
        return kept[: self.limit] if self.limit is not None else kept

    def describe(self) -> str:
        """The selection as its flags, for a header or a log line."""
        parts = [f"--include {g}" for g in self.include] + [f"--exclude {g}" for g in self.exclude]
        parts += [f"--task-tag {t}" for t in self.task_tags]
        parts += [f"--difficulty {d}" for d in self.difficulty]
        parts += [f"--category {c}" for c in self.category]
        if self.sample is not None:
            parts.append(f"--sample {self.sample} --seed {self.seed}")
        if self.limit is not None:
            parts.append(f"--limit {self.limit}")
        return " ".join(parts)


def selected_line(selected: int, found: int) -> str:
    """'12 of 3,566 tasks selected'."""
    return f"{selected:,} of {found:,} task{'s' if found != 1 else ''} selected"


def _norm(value: Any) -> str:
    return str(value).strip().lower()


def _values(metadata: dict[str, Any], name: str) -> list[str]:
    """A metadata field's values: a string, a number, or a list of them."""
    value = metadata.get(name)
    if value is None:
        return []
    items = value if isinstance(value, list | tuple) else [value]
    return [_norm(item) for item in items if isinstance(item, str | int | float)]
