"""Tar helper for moving files into docker sandboxes (run in a thread); what comes
out goes through `_safe_copy.extract_tar`."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path


def pack(src: Path, arcname: str) -> bytes:
    """A tar of `src` stored under the name `arcname` (a directory with its contents)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        archive.add(str(src), arcname=arcname, recursive=True)
    return buffer.getvalue()
