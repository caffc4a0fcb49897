"""A task folder's tree, walked once with `os.scandir`: the entries the links check
reads (`task_checks`) and the files the content hashes read (`tree_checksum`).

The content hash is what it always was (a trial's identity depends on it): over
every file below the folder, in the order of their path's parts, its path relative
to the folder, whether it is executable, and its bytes. A link to a file counts as
that file; a link to a folder is not entered; nor is what cannot be listed.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: files up to this size are read in one call; larger ones in chunks of it
_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class Entry:
    """One name below the folder."""

    #: the path's parts relative to the folder
    parts: tuple[str, ...]
    path: str
    is_link: bool
    #: a file, or a link to one
    is_file: bool


def walk(root: str | Path) -> list[Entry]:
    """Every entry below `root`, in `os.walk`'s top-down order (each folder's
    subfolders, then its other entries, then each subfolder's own); folders that
    are links are listed, not entered."""
    found: list[Entry] = []
    _walk(os.fspath(root), (), found)
    return found


def _walk(folder: str, parts: tuple[str, ...], found: list[Entry]) -> None:
    try:
        with os.scandir(folder) as listing:
            entries = list(listing)
    except OSError:
        return
    dirs: list[os.DirEntry[str]] = []
    others: list[os.DirEntry[str]] = []
    for entry in entries:
        (dirs if _is_dir(entry) else others).append(entry)
    for entry in dirs:
        found.append(Entry((*parts, entry.name), entry.path, entry.is_symlink(), False))
    for entry in others:
        found.append(Entry((*parts, entry.name), entry.path, entry.is_symlink(), _is_file(entry)))
    for entry in dirs:
        if not entry.is_symlink():
            _walk(entry.path, (*parts, entry.name), found)


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def hash_file(path: str, targets: list[tuple[Any, str]]) -> None:
    """Feed one file into each (digest, its path relative to that digest's folder):
    the path, whether it is executable, its bytes; the file is read once."""
    for digest, relative in targets:
        digest.update(relative.encode() + b"\0")
    with open(path, "rb", buffering=0) as handle:
        info = os.fstat(handle.fileno())
        mode = b"x" if info.st_mode & 0o111 else b"-"
        for digest, _ in targets:
            digest.update(mode)
        if stat.S_ISREG(info.st_mode) and info.st_size < _CHUNK:
            data = handle.readall()
            for digest, _ in targets:
                digest.update(data)
        else:
            for chunk in iter(lambda: handle.read(_CHUNK), b""):
                for digest, _ in targets:
                    digest.update(chunk)
    for digest, _ in targets:
        digest.update(b"\0")


def _files(entries: Iterable[Entry]) -> list[Entry]:
    """The files, in the order of their path's parts (the order the hash is over)."""
    return sorted((e for e in entries if e.is_file), key=lambda e: e.parts)


def tree_checksum(root: Path) -> str:
    """Content hash of a directory: relative paths, modes and bytes, in sorted order."""
    digest = hashlib.sha256()
    for entry in _files(walk(root)):
        hash_file(entry.path, [(digest, "/".join(entry.parts))])
    return digest.hexdigest()


def tree_digests(root: Path, subfolders: Iterable[str]) -> tuple[str, dict[str, str]]:
    """The hash of `root` and of each of `subfolders` (relative, "/"-separated) that is
    a folder, each as `tree_checksum` gives it, from one walk with each file read once.
    A subfolder that is a link (the walk does not enter it) is hashed apart."""
    entries = walk(root)
    wanted = {tuple(name.split("/")): name for name in subfolders}
    plain = {e.parts for e in entries if e.parts in wanted and not e.is_link}
    total = hashlib.sha256()
    subs = {parts: hashlib.sha256() for parts in plain}
    for entry in _files(entries):
        parts = entry.parts
        targets: list[tuple[Any, str]] = [(total, "/".join(parts))]
        for end in range(1, len(parts)):
            if parts[:end] in subs:
                targets.append((subs[parts[:end]], "/".join(parts[end:])))
        hash_file(entry.path, targets)
    found = {wanted[parts]: digest.hexdigest() for parts, digest in subs.items()}
    for parts, name in wanted.items():
        if parts not in plain and os.path.isdir(os.path.join(root, *parts)):
            found[name] = tree_checksum(Path(root, *parts))
    return total.hexdigest(), found
