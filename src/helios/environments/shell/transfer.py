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

`exec_then_download` runs a command and archives what it left (the verifier's
test.sh and /logs/verifier) in one command of the shell: one round trip and two
processes (the measuring `find | awk`) fewer; every host-side check holds.
"""

from __future__ import annotations

import asyncio
import posixpath
import re
import secrets
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import helios.environments.shell.tar as _tar
from helios._proc import CappedOutput, decode
from helios.environments.base import (
    Environment,
    ExecDownload,
    ExecResult,
    FileSteps,
    read_kinds,
)
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
    spool_file,
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
        f"exec {shlex.join(unpack_argv(dst))}"
    )


def unpack_argv(dst: str) -> list[str]:
    """`prepared_upload_script`'s tar, as the shell server's "steps" run it: no `sh`."""
    return ["tar", "-x", "-f", "-", "--no-same-owner", "--strip-components=1", "-C", dst]


def download_script(src: str, *, quiet: bool = False, measure: bool = True) -> str | None:
    """Archive `src` (a link as a link) on stdout once `size_check` passed; None for
    a path it cannot name. `quiet`: tar's complaints are dropped (its stderr is
    another command's). Without `measure`, no `size_check` (two processes fewer):
    the host's `HeaderScan` still refuses at its header a member, or a running
    total, past the bounds, and `Spool` the stream past them."""
    parent, name = posixpath.split(posixpath.normpath(src))
    if not name or name in (".", ".."):
        return None
    quoted = shlex.quote(name)
    check = f"{size_check('./' + name, Bounds())}\n" if measure else ""
    return (
        f"cd -- {shlex.quote(parent or '/')} || exit {MISSING}\n"
        f"[ -e {quoted} ] || [ -L {quoted} ] || exit {MISSING}\n"
        f"{check}"
        f"exec tar -c -f - -- {quoted}{' 2>/dev/null' if quiet else ''}"
    )


#: the exit status that follows a combined command's boundary: three digits
STATUS_DIGITS = 3
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def exec_then_download_script(command: str, cwd: str, src: str, names: Sequence[str]) -> str | None:
    """`command` from `cwd` (in a subshell, as it may `exec`; its stdin empty), then
    every other process the sandbox's shell can signal killed (`kill -9 -1`, a
    builtin: what the command left running can neither write into the archive nor
    change `src` while it is read, as when the shell's own kill ends a command), the
    command's variables (`names`) unset, the boundary (the first line of the
    script's stdin: never in its command line, which the command could read) and
    the command's status (STATUS_DIGITS digits) on stdout, then `download_script`'s
    archive. None when `src` or a name cannot be written in the script (the caller runs
    the two apart).

    Unlike a download on its own, the archive is not measured in the sandbox first
    (`size_check`'s find and awk were a sixth of the processes of every trial, whose
    verifier runs this): the host's bounds refuse a tree past them as it streams
    (`HeaderScan`, `Spool`), the command is stopped then, and the sandbox stays usable
    (tests/security/test_download_refusal.py)."""
    download = download_script(src, quiet=True, measure=False)
    if download is None or not all(_NAME.fullmatch(name) for name in names):
        return None
    if {"PATH", "helios_boundary"} & set(names):  # the archive's tools, the boundary
        return None
    where = shlex.quote(cwd)
    unset = f"unset {' '.join(names)}\n" if names else ""
    return (
        f"cd -- {where} 2>/dev/null || {{ mkdir -p -- {where} 2>/dev/null; cd -- {where}; }}"
        " || exit 125\n"
        "IFS= read -r helios_boundary || exit 125\n"
        f"(\nunset helios_boundary\n{command}\n) </dev/null\n"
        "code=$?\n"
        "kill -9 -1 2>/dev/null\n"
        f"{unset}"
        'printf \'%s%03d\' "$helios_boundary" "$code"\n'
        f"cd / || exit {MISSING}\n"
        f"{download}"
    )


class Split:
    """A combined command's stdout: the command's own output (capped, as an exec's),
    up to `boundary` and its status; everything after goes to `archive` (a `Spool`,
    which bounds and checks it). The boundary is a fresh random token, so output
    that merely resembles it never splits the stream; a command that dug it out of
    its shell's memory would only end its own output early, its bytes then refused
    by the archive's checks (or taken as its files, which it could write anyway)."""

    def __init__(self, boundary: bytes, archive: Sink) -> None:
        self.boundary, self.archive = boundary, archive
        self.output = CappedOutput()
        #: the command's exit status, once the boundary has come
        self.status: int | None = None
        self._held = b""

    def add(self, data: bytes) -> None:
        if self.status is not None:
            self.archive.add(data)
            return
        data = self._held + data
        found = data.find(self.boundary)
        end = found + len(self.boundary) + STATUS_DIGITS
        if found < 0 or len(data) < end:
            # keep what may be the start of the boundary (and its status) for later
            keep = len(data) - found if found >= 0 else len(self.boundary) + STATUS_DIGITS - 1
            keep = min(keep, len(data))
            self.output.add(data[: len(data) - keep])
            self._held = data[len(data) - keep :]
            return
        self.output.add(data[:found])
        digits = data[found + len(self.boundary) : end]
        self._held = b""
        self.status = int(digits) if digits.isdigit() else -1
        if end < len(data):
            self.archive.add(data[end:])

    def text(self) -> str:
        """The command's output (what was held back too, when no boundary came)."""
        if self.status is None and self._held:
            self.output.add(self._held)
            self._held = b""
        return decode(self.output.value())


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

    @property
    def _has_services(self) -> bool:
        """Services run (`start_service`): a command may not kill every process."""
        return False

    async def _shell_command(
        self, command: str, *, data: bytes = b"", sink: Sink | None = None,
        env: dict[str, str] | None = None, timeout: float | None = 120,
    ) -> ExecResult | None:  # fmt: skip
        """A transfer's command as root from /, with the sandbox's variables and
        `env`, or None (no shell now)."""
        return None

    async def _shell_steps(
        self, words: list[str], *, data: bytes = b"", timeout: float | None = 120
    ) -> ExecResult | None:
        """The shell server's "steps" as root (file work without a process, then the
        program the words may end with), or None (no shell now)."""
        return None

    async def path_kinds(self, paths: Sequence[str]) -> list[str]:
        if paths and self._transfers_in_shell:
            words = [word for path in paths for word in ("kind", path)]
            result = await self._shell_steps(words)
            if result is not None and result.ok:
                return read_kinds(result.stdout, len(paths))
        return await super().path_kinds(paths)

    async def exec_then_download(
        self, command: str, src: str, dst: Path, *, env: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> ExecDownload:  # fmt: skip
        done = await self._exec_then_download_in_shell(command, src, dst, env or {}, timeout)
        if done is not None:
            return done
        return await super().exec_then_download(command, src, dst, env=env, timeout=timeout)

    async def _exec_then_download_in_shell(
        self, command: str, src: str, dst: Path, env: dict[str, str], timeout: float | None
    ) -> ExecDownload | None:
        """Both in one command of the shell (one round trip and three processes
        fewer), when the sandbox's default user is root (the download's
        user) and no service runs (its `kill -9 -1` would end them); None when not
        done (nothing ran)."""
        if not self._transfers_in_shell or self._has_services:
            return None
        boundary = secrets.token_hex(16)
        script = exec_then_download_script(command, self.workdir, src, list(env))
        if script is None or await self.default_owner() is not None:
            return None
        what = f"download of {src}"
        bounds = Bounds()
        spool = spool_file()
        try:
            split = Split(boundary.encode(), Spool(spool, bounds, what))
            try:
                ran = await self._shell_command(script, data=f"{boundary}\n".encode(),
                                                sink=split, env=env, timeout=timeout)  # fmt: skip
            except UnsafeDownload as exc:  # refused as it streamed (its stderr is lost)
                return ExecDownload(ExecResult(split.text(), "", split.status or 0), refused=exc)
            if ran is None:
                return None
            if split.status is None:
                # The command did not end (timed out, or its shell died): as an exec's.
                result = ExecResult(split.text(), ran.stderr, ran.exit_code, ran.timed_out)
                if result.timed_out:
                    return ExecDownload(result)
                return await self._download_apart(result, src, dst)
            result = ExecResult(split.text(), ran.stderr, split.status)
            if ran.timed_out:  # the command ended in time, the archive did not: again apart
                return await self._download_apart(result, src, dst)
            try:
                refuse(ran.exit_code, src, bounds)
                if ran.exit_code not in TAR_DONE:
                    raise UnsafeDownload(
                        f"{what}: the sandbox could not archive it (exit {ran.exit_code})"
                    )
                skipped = await asyncio.to_thread(_extract_spool, spool, dst, what, bounds)
            except (DownloadMissing, UnsafeDownload) as exc:
                return ExecDownload(result, refused=exc)
        finally:
            spool.close()
        return ExecDownload(result, skipped)

    async def _download_apart(self, result: ExecResult, src: str, dst: Path) -> ExecDownload:
        try:
            return ExecDownload(result, await self.download(src, dst))
        except (DownloadMissing, UnsafeDownload) as exc:
            return ExecDownload(result, refused=exc)

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
        self, prepare: str | FileSteps, uploads: Sequence[tuple[Path, str]]
    ) -> ExecResult | None:
        """The first upload in the same command as `prepare` (the verifier's reset and
        its tests: one command, not two, and no staging copy; `FileSteps` without a
        process but the unpacking `tar`); None if not done."""
        if not self._transfers_in_shell:
            return None
        first = uploads[0] if uploads else None
        if first is None:
            if not isinstance(prepare, FileSteps):
                return None
            done = await self._shell_steps(prepare.words())
            return done if done is not None and done.ok else None
        packed = await asyncio.to_thread(_shell_archive, first[0])
        if packed is None or not packed[1]:  # too large, or not a folder
            return None
        if isinstance(prepare, FileSteps):
            words = [*prepare.words(), "--", *unpack_argv(first[1])]
            result = await self._shell_steps(words, data=packed[0])
        else:
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
        spool = spool_file()
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
            spool.close()
        return [*complaints(result.stderr, "tar"), *skipped]


def _extract_spool(spool: IO[bytes], dst: Path, what: str, bounds: Bounds) -> list[str]:
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
