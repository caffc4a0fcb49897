"""What an exact rerun of a task run needs, and what can no longer be the same.

A task run records in its run.json (under `"rerun"`), when it starts, what its trials
were made from beyond the settings: each task's content hash by its key (the path
under the batch root, as in the trial ids), the digest of each ready image the tasks
name (when the provider knows it), and each agent's identity (its version and
settings). The Helios version is in run.json's head already. With 100,000 tasks the
record is one short line per task, built from the tasks as loaded (never from the
records).

Each agent's record also names the package it comes from with that package's
version ("helios 0.1.0" for a built-in, the distribution of a plugin): a plugin's
code can change while its declared `version` does not. At the end of the run the
record gains `"models"`: each model asked for with the ids the provider reported in
its responses (`gpt-4o-2024-08-06` for `gpt-4o`; `Usage.reported_models`, summed
over every record, so a resumed run keeps the first invocation's), merged with
what run.json held.

The run's seeds: a task run has none (no setting samples anything; the bootstrap
of its confidence intervals uses a fixed one); `helios generate` records its
toolset sampling seed as run.json's `"seed"`.

`helios rerun RUN_DIR` loads the tasks again and `differences` names, one line each,
a task whose content changed, a task that is gone, a new one, an image whose digest
changed, another Helios version and an agent of another version or package: what
makes a trial id or a result differ. Which model id the provider serves is known only
once it has answered, so `model_differences` names a changed one at the end of the
rerun, from what its responses reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from helios.agents.registry import agent_package
from helios.engine.reported_models import RERUN_KEY as RERUN_KEY  # the key of the record
from helios.engine.reported_models import record_models, reported_models
from helios.tasks.task import Task
from helios.text import one_line
from helios.version import __version__

#: at most this many distinct ready images are asked for their digest (the rest: unknown)
MAX_IMAGES = 256
#: at most this many lines of differences; then one line counts the rest
MAX_LINES = 100


def ready_images(tasks: Iterable[Task]) -> list[str]:
    """The ready images the tasks start from (a task with a Dockerfile builds its own:
    its content hash covers it), each once, in order."""
    names: dict[str, None] = {}
    for task in tasks:
        image = task.sandbox_spec().image
        if image:
            names.setdefault(image, None)
    return list(names)


def rerun_record(
    tasks: Iterable[Task], *, images: Mapping[str, str | None], agents: Mapping[str, Any]
) -> dict[str, Any]:
    """The `"rerun"` section of run.json."""
    return {
        "tasks": {task.key or task.name: task.checksum for task in tasks},
        "images": dict(images),
        "agents": agents_record(agents),
    }


def agents_record(agents: Mapping[str, Any]) -> dict[str, Any]:
    """Each agent's identity (name, version, settings) with its `"package"`: the
    package it comes from and that package's version (`agent_package`)."""
    return {
        name: {**identity, "package": agent_package(name)} if isinstance(identity, dict)
        else identity
        for name, identity in agents.items()
    }  # fmt: skip


def models_at_end(
    store_dir: Path, reported: Mapping[str, list[str]], rerun_of: Mapping[str, Any] | None
) -> list[str]:
    """At the end of a run: record the model ids the provider reported in its run.json
    (`record_models`) and, for a rerun (`rerun_of`: the old run's run.json), one line
    per model whose reported ids are not the old run's."""
    record_models(store_dir, reported)
    if rerun_of is None:
        return []
    recorded = rerun_of.get(RERUN_KEY)
    return model_differences(recorded if isinstance(recorded, dict) else {}, reported)


def model_differences(
    recorded: Mapping[str, Any], reported: Mapping[str, list[str]]
) -> list[str]:
    """One line per model whose provider reported other ids in the rerun than in the
    run (`recorded`: its run.json's `"rerun"` section); a model that made no call
    in either is not compared."""
    then = reported_models(recorded.get("models"))
    lines = []
    for model, ids in reported.items():
        before = then.get(model)
        if before and ids and set(before) != set(ids):
            lines.append(f"model {_shown(model)}: the provider reported "
                         f"{_ids(ids)} now, {_ids(before)} in the run")  # fmt: skip
    return lines[:MAX_LINES]


def _ids(ids: list[str]) -> str:
    return ", ".join(_shown(i) for i in ids)


def _shown(value: object, limit: int = 80) -> str:
    """Text from a run.json or a provider, safe and short on a terminal."""
    return one_line(str(value), limit)


def _agent_lines(recorded: object, agents: Mapping[str, Any]) -> list[str]:
    """An agent whose version or package is not the run's (a built-in's package is
    Helios, named by the Helios line already)."""
    if not isinstance(recorded, dict):
        return []
    lines = []
    for name, now in agents_record(agents).items():
        then = recorded.get(name)
        if not (isinstance(then, dict) and isinstance(now, dict)):
            continue
        version, was = now.get("version"), then.get("version")
        if isinstance(version, str) and isinstance(was, str) and version != was:
            lines.append(f"agent {_shown(name)}: version {_shown(version)} now, "
                         f"{_shown(was)} in the run")  # fmt: skip
        package, was = now.get("package"), then.get("package")
        helios = all(isinstance(p, str) and p.startswith("helios ") for p in (package, was))
        if isinstance(package, str) and isinstance(was, str) and package != was and not helios:
            lines.append(f"agent {_shown(name)}: {_shown(package)} now, "
                         f"{_shown(was)} in the run")  # fmt: skip
    return lines


def _str_map(value: object) -> dict[str, str | None]:
    """A recorded mapping of names to hashes; anything else in a hand-edited run.json
    is left out (the CLI has named it already)."""
    if not isinstance(value, dict):
        return {}
    return {str(k): v for k, v in value.items() if v is None or isinstance(v, str)}


def differences(
    recorded: Mapping[str, Any],
    tasks: Iterable[Task],
    images: Mapping[str, str | None],
    *,
    helios_version: object,
    agents: Mapping[str, Any] | None = None,
) -> list[str]:
    """One line per thing that can no longer be as it was in the run: `recorded` is
    its run.json's `"rerun"` section, `tasks`, `images` and `agents` (each agent's
    identity) are what a rerun would use."""
    lines: list[str] = []
    if isinstance(helios_version, str) and helios_version != __version__:
        lines.append(f"Helios {__version__} now, {_shown(helios_version)} in the run")
    lines += _agent_lines(recorded.get("agents"), agents or {})
    then = _str_map(recorded.get("tasks"))
    now = {task.key or task.name: task.checksum for task in tasks}
    for key, checksum in then.items():
        current = now.get(key)
        if current is None:
            lines.append(f"task {key}: gone (not found, or no longer valid)")
        elif checksum is not None and current != checksum:
            lines.append(
                f"task {key}: its content changed (hash {checksum[:12]} now {current[:12]})"
            )
    if then:
        lines += [f"task {key}: new (not in the run)" for key in now if key not in then]
    for name, digest in _str_map(recorded.get("images")).items():
        current = images.get(name)
        if digest and current and current != digest:
            lines.append(f"image {name}: its digest changed ({digest[:19]} now {current[:19]})")
    if len(lines) > MAX_LINES:
        rest = len(lines) - MAX_LINES + 1
        lines = [*lines[: MAX_LINES - 1], f"and {rest} more difference(s)"]
    return lines
