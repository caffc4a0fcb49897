"""Run folders: telling one apart, and finding those under a folder.

Every door writes a `run.json` (its `kind` names the door): a batch's, a run's and a
toolcalls report's at the top of the run folder, with `results.jsonl` beside it; a
generate run's in its `.helios/` store, beside the dataset files a person reads. The
viewer and `helios compare` both find runs here; each reads what it needs of them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from helios.datagen.folder import STORE_DIR
from helios.engine.store import RUN_FILE

#: how deep under a given folder runs are looked for (`results/model-a/batch_…` is 2)
MAX_DEPTH = 5
#: a run's JSON file (run.json, a summary) past this size is not parsed: a hostile or
#: damaged file (a 100,000-trial batch_summary.json is about 50 MB)
MAX_JSON_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class RunFolder:
    """A run: `folder` is what a person names and sees, `store` holds run.json and the
    records (the folder itself, or a generate run's `.helios/`)."""

    folder: Path
    store: Path

    @property
    def is_generate_store(self) -> bool:
        """A `helios generate` run's folder (its records live in its store)."""
        return self.store != self.folder


def run_folder(path: Path) -> RunFolder | None:
    """The run at `path`, or None: a folder with `run.json`, a generate run's folder,
    or a generate run's `.helios/` store named itself (the run is its parent)."""
    if (path / RUN_FILE).is_file():
        if path.name == STORE_DIR:
            return RunFolder(path.parent, path)
        return RunFolder(path, path)
    if (path / STORE_DIR / RUN_FILE).is_file():
        return RunFolder(path, path / STORE_DIR)
    return None


def find_runs(
    path: Path, max_depth: int = MAX_DEPTH, max_folders: int | None = None
) -> list[RunFolder]:
    """The run at `path`, or the runs under it (a folder of runs: `helios batch -o
    results/model-a/` … makes `results/`), sorted by path. A run's own subfolders are
    not searched; neither are links, nor folders whose name starts with `_` or `.`
    (a batch's `_incomplete/`, a checkout's `.git/`), nor anything deeper than
    `max_depth` below `path`, nor more than `max_folders` folders in all."""
    return FolderWalk(max_folders).runs(path, max_depth)


class FolderWalk:
    """One search for runs, over one or more folders, that looks at `max_folders`
    folders at most (None: no bound); `truncated` says it stopped there."""

    def __init__(self, max_folders: int | None = None) -> None:
        self.left = max_folders
        self.truncated = False

    def runs(self, path: Path, max_depth: int = MAX_DEPTH) -> list[RunFolder]:
        found: list[RunFolder] = []
        self._walk(path, 0, max_depth, found)
        return sorted(found, key=lambda run: run.folder)

    def _walk(self, folder: Path, depth: int, max_depth: int, found: list[RunFolder]) -> None:
        if self.left is not None:
            if self.left <= 0:
                self.truncated = True
                return
            self.left -= 1
        _walk(folder, depth, max_depth, found, self)


def _walk(
    folder: Path, depth: int, max_depth: int, found: list[RunFolder], walk: FolderWalk
) -> None:
    run = run_folder(folder)
    if run is not None:
        found.append(run)
        return
    if depth >= max_depth:
        return
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(("_", ".")):
            continue
        try:
            if not entry.is_dir(follow_symlinks=False):
                continue
        except OSError:
            continue
        walk._walk(Path(entry.path), depth + 1, max_depth, found)
