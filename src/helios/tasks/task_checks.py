"""Checks that keep a task folder from reaching the host.

A task folder is input that may be hostile, as an agent may be:
- a symlink that leaves the folder (`environment/leak -> /home/me`) would copy
  host files into the sandbox (and into checksums); it makes the task invalid;
- a Dockerfile `WORKDIR` with `..` (`WORKDIR /../../tmp/x`) would make the local
  provider write outside the sandbox's root; it makes the task invalid too.
Each failure is one line naming the file (and the line for the Dockerfile).
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

from helios.errors import TaskFormatError
from helios.tasks.task_tree import Entry, walk

_WORKDIR = re.compile(r"^\s*WORKDIR\s+(\S+)\s*$", re.IGNORECASE)


def check_task_folder(task_dir: Path, entries: list[Entry] | None = None) -> None:
    """Raise `TaskFormatError` if the folder links outside itself or its WORKDIR escapes
    (`entries`: the folder's walk, when the caller has it)."""
    check_links(task_dir, entries)
    check_workdir(task_dir / "environment" / "Dockerfile")


def check_links(task_dir: Path, entries: list[Entry] | None = None) -> None:
    """`entries`: the walk of `task_dir`, which is then resolved already (`load_task`)."""
    root = task_dir.resolve() if entries is None else task_dir
    for entry in walk(root) if entries is None else entries:
        if not entry.is_link:
            continue
        path = Path(entry.path)
        target = Path(os.path.realpath(path))
        if not target.is_relative_to(root):
            link = os.readlink(path)
            raise TaskFormatError(
                f"symlink leaves the task folder ({path.relative_to(root)} -> {link})",
                file=str(path),
            )


def check_workdir(dockerfile: Path) -> None:
    if not dockerfile.is_file():
        return
    text = dockerfile.read_text("utf-8", errors="replace")
    for number, line in enumerate(text.splitlines(), start=1):
        match = _WORKDIR.match(line)
        if match and ".." in PurePosixPath(match.group(1)).parts:
            raise TaskFormatError(
                f"WORKDIR {match.group(1)} climbs out of the sandbox's root (`..`)",
                file=str(dockerfile),
                line=number,
                field="WORKDIR",
            )
