"""Uploads and downloads through a sandbox's persistent shell: a tar archive on the
command's stdin or stdout, instead of a one-shot bwrap with a transfer folder
bound in (local) or a request to the daemon (docker).

The archive is packed or unpacked *inside* the sandbox by `tar` (local: the
host's, read-only there; docker: the image's GNU tar), so paths resolve in the
sandbox's own view, as the one-shot `cp` does. What comes out is checked on the
host by `extract_tar`: no link followed or recreated, nothing outside the
destination, bounded in size and entries. Larger uploads, or a sandbox without
a shell, take the provider's other path.

A download is measured in the sandbox before anything is archived
(`size_check`): a tree past the host's bounds (a `truncate -s 2T` file) is
refused at once instead of streamed up to the bound. The host's own bounds hold
whatever the sandbox's tools say; when it refuses mid-stream, the shell stops
the command at once (`SandboxShell`).
"""

from __future__ import annotations

import asyncio
import posixpath
import shlex
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

import helios.environments.shell.tar as _tar
from helios.environments.base import Environment, ExecResult
from helios.environments.local.bwrap import tool
from helios.environments.shell.client import Sink
from helios.environments.shell.payload import place_payload
from helios.environments.shell.safe_copy import (
    MAX_LISTED,
    Bounds,
    DownloadMissing,
    Spool,
    UnsafeDownload,
    extract_tar,
)
from helios.errors import EnvironmentExecError

#: uploads up to this size go through the shell (they are held in memory once)
SHELL_UPLOAD_MAX = 64 * 1024 * 1024
#: exit codes of a download's script: its source does not exist; it is past the
#: bound of bytes; of entries
MISSING = 3
TOO_LARGE = 4
TOO_MANY = 5
#: tar's exit codes when it wrote its archive to the end: 1 and 2 say that some
#: files were left out (one the sandbox's user cannot read), which `complaints`
#: lists; an archive cut short is refused when it is read
TAR_DONE = (0, 1, 2)


def usable() -> bool:
    return tool("tar") is not None


def upload_script(dst: str, is_dir: bool) -> str:
    """Unpack the archive (its one member `payload`) and copy it to `dst` as the
    one-shot path does: a folder's contents into `dst`, a file as `dst`."""
    copy = place_payload('"$t"', dst, is_dir=is_dir)
    return (
        "t=$(mktemp -d /tmp/.helios-upload-XXXXXXXX) || exit 1\n"
        f'tar -x -f - --no-same-owner -C "$t" && {copy}\n'
        'code=$?; rm -rf -- "$t"; exit $code'
    )


def prepared_upload_script(prepare: str, dst: str) -> str:
    """`prepare`, then the archive unpacked straight into `dst`, which `prepare` left
    an empty folder nothing else can reach: no staging folder and no copy (five
    processes fewer than `upload_script`). The result is `prepare`'s when it fails."""
    return (
        f"{prepare}\n"
        "code=$?; [ $code = 0 ] || exit $code\n"
        f"exec tar -x -f - --no-same-owner --strip-components=1 -C {shlex.quote(dst)}"
    )


def download_script(src: str) -> str | None:
    """Archive `src` (a link as a link) on stdout once `size_check` passed; None for
    a path it cannot name."""
    parent, name = posixpath.split(posixpath.normpath(src))
    if not name or name in (".", ".."):
        return None
    quoted = shlex.quote(name)
    return (
        f"cd -- {shlex.quote(parent or '/')} || exit {MISSING}\n"
        f"[ -e {quoted} ] || [ -L {quoted} ] || exit {MISSING}\n"
        f"{size_check('./' + name, Bounds())}\n"
        f"exec tar -c -f - -- {quoted}"
    )


def size_check(path: str, bounds: Bounds) -> str:
    """A script that exits TOO_LARGE or TOO_MANY when the tree at `path` (absolute,
    or starting with ./) is past `bounds` as the host counts them (the bytes of its
    regular files, its entries); it stops reading at the first excess. Without
    GNU find or awk it passes: the host's bounds still hold."""
    count = (
        '\'{n++; if ($1 == "f") s += $2; if (n > e || s > b) exit} '
        f"END {{exit (n > e ? {TOO_MANY} : (s > b ? {TOO_LARGE} : 0))}}'"
    )
    return (
        "if command -v find >/dev/null 2>&1 && command -v awk >/dev/null 2>&1; then\n"
        f"  find {shlex.quote(path)} -printf '%y %s\\n' 2>/dev/null"
        f" | awk -v b={bounds.max_bytes} -v e={bounds.max_entries} {count}\n"
        f"  code=$?; case $code in {TOO_LARGE}|{TOO_MANY}) exit $code;; esac\n"
        "fi"
    )


