"""Whether a run folder is being written: running, interrupted or done.

A writer holds an exclusive flock on the folder's `.lock` while it runs. The viewer
never takes that lock (a probe could make a `--resume` starting at that instant
fail): on Linux it looks the lock up in /proc/locks, elsewhere it asks whether the
pid written in `.lock` is alive.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

LOCK_FILE = ".lock"


def _held_in_proc_locks(path: Path) -> bool | None:
    """Whether /proc/locks lists a lock on `path`; None when it cannot be read."""
    try:
        stat = os.stat(path)
        text = Path("/proc/locks").read_text("ascii", "replace")
    except OSError:
        return None
    wanted = (os.major(stat.st_dev), os.minor(stat.st_dev), stat.st_ino)
    for line in text.splitlines():
        for field in line.split():
            parts = field.split(":")
            if len(parts) != 3:
                continue
            with contextlib.suppress(ValueError):
                if (int(parts[0], 16), int(parts[1], 16), int(parts[2])) == wanted:
                    return True
    return False


def _pid_alive(path: Path) -> bool:
    try:
        text = path.read_text("ascii", "replace").strip()
    except OSError:
        return False
    if not text.isdigit():
        return False
    try:
        os.kill(int(text), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_running(run_dir: Path) -> bool:
    lock = run_dir / LOCK_FILE
    if not lock.is_file():
        return False
    held = _held_in_proc_locks(lock)
    return _pid_alive(lock) if held is None else held
