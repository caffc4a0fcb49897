"""The folders `helios view` may serve, and the one way a request names a file in them.

A request names a file as `<root number>/<relative path>`. It is served only when
its real path (symlinks resolved) lies under the real path of that root: `..`
segments, absolute paths, NUL bytes and symlinks that lead out are refused.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


class OutsideRoots(ValueError):
    """A requested path that is not a file or folder under the given folders."""


@dataclass(frozen=True)
class Roots:
    folders: tuple[Path, ...]

    @classmethod
    def of(cls, paths: list[Path]) -> Roots:
        """The given folders that exist, each by its real path, without repeats."""
        seen: list[Path] = []
        for path in paths:
            real = Path(os.path.realpath(path))
            if real.is_dir() and real not in seen:
                seen.append(real)
        return cls(tuple(seen))

    def key(self, path: Path) -> str:
        """The request name of `path` (a real path under one of the folders)."""
        real = Path(os.path.realpath(path))
        for number, root in enumerate(self.folders):
            if real == root:
                return str(number)
            if real.is_relative_to(root):
                return f"{number}/{real.relative_to(root).as_posix()}"
        raise OutsideRoots(f"{path} is not under the served folders")

    def resolve(self, key: str) -> Path:
        """The real path a request name stands for; OutsideRoots for anything else."""
        if not key or "\x00" in key or "\\" in key:
            raise OutsideRoots("not a path under the served folders")
        number, _, relative = key.partition("/")
        if not number.isdigit() or int(number) >= len(self.folders):
            raise OutsideRoots(f"no served folder numbered {number!r}")
        root = self.folders[int(number)]
        parts = [part for part in relative.split("/") if part not in ("", ".")]
        if relative.startswith("/") or ".." in parts:
            raise OutsideRoots("a path with '..' or a leading '/' is refused")
        real = Path(os.path.realpath(root.joinpath(*parts)))
        if real != root and not real.is_relative_to(root):
            raise OutsideRoots("the path leads outside the served folders")
        if not real.exists():
            raise FileNotFoundError(f"no such file: {relative or '.'}")
        return real

    def inside(self, base: Path, relative: str) -> Path:
        """`relative` (a path from a record or a trajectory) under `base`, which is
        itself under a root; OutsideRoots if it leads out of `base`."""
        parts = [part for part in relative.replace("\\", "/").split("/") if part not in ("", ".")]
        if relative.startswith("/") or ".." in parts or "\x00" in relative:
            raise OutsideRoots(f"{relative!r} is not a path inside the run")
        real = Path(os.path.realpath(base.joinpath(*parts)))
        if real != base and not real.is_relative_to(base):
            raise OutsideRoots(f"{relative!r} leads outside the run")
        return real
