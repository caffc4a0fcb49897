"""Runs selected by tag, and trials grouped by model, agent or tag: what `helios
compare --tag KEY=VALUE` and `--by model|agent|tag:KEY` compare instead of whole runs.

- `--by model` (or `agent`): every trial of the given runs goes to the group of its
  record's `model` (`agent`); a trial that names none is in the group `(none)`. One run
  of several models is compared model by model, task by task, as two runs are.
- `--by tag:KEY`: each given run goes to the group of its tag KEY's value (run.json's
  `tags`); a run without that tag is left out, with one line saying so.

A group is a `RunResults` like a run (its label `model=…`, `agent=…` or `KEY=…`), so
the comparison, its flips, its interval and every format are the same. The groups of
`model` and `agent` are in the order of their values; those of a tag in the order
their first run was given. `baseline` names the group that is A instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from helios.results.runs import Attempt, NotARun, RunResults

#: what a trial's group is read from, in its record
TRIAL_FIELDS = ("model", "agent")
#: the group of trials whose record names no model (agent)
NONE = "(none)"


@dataclass(frozen=True)
class By:
    """What runs are grouped by: a trial's `model` or `agent`, or a run's tag `key`."""

    kind: Literal["model", "agent", "tag"]
    key: str = ""

    @classmethod
    def parse(cls, text: str) -> By:
        """`model`, `agent` or `tag:KEY`; NotARun (one line) for anything else."""
        if text in TRIAL_FIELDS:
            return cls(kind="model" if text == "model" else "agent")
        kind, colon, key = text.partition(":")
        if kind == "tag" and colon and key:
            return cls(kind="tag", key=key)
        raise NotARun(f"--by {text}: use model, agent or tag:KEY")

    @property
    def title(self) -> str:
        return self.key if self.kind == "tag" else self.kind


@dataclass
class Grouped:
    groups: list[RunResults]
    #: runs left out (no such tag), one line each
    left_out: list[str] = field(default_factory=list)


def select(runs: Sequence[RunResults], tags: dict[str, str]) -> list[RunResults]:
    """The runs whose tags hold every `key=value` of `tags`."""
    return [run for run in runs if all(run.tags.get(k) == v for k, v in tags.items())]


def _merge(label: str, members: Sequence[RunResults], tasks: dict[str, list[Attempt]],
           whole: bool) -> RunResults:  # fmt: skip
    """A group of `members`' `tasks`; `whole`: the group holds its runs whole (a tag's)."""
    first = members[0]
    models = {run.model for run in members}
    agents = {run.agent for run in members}
    return RunResults(
        path=first.path, label=label, door=first.door, kind=first.kind,
        model=models.pop() if len(models) == 1 else None,
        agent=agents.pop() if len(agents) == 1 else None,
        created_at=first.created_at if len(members) == 1 else None,
        finished=all(run.finished for run in members),
        # the time of a run of several groups is theirs together: not one group's
        wall_seconds=first.wall_seconds if whole and len(members) == 1 else None,
        name=first.name if len(members) == 1 else None,
        tags=dict(first.tags) if len(members) == 1 else {},
        tasks={name: sorted(tasks[name], key=lambda a: a.attempt) for name in sorted(tasks)},
    )  # fmt: skip


def _by_trial(runs: Sequence[RunResults], by: By) -> list[tuple[str, RunResults]]:
    by_value: dict[str, dict[str, list[Attempt]]] = {}
    members: dict[str, dict[int, RunResults]] = {}
    for run in runs:
        for task, attempts in run.tasks.items():
            for attempt in attempts:
                value = (attempt.model if by.kind == "model" else attempt.agent) or NONE
                by_value.setdefault(value, {}).setdefault(task, []).append(attempt)
                members.setdefault(value, {})[id(run)] = run
    groups = []
    for value in sorted(by_value):
        group = _merge(f"{by.kind}={value}", list(members[value].values()), by_value[value],
                       whole=False)  # fmt: skip
        attempts = [a for task in by_value[value].values() for a in task]
        # the other field, as the group's trials name it (several: each of them)
        models = sorted({a.model for a in attempts if a.model is not None})
        agents = sorted({a.agent for a in attempts if a.agent is not None})
        group.model = ", ".join(models) or None
        group.agent = ", ".join(agents) or None
        groups.append((value, group))
    return groups


def _by_tag(
    runs: Sequence[RunResults], key: str, left_out: list[str]
) -> list[tuple[str, RunResults]]:
    by_value: dict[str, list[RunResults]] = {}
    for run in runs:
        value = run.tags.get(key)
        if value is None:
            left_out.append(f"{run.label} has no tag {key}: left out")
            continue
        by_value.setdefault(value, []).append(run)
    groups = []
    for value, members in by_value.items():
        tasks: dict[str, list[Attempt]] = {}
        for run in members:
            for task, attempts in run.tasks.items():
                tasks.setdefault(task, []).extend(attempts)
        count = f" ({len(members)} runs)" if len(members) > 1 else ""
        groups.append((value, _merge(f"{key}={value}{count}", members, tasks, whole=True)))
    return groups


def group(runs: Sequence[RunResults], by: By, baseline: str | None = None) -> Grouped:
    """The groups of `runs` by `by`, `baseline`'s first (NotARun when no group has that
    value). The runs' damaged lines stay with the first group, to be reported once."""
    left_out: list[str] = []
    pairs = _by_tag(runs, by.key, left_out) if by.kind == "tag" else _by_trial(runs, by)
    if baseline is not None:
        found = [i for i, (value, _) in enumerate(pairs) if value == baseline]
        if not found:
            shown = ", ".join(value for value, _ in pairs) or "none"
            raise NotARun(f"--baseline {baseline}: no {by.title} has it (found: {shown})")
        pairs.insert(0, pairs.pop(found[0]))
    groups = [group for _, group in pairs]
    if groups:
        problems = [p for run in runs for p in run.problems]
        groups[0] = replace(groups[0], problems=problems)
    return Grouped(groups, left_out)
