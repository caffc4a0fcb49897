"""Host-side checks on everything that comes out of a sandbox.

Whatever a sandbox hands back (a folder the local provider's transfer step
filled, or the tar stream of its shell or of the daemon) was made by code the
agent may have controlled. So, on the host:
- no symlink is followed, and none is recreated: links, hard links, devices,
  fifos, sockets and sparse members are skipped;
- no path leaves the destination (no absolute names, no `..`);
- the total size and the number of entries are bounded, and so is every archive
  header: tarfile reads a GNU long name or a pax record whole, whatever size its
  header claims, so a header past `MAX_HEADER_BYTES` refuses the download before
  it is read;
- all of that is checked as the archive streams in (`HeaderScan`, in `Spool`),
  before it is kept: a header of 900 MiB, a member that says it holds 2 TB, or
  bytes past the archive's end refuse the download at once, whatever tools the
  sandbox ran (a root agent may replace its `find`, `awk` or `tar`).

A broken bound refuses the whole download (`UnsafeDownload`): what the sandbox
handed back is refused, and the caller records that against the sandbox (a
manifest entry, a scoring failure), never as the host's failure.

An entry the host cannot hold is skipped and listed, and the rest goes on: a
path longer than the host allows, more than `MAX_DEPTH` folders deep (Python's
tree walkers recurse per level), a name the host's filesystem refuses, a file
where a folder is, a file the sandbox's user could not read. The agent controls
all of these, so none may fail the trial. Any other OSError (a full disk, an
I/O error) is the host's and propagates.

Files are written with modes 0644/0755: no setuid bit survives the trip.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO

from helios.errors import EnvironmentExecError

#: default bound of one download (a verifier's logs are usually kilobytes)
MAX_DOWNLOAD_BYTES = 1024 * 1024 * 1024
MAX_DOWNLOAD_ENTRIES = 100_000
#: the largest extended header (GNU long name or link, pax record) read; an
#: honest one holds a path (at most MAX_DEPTH names of 255 bytes) and a few fields
MAX_HEADER_BYTES = 64 * 1024
#: extended headers in a row before a member (GNU tar writes at most two)
MAX_HEADER_CHAIN = 8
#: folders below the destination; deeper entries are skipped
MAX_DEPTH = 128
#: skipped entries named in the list a download returns (the rest are counted)
MAX_LISTED = 100
_CHUNK = 1 << 20
#: errors that concern one entry of what the sandbox made, not the host: its name
#: (too long, refused by the host's filesystem), its place (a file where a folder
#: is) or its access (unreadable to the sandbox's user)
_ENTRY_ERRNOS = frozenset({
    errno.ENAMETOOLONG, errno.ELOOP, errno.EILSEQ, errno.EINVAL, errno.EEXIST,
    errno.ENOTDIR, errno.EISDIR, errno.EMLINK, errno.ENOENT, errno.EACCES, errno.EPERM,
})  # fmt: skip
_EXTENDED = frozenset({tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE,
                       tarfile.SOLARIS_XHDTYPE})  # fmt: skip
#: global pax headers pile up for the whole archive, sparse maps are read in full
#: from the data: neither is written by GNU tar (without -S) nor by the daemon
_REFUSED = {tarfile.XGLTYPE: "a global pax header", tarfile.GNUTYPE_SPARSE: "a sparse member"}


class UnsafeDownload(EnvironmentExecError):
    """What a sandbox handed back was refused: it broke a bound (size, entries, a
    header's size) or could not be read as an archive."""

    kind = "UnsafeDownload"


class DownloadMissing(EnvironmentExecError):
    """The path to download does not exist in the sandbox."""

    kind = "DownloadMissing"


def shown(name: str) -> str:
    """A name as text that any JSON writer takes: bytes that are not UTF-8 (kept
    as surrogates by the filesystem codec) become `\\xNN`."""
    try:
        raw = name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = name.encode("utf-8", "backslashreplace")
    return raw.decode("utf-8", "backslashreplace")


@dataclass(frozen=True, slots=True)
class Bounds:
    max_bytes: int = MAX_DOWNLOAD_BYTES
    max_entries: int = MAX_DOWNLOAD_ENTRIES

    @property
    def archive_limit(self) -> int:
        """The most an archive within these bounds can weigh: the tar format adds
        headers and padding to the files' own bytes."""
        return self.max_bytes + self.max_entries * 1024 + (1 << 20)


#: a download's archive is held in memory up to this size, then in an unnamed file
SPOOL_IN_MEMORY = 256 * 1024


def spool_file() -> IO[bytes]:
    """Where a download's archive is spooled: memory for a small one (a verifier's
    logs: no file made, and no thread hop to make or close it), a temporary file
    past SPOOL_IN_MEMORY."""
    return tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY)