def refuse(code: int, src: str, bounds: Bounds) -> None:
    """Raise for a download script's exit code that says it is missing or too big."""
    if code == MISSING:
        raise DownloadMissing(f"{src} does not exist in the sandbox")
    if code == TOO_LARGE:
        raise UnsafeDownload(
            f"download of {src}: larger than {bounds.max_bytes} bytes, download refused"
        )
    if code == TOO_MANY:
        raise UnsafeDownload(
            f"download of {src}: more than {bounds.max_entries} entries, download refused"
        )


def complaints(stderr: str, tool: str) -> list[str]:
    """What the sandbox's `tool` (tar, cp) said it left out: skipped entries."""
    prefix = f"{tool}: "
    lines = [ln[len(prefix) :] for ln in stderr.splitlines() if ln.startswith(prefix)]
    return [ln[:1000] for ln in lines if not ln.startswith("Exiting with failure")][:MAX_LISTED]


class ShellTransfers(Environment):
    """An environment whose uploads and downloads may go through its shell. A
    subclass says when (`_transfers_in_shell`) and runs a command there as root
    (`_shell_command`); each method answers False or None when it did not."""

    @property
    def _transfers_in_shell(self) -> bool:
        return False

    async def _shell_command(
        self, command: str, *, data: bytes = b"", sink: Sink | None = None
    ) -> ExecResult | None:
        """A transfer's command as root from /, or None (no shell now)."""
        return None

    async def _upload_in_shell(self, src: Path, dst: str) -> bool:
        if not self._transfers_in_shell:
            return False
        packed = await asyncio.to_thread(_shell_archive, src)
        if packed is None:
            return False
        archive, is_dir = packed
        result = await self._shell_command(upload_script(dst, is_dir), data=archive)
        if result is None:
            return False
        if not result.ok:
            raise EnvironmentExecError(f"upload to {dst} failed: {result.stderr.strip()[:200]}")
        return True

    async def _prepare_and_upload_in_shell(
        self, prepare: str, uploads: Sequence[tuple[Path, str]]
    ) -> ExecResult | None:
        """The first upload in the same command as `prepare` (the verifier's reset and
        its tests: one command, not two, and no staging copy); None if not done."""
        first = uploads[0] if uploads else None
        if first is None or not self._transfers_in_shell:
            return None
        packed = await asyncio.to_thread(_shell_archive, first[0])
        if packed is None or not packed[1]:  # too large, or not a folder
            return None
        script = prepared_upload_script(prepare, first[1])
        result = await self._shell_command(script, data=packed[0])
        if result is None or not result.ok:
            return None  # the two steps apart then say which failed
        for src, dst in uploads[1:]:
            await self.upload(src, dst)
        return result

    async def _download_in_shell(self, src: str, dst: Path) -> list[str] | None:
        """What was skipped, or None when the shell did not do it."""
        script = download_script(src)
        if script is None or not self._transfers_in_shell:
            return None
        what = f"download of {src}"
        bounds = Bounds()
        spool = await asyncio.to_thread(tempfile.TemporaryFile)
        try:
            result = await self._shell_command(script, sink=Spool(spool, bounds, what))
            if result is None:
                return None
            refuse(result.exit_code, src, bounds)
            if result.timed_out or result.exit_code not in TAR_DONE:
                # The sandbox's own tar (on docker, the agent's if it is root) failed:
                # what it handed back is refused, as an unreadable archive is.
                reason = "timed out" if result.timed_out else result.stderr.strip()[:200]
                raise UnsafeDownload(f"{what}: the sandbox could not archive it ({reason})")
            skipped = await asyncio.to_thread(_extract_spool, spool, dst, what, bounds)
        finally:
            await asyncio.to_thread(spool.close)
        return [*complaints(result.stderr, "tar"), *skipped]


def _extract_spool(spool: BinaryIO, dst: Path, what: str, bounds: Bounds) -> list[str]:
    """A download's archive, spooled whole, checked and unpacked at `dst` (one thread hop)."""
    spool.seek(0)
    return extract_tar(spool, dst, what=what, bounds=bounds)


def _shell_archive(src: Path) -> tuple[bytes, bool] | None:
    """An upload's archive for the shell (its one member `payload`) and whether it is
    a folder; None when it is too large to hold in memory (the other path then)."""
    archive = _tar.pack(src, "payload")
    if len(archive) > SHELL_UPLOAD_MAX:
        return None
    return archive, src.is_dir()
