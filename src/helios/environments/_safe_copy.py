"""Host-side checks on everything that comes out of a sandbox.

Whatever a sandbox hands back (a folder the local provider's transfer step
filled, or the tar stream of `docker cp`) was made by code the agent may have
controlled. So, on the host:
- no symlink is followed, and none is recreated: links, hard links, devices,
  fifos and sockets are skipped;
- no path leaves the destination (no absolute names, no `..`);
- the total size and the number of entries are bounded.

Files are written with modes 0644/0755: no setuid bit survives the trip.
"""

from __future__ import annotations

import os
import stat
import tarfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, BinaryIO

from helios.errors import EnvironmentExecError

#: default bound of one download (a verifier's logs are usually kilobytes)
MAX_DOWNLOAD_BYTES = 1024 * 1024 * 1024
MAX_DOWNLOAD_ENTRIES = 100_000
_CHUNK = 1 << 20
#: a name used both as a file and as a folder, or a link where a folder must go
_CONFLICTS = (FileExistsError, NotADirectoryError, IsADirectoryError)


class UnsafeDownload(EnvironmentExecError):
    """A download broke a bound (size, entries) or could not be read."""

    kind = "UnsafeDownload"


@dataclass(frozen=True, slots=True)
class Bounds:
    max_bytes: int = MAX_DOWNLOAD_BYTES
    max_entries: int = MAX_DOWNLOAD_ENTRIES

    @property
    def archive_limit(self) -> int:
        """The most an archive within these bounds can weigh: the tar format adds
        headers and padding to the files' own bytes."""
        return self.max_bytes + self.max_entries * 1024 + (1 << 20)


class Spool:
    """A download's archive as it streams out, written to `file` and refused (before
    `extract_tar` sees it) once it is past what `bounds` allow."""

    def __init__(self, file: IO[bytes], bounds: Bounds, what: str) -> None:
        self.file, self.bounds, self.what = file, bounds, what
        self.size = 0

    def add(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > self.bounds.archive_limit:
            raise UnsafeDownload(
                f"{self.what}: larger than {self.bounds.max_bytes} bytes, download refused"
            )
        self.file.write(data)


@dataclass
class _Budget:
    bounds: Bounds
    what: str
    size: int = 0
    entries: int = 0
    #: relative paths that were not copied (links, devices, bad names)
    skipped: list[str] = field(default_factory=list)

    def entry(self) -> None:
        self.entries += 1
        if self.entries > self.bounds.max_entries:
            raise UnsafeDownload(
                f"{self.what}: more than {self.bounds.max_entries} entries, download refused"
            )

    def add(self, n: int) -> None:
        self.size += n
        if self.size > self.bounds.max_bytes:
            raise UnsafeDownload(
                f"{self.what}: larger than {self.bounds.max_bytes} bytes, download refused"
            )


def copy_out(src: Path, dst: Path, *, what: str, bounds: Bounds | None = None) -> list[str]:
    """Copy a host folder or file that a sandbox filled to `dst`; returns what was skipped."""
    budget = _Budget(bounds or Bounds(), what)
    info = os.lstat(src)
    try:
        if stat.S_ISDIR(info.st_mode):
            _make_dir(dst)
            _copy_dir(src, dst, budget, PurePosixPath())
        elif stat.S_ISREG(info.st_mode):
            _make_dir(dst.parent)
            budget.entry()
            _copy_file(src, dst, budget)
        else:
            budget.skipped.append(".")
    except _CONFLICTS as exc:
        raise UnsafeDownload(f"{what}: {exc.strerror}: {exc.filename}") from None
    return budget.skipped


def _copy_dir(src: Path, dst: Path, budget: _Budget, rel: PurePosixPath) -> None:
    with os.scandir(src) as entries:
        children = list(entries)
    for child in children:
        budget.entry()
        name = rel / child.name
        if child.is_dir(follow_symlinks=False):
            _make_dir(dst / child.name)
            _copy_dir(Path(child.path), dst / child.name, budget, name)
        elif child.is_file(follow_symlinks=False):
            _copy_file(Path(child.path), dst / child.name, budget)
        else:
            budget.skipped.append(str(name))


def _copy_file(src: Path, dst: Path, budget: _Budget) -> None:
    fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as reader:
        if not stat.S_ISREG(os.fstat(reader.fileno()).st_mode):
            budget.skipped.append(src.name)
            return
        _write_stream(reader, dst, budget)


def _write_stream(reader: IO[bytes], dst: Path, budget: _Budget) -> None:
    """Write `dst` as a new regular file; a link or folder already there is not followed."""
    if dst.is_symlink() or dst.is_dir():
        raise UnsafeDownload(f"{budget.what}: {dst.name} would replace a link or a folder")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
    with os.fdopen(os.open(dst, flags, 0o644), "wb") as writer:
        while chunk := reader.read(_CHUNK):
            budget.add(len(chunk))
            writer.write(chunk)


def _make_dir(path: Path) -> None:
    if path.is_symlink():
        raise UnsafeDownload(f"{path} is a link: download refused")
    path.mkdir(mode=0o755, parents=True, exist_ok=True)


def extract_tar(
    archive: BinaryIO, dst: Path, *, what: str, bounds: Bounds | None = None
) -> list[str]:
    """Extract a `docker cp SRC -` tar into `dst`, dropping its top-level name:
    a single file becomes `dst` itself; a folder's contents land inside `dst`.
    An archive that cannot be read raises `UnsafeDownload`, never a partial success."""
    budget = _Budget(bounds or Bounds(), what)
    try:
        with tarfile.open(fileobj=archive, mode="r|") as tar:
            _extract_members(tar, dst, budget)
    except tarfile.TarError as exc:
        raise UnsafeDownload(f"{what}: unreadable archive ({exc})") from None
    except _CONFLICTS as exc:
        raise UnsafeDownload(f"{what}: {exc.strerror}: {exc.filename}") from None
    return budget.skipped


def _extract_members(tar: tarfile.TarFile, dst: Path, budget: _Budget) -> None:
    top: str | None = None
    for member in tar:
        budget.entry()
        parts = PurePosixPath(member.name).parts
        if top is None:
            top = parts[0] if parts else ""
            if member.isfile() and len(parts) == 1:
                _make_dir(dst.parent)
                _extract_file(tar, member, dst, budget)
                return
            _make_dir(dst)
        if parts == (top,):
            continue  # the folder itself: its contents land in dst
        relative = _relative(parts, top)
        if relative is None:
            budget.skipped.append(member.name)
            continue
        target = dst.joinpath(*relative.parts)
        if member.isdir():
            _make_dir(target)
        elif member.isfile():
            _make_dir(target.parent)
            _extract_file(tar, member, target, budget)
        else:
            budget.skipped.append(member.name)


def _relative(parts: tuple[str, ...], top: str) -> PurePosixPath | None:
    """The member's path below the top-level name; None for the top itself or a bad name."""
    if len(parts) < 2 or parts[0] != top:
        return None
    rest = parts[1:]
    if any(part in ("", ".", "..") or "/" in part or "\0" in part for part in rest):
        return None
    return PurePosixPath(*rest)


def _extract_file(
    tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path, budget: _Budget
) -> None:
    source = tar.extractfile(member)
    if source is None:
        budget.skipped.append(member.name)
        return
    with source:
        _write_stream(source, target, budget)