class Spool:
    """A download's archive as it streams out, its headers checked as they arrive
    (`HeaderScan`), written to `file` and refused (before `extract_tar` sees it)
    once it is past what `bounds` allow."""

    def __init__(self, file: IO[bytes], bounds: Bounds, what: str) -> None:
        self.file, self.bounds, self.what = file, bounds, what
        self.size = 0
        self.scan = HeaderScan(bounds, what)

    def add(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > self.bounds.archive_limit:
            raise UnsafeDownload(
                f"{self.what}: larger than {self.bounds.max_bytes} bytes, download refused"
            )
        self.scan.feed(data)
        self.file.write(data)


#: bytes an archive may carry past its end (GNU tar pads to a 10 KiB record)
MAX_TRAILER = 64 * 1024
_BLOCK = tarfile.BLOCKSIZE
_PAX_RECORD = re.compile(rb"(\d+) ([^=]+)=")
#: the members whose data follows their header (as tarfile skips it): regular files,
#: extended headers, and the types tarfile does not know
_WITH_DATA = frozenset(tarfile.REGULAR_TYPES) | _EXTENDED | {tarfile.XGLTYPE}


def _blocks(size: int) -> int:
    return -(-size // _BLOCK) * _BLOCK


class HeaderScan:
    """A tar stream's headers, checked as its bytes arrive, as `extract_tar` reads
    them: an extended header past MAX_HEADER_BYTES or MAX_HEADER_CHAIN, a global pax
    header or a sparse member, more entries or more bytes of regular files than the
    bounds allow (from the sizes the headers claim, before their data comes), or
    more than MAX_TRAILER bytes after the archive's end, refuse the download at the
    header, not after the archive is spooled. Reading stops (the rest is only
    counted) where tarfile stops: at the end marker or a header that is not one."""

    def __init__(self, bounds: Bounds, what: str) -> None:
        self.bounds, self.what = bounds, what
        self.entries = 0
        self.bytes = 0
        self._header = bytearray()
        #: bytes of data (and padding) to pass before the next header
        self._skip = 0
        #: a pax header's data, collected while it passes; its bytes still to come
        self._pax: bytearray | None = None
        self._pax_left = 0
        #: the size the last pax header gave the next member
        self._size: int | None = None
        self._chain = 0
        self._after_end: int | None = None

    def _refuse(self, reason: str) -> UnsafeDownload:
        return UnsafeDownload(f"{self.what}: {reason}, download refused")

    def feed(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            if self._after_end is not None:
                self._after_end += len(view)
                if self._after_end > MAX_TRAILER:
                    raise self._refuse(f"more than {MAX_TRAILER} bytes after the archive's end")
                return
            if self._skip:
                n = min(self._skip, len(view))
                if self._pax is not None and self._pax_left:
                    kept = min(self._pax_left, n)
                    self._pax += view[:kept]
                    self._pax_left -= kept
                    if not self._pax_left:
                        self._pax_read()
                self._skip -= n
                view = view[n:]
                continue
            need = _BLOCK - len(self._header)
            self._header += view[:need]
            view = view[need:]
            if len(self._header) == _BLOCK:
                block = bytes(self._header)
                self._header.clear()
                self._member(block)

    def _member(self, block: bytes) -> None:
        try:
            info = tarfile.TarInfo.frombuf(block, "utf-8", "surrogateescape")
        except tarfile.HeaderError:
            # the end marker (a zero block), or a header that is not one: tarfile ends
            # the archive there (or refuses it whole, at the first header)
            self._after_end = 0
            return
        kind, size = info.type, info.size
        refused = _REFUSED.get(kind)
        if refused is not None:
            raise self._refuse(f"the archive holds {refused}")
        if kind in _EXTENDED:
            self._chain += 1
            if size > MAX_HEADER_BYTES:
                raise self._refuse(f"an archive header of {size} bytes, over the "
                                   f"{MAX_HEADER_BYTES}-byte limit")  # fmt: skip
            if self._chain > MAX_HEADER_CHAIN:
                raise self._refuse(f"more than {MAX_HEADER_CHAIN} archive headers in a row")
            if kind in (tarfile.XHDTYPE, tarfile.SOLARIS_XHDTYPE):
                self._pax, self._pax_left = bytearray(), size
                if not size:
                    self._pax_read()
            self._skip = _blocks(size)
            return
        self._chain = 0
        if self._size is not None:
            size, self._size = self._size, None
        self.entries += 1
        if self.entries > self.bounds.max_entries:
            raise self._refuse(f"more than {self.bounds.max_entries} entries")
        if kind in tarfile.REGULAR_TYPES:
            self.bytes += size
            if self.bytes > self.bounds.max_bytes:
                raise self._refuse(f"larger than {self.bounds.max_bytes} bytes")
        if kind in _WITH_DATA or kind not in tarfile.SUPPORTED_TYPES:
            self._skip = _blocks(size)

    def _pax_read(self) -> None:
        """The records of the pax header just read: the next member's size, if it
        gives one (a GNU sparse map is refused, as tarfile's reading refuses it)."""
        data, self._pax = bytes(self._pax or b""), None
        position = 0
        while position < len(data):
            match = _PAX_RECORD.match(data, position)
            if match is None or int(match.group(1)) < 1:
                break
            length = int(match.group(1))
            key, value = match.group(2), data[match.end() : position + length - 1]
            if key.startswith(b"GNU.sparse."):
                raise self._refuse("the archive holds a sparse member")
            if key == b"size" and value.isdigit():
                self._size = int(value)
            position += length


@dataclass
class _Budget:
    bounds: Bounds
    what: str
    size: int = 0
    entries: int = 0
    #: relative paths that were not copied (links, devices, bad names), shown
    skipped: list[str] = field(default_factory=list)
    #: how many more were skipped than are listed
    unlisted: int = 0
    #: the name (with its slash) of the last folder skipped: what an archive holds
    #: under it is skipped with it, counted but not listed one by one
    skipped_folder: str | None = None

    def entry(self) -> None:
        self.entries += 1
        if self.entries > self.bounds.max_entries:
            raise UnsafeDownload(
                f"{self.what}: more than {self.bounds.max_entries} entries, download refused"
            )

    def check(self, n: int) -> None:
        """Refuse now a file that cannot fit, before a byte of it is written."""
        if self.size + n > self.bounds.max_bytes:
            raise UnsafeDownload(
                f"{self.what}: larger than {self.bounds.max_bytes} bytes, download refused"
            )

    def add(self, n: int) -> None:
        self.check(n)
        self.size += n

    def skip(self, name: str | PurePosixPath, *, folder: bool = False) -> None:
        if len(self.skipped) < MAX_LISTED:
            self.skipped.append(shown(str(name))[:1000])
        else:
            self.unlisted += 1
        if folder:
            self.skipped_folder = f"{str(name).rstrip('/')}/"

    def under_skipped(self, name: str) -> bool:
        """Whether `name` lies in the folder last skipped (then it is counted)."""
        if self.skipped_folder is None or not name.startswith(self.skipped_folder):
            return False
        self.unlisted += 1
        return True

    def listed(self) -> list[str]:
        more = [f"... and {self.unlisted} more"] if self.unlisted else []
        return [*self.skipped, *more]

    def entry_failed(self, exc: OSError, name: str | PurePosixPath, *,
                     folder: bool = False) -> None:  # fmt: skip
        """Skip an entry the host cannot hold; any other error is the host's."""
        if exc.errno not in _ENTRY_ERRNOS:
            raise exc
        self.skip(name, folder=folder)


def copy_out(src: Path, dst: Path, *, what: str, bounds: Bounds | None = None) -> list[str]:
    """Copy a host folder or file that a sandbox filled to `dst`; returns what was
    skipped. Iterative: a tree as deep as the sandbox made it costs no recursion."""
    budget = _Budget(bounds or Bounds(), what)
    info = os.lstat(src)
    if stat.S_ISDIR(info.st_mode):
        _make_dir(dst)
        _copy_tree(src, dst, budget)
    elif stat.S_ISREG(info.st_mode):
        budget.entry()
        try:
            _make_dir(dst.parent)
            _copy_file(src, dst, budget, PurePosixPath(src.name))
        except OSError as exc:
            budget.entry_failed(exc, src.name)
    else:
        budget.skip(".")
    return budget.listed()


def _copy_tree(src: Path, dst: Path, budget: _Budget) -> None:
    pending = [(src, dst, PurePosixPath())]
    while pending:
        folder, target, rel = pending.pop()
        try:
            with os.scandir(folder) as entries:
                children = list(entries)
        except OSError as exc:  # unreadable to the sandbox's user, or too long a path
            budget.entry_failed(exc, rel)
            continue
        for child in children:
            budget.entry()
            name = rel / child.name
            try:
                if child.is_dir(follow_symlinks=False) and len(name.parts) <= MAX_DEPTH:
                    _make_dir(target / child.name)
                    pending.append((Path(child.path), target / child.name, name))
                elif child.is_file(follow_symlinks=False) and len(name.parts) <= MAX_DEPTH:
                    _copy_file(Path(child.path), target / child.name, budget, name)
                else:
                    budget.skip(name)
            except OSError as exc:
                budget.entry_failed(exc, name)


def _copy_file(src: Path, dst: Path, budget: _Budget, name: PurePosixPath) -> None:
    fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as reader:
        info = os.fstat(reader.fileno())
        if not stat.S_ISREG(info.st_mode):
            budget.skip(name)
            return
        budget.check(info.st_size)
        _write_stream(reader, dst, budget)


def _write_stream(reader: IO[bytes], dst: Path, budget: _Budget) -> None:
    """Write `dst` as a new regular file; a link or folder already there is not followed."""
    if dst.is_symlink():
        raise UnsafeDownload(f"{budget.what}: {shown(dst.name)} would replace a link")
    if dst.is_dir():
        raise IsADirectoryError(errno.EISDIR, "a folder of that name is there", str(dst))
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
    with os.fdopen(os.open(dst, flags, 0o644), "wb") as writer:
        while chunk := reader.read(_CHUNK):
            budget.add(len(chunk))
            writer.write(chunk)


def _make_dir(path: Path) -> None:
    if path.is_symlink():
        # Helios never makes one: something other than the sandbox put it there.
        raise UnsafeDownload(f"{shown(str(path))} is a link: download refused")
    path.mkdir(mode=0o755, parents=True, exist_ok=True)


class _HeaderRefused(Exception):
    """An archive header past its bound (raised inside tarfile, which lets it through)."""


class _BoundedMember(tarfile.TarInfo):
    """A member header that refuses what tarfile would read whole, unbounded: an
    extended header's claimed size is checked before its data is read."""

    def _proc_member(self, owner: tarfile.TarFile) -> tarfile.TarInfo:
        assert isinstance(owner, _BoundedTar)
        refused = _REFUSED.get(self.type)
        if refused is not None:
            raise _HeaderRefused(f"the archive holds {refused}")
        if self.type in _EXTENDED:
            owner.chain += 1
            if self.size > MAX_HEADER_BYTES:
                raise _HeaderRefused(f"an archive header of {self.size} bytes, over the "
                                     f"{MAX_HEADER_BYTES}-byte limit")  # fmt: skip
            if owner.chain > MAX_HEADER_CHAIN:
                raise _HeaderRefused(f"more than {MAX_HEADER_CHAIN} archive headers in a row")
        else:
            owner.chain = 0
        member: tarfile.TarInfo = super()._proc_member(owner)  # type: ignore[misc]
        return member

    def _proc_gnusparse_10(self, next: tarfile.TarInfo, pax_headers: dict[str, str],
                           owner: tarfile.TarFile) -> None:  # fmt: skip
        raise _HeaderRefused("the archive holds a sparse member")


class _BoundedTar(tarfile.TarFile):
    tarinfo = _BoundedMember
    #: extended headers read in a row so far
    chain = 0


def extract_tar(
    archive: IO[bytes], dst: Path, *, what: str, bounds: Bounds | None = None
) -> list[str]:
    """Extract a `tar -c NAME` archive into `dst`, dropping its top-level name:
    a single file becomes `dst` itself; a folder's contents land inside `dst`.
    Returns what was skipped. An archive that cannot be read, or breaks a bound,
    raises `UnsafeDownload`, never a partial success."""
    budget = _Budget(bounds or Bounds(), what)
    try:
        with _BoundedTar.open(fileobj=archive, mode="r|") as tar:
            _extract_members(tar, dst, budget)
    except _HeaderRefused as exc:
        raise UnsafeDownload(f"{what}: {exc}, download refused") from None
    except (tarfile.TarError, ValueError, EOFError) as exc:
        # ValueError: a header tarfile cannot decode (a pax charset that is not UTF-8)
        raise UnsafeDownload(f"{what}: unreadable archive ({shown(str(exc))[:200]})") from None
    return budget.listed()


def _extract_members(tar: tarfile.TarFile, dst: Path, budget: _Budget) -> None:
    top: str | None = None
    for member in tar:
        budget.entry()
        parts = PurePosixPath(member.name).parts
        if top is None:
            top = parts[0] if parts else ""
            if member.isfile() and len(parts) == 1:
                _extract_entry(tar, member, dst, budget)
                return
            _make_dir(dst)
        if parts == (top,):
            continue  # the folder itself: its contents land in dst
        _extract_entry(tar, member, dst, budget, _relative(parts, top))


def _extract_entry(tar: tarfile.TarFile, member: tarfile.TarInfo, dst: Path, budget: _Budget,
                   relative: PurePosixPath | None = PurePosixPath()) -> None:  # fmt: skip
    """One member at its place under `dst` (`relative` to it; `dst` itself by
    default), or skipped and listed."""
    if budget.under_skipped(member.name):
        return
    if relative is None or len(relative.parts) > MAX_DEPTH or member.sparse is not None:
        budget.skip(member.name, folder=member.isdir())
        return
    target = dst.joinpath(*relative.parts)
    try:
        if member.isdir():
            _make_dir(target)
        elif member.isfile():
            budget.check(member.size)
            _make_dir(target.parent)
            _extract_file(tar, member, target, budget)
        else:
            budget.skip(member.name)
    except OSError as exc:
        budget.entry_failed(exc, member.name, folder=member.isdir())


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
        budget.skip(member.name)
        return
    with source:
        _write_stream(source, target, budget)
