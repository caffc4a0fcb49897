"""What an exact rerun of a task run needs, and what can no longer be the same.

A task run records in its run.json (under `"rerun"`), when it starts, what its trials
were made from beyond the settings: each task's content hash by its key (the path
under the batch root, as in the trial ids), the digest of each ready image the tasks
name (when the provider knows it), and each agent's identity (its version and
settings). The Helios version is in run.json's head already. With 100,000 tasks the
record is one short line per task, built from the tasks as loaded (never from the
records).

`helios rerun RUN_DIR` loads the tasks again and `differences` names, one line each,
a task whose content changed, a task that is gone, a new one, an image whose digest
changed and another Helios version: what makes a trial id or a result differ.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from helios.tasks.task import Task
from helios.version import __version__

#: the key of run.json that holds the record
RERUN_KEY = "rerun"
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
        "agents": dict(agents),
    }


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
) -> list[str]:
    """One line per thing that can no longer be as it was in the run: `recorded` is
    its run.json's `"rerun"` section, `tasks` and `images` are what a rerun would use."""
    lines: list[str] = []
    if isinstance(helios_version, str) and helios_version != __version__:
        lines.append(f"Helios {__version__} now, {helios_version} in the run")
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
