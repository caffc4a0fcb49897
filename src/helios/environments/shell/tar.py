"""Tar helper for moving files into sandboxes (run in a thread); what comes out goes
through `shell.safe_copy.extract_tar`.

A batch uploads the same folders (a task's tests) once per trial, so small
archives are kept, keyed by the folder's metadata: every entry's inode, size,
mode, owner and change time. The change time moves on any write, rename or
`chmod` and cannot be set back by a user, so a changed folder is packed again
(an edit in the same clock tick as a pack may go out a trial late)."""

from __future__ import annotations

import io
import os
import stat
import tarfile
import threading
from collections import OrderedDict
from pathlib import Path

#: archives up to this size are kept, at most CACHE_ENTRIES of them
CACHE_MAX_BYTES = 1 << 20
CACHE_ENTRIES = 16

Signature = tuple[tuple[object, ...], ...]

_cache: OrderedDict[tuple[str, str, Signature], bytes] = OrderedDict()
_lock = threading.Lock()


def pack(src: Path, arcname: str) -> bytes:
    """A tar of `src` stored under the name `arcname` (a directory with its contents)."""
    signature = _signature(src)
    key = (os.path.abspath(src), arcname, signature) if signature is not None else None
    if key is not None:
        with _lock:
            found = _cache.get(key)
            if found is not None:
                _cache.move_to_end(key)
                return found
    archive = _pack(src, arcname)
    if key is not None and len(archive) <= CACHE_MAX_BYTES and _signature(src) == signature:
        with _lock:
            _cache[key] = archive
            while len(_cache) > CACHE_ENTRIES:
                _cache.popitem(last=False)
    return archive


def _pack(src: Path, arcname: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        archive.add(str(src), arcname=arcname, recursive=True)
    return buffer.getvalue()


def _signature(src: Path, limit: int = 256) -> Signature | None:
    """What the archive of `src` is made of, short of the bytes; None when `src`
    is missing or has more than `limit` entries (such a folder is not kept)."""
    entries: list[tuple[object, ...]] = []
    try:
        pending = [""]
        while pending:
            relative = pending.pop()
            path = os.path.join(src, relative) if relative else os.fspath(src)
            st = os.lstat(path)
            entries.append((relative, st.st_ino, st.st_dev, st.st_mode, st.st_uid,
                            st.st_gid, st.st_size, st.st_mtime_ns, st.st_ctime_ns))  # fmt: skip
            if len(entries) > limit:
                return None
            if stat.S_ISDIR(st.st_mode):
                pending.extend(os.path.join(relative, name) for name in os.listdir(path))
    except OSError:
        return None
    return tuple(sorted(entries, key=lambda entry: str(entry[0])))
