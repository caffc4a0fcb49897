"""Whole files or none: a file is written under a temporary name in its own folder
(`os.replace` is atomic only within one filesystem), flushed to disk and renamed
over its target, so a reader, or a resume after kill -9, finds the old file or the
new one, never a part of it."""

from __future__ import annotations

import os
import tempfile
from contextlib import suppress
from pathlib import Path


def write_bytes_atomic(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())  # what names the file (a trajectory) is durable too
        # mkstemp creates 0600; outputs are read by other users (host vs sandbox)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_text_atomic(path: Path, text: str, *, mode: int = 0o644) -> None:
    write_bytes_atomic(path, text.encode("utf-8"), mode=mode)
