"""One trial's folder as the viewer shows it: result.json, config.json, the
verifier's output, where its trajectory is, and the list of its files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from helios.view.roots import Roots
from helios.view.runs import read_json

#: the most of a verifier output file shown in the page (its tail)
MAX_OUTPUT = 256 * 1024
#: the most files listed for one trial
MAX_FILES = 2000
TRAJECTORY = "agent/trajectory.json"


def _tail(path: Path) -> dict[str, Any]:
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            handle.seek(max(0, size - MAX_OUTPUT))
            data = handle.read(MAX_OUTPUT)
    except FileNotFoundError:
        return {"text": None, "error": f"{path.name} is missing"}
    except OSError as exc:
        return {"text": None, "error": f"{path.name}: {exc.strerror}"}
    return {"text": data.decode("utf-8", "replace"), "truncated": size > MAX_OUTPUT,
            "size": size}  # fmt: skip


def files(roots: Roots, folder: Path) -> tuple[list[dict[str, Any]], bool]:
    """The trial's files (not following symlinks out), and whether the list was cut."""
    listed: list[dict[str, Any]] = []
    for parent, dirs, names in os.walk(folder):
        dirs.sort()
        for name in sorted(names):
            path = Path(parent) / name
            real = Path(os.path.realpath(path))
            if not real.is_file() or not real.is_relative_to(folder):
                continue
            if len(listed) >= MAX_FILES:
                return listed, True
            listed.append({"path": path.relative_to(folder).as_posix(),
                           "size": real.stat().st_size, "key": roots.key(real)})  # fmt: skip
    return listed, False


def describe(roots: Roots, folder: Path) -> dict[str, Any]:
    result, result_error = read_json(folder / "result.json")
    config, config_error = read_json(folder / "config.json")
    listed, cut = files(roots, folder)
    trajectory = folder / TRAJECTORY
    return {
        "key": roots.key(folder),
        "result": result,
        "result_error": result_error,
        "config": config,
        "config_error": config_error,
        "stdout": _tail(folder / "verifier" / "test-stdout.txt"),
        "stderr": _tail(folder / "verifier" / "test-stderr.txt"),
        "files": listed,
        "files_cut": cut,
        "trajectory": roots.key(trajectory) if trajectory.is_file() else None,
    }
