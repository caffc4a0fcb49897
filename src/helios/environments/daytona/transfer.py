"""Files in and out of a Daytona sandbox, a folder as one archive either way.

Up: the host packs `src` (`shell.tar.pack`), the toolbox stores the archive in
the sandbox's /tmp, and the shell path's own script (`shell.transfer.upload_script`)
unpacks it where it goes. Down: the shell path's script (`download_script`:
measured first, refused past the host's bounds) archives `src` into /tmp, the
toolbox streams that archive to a host spool bounded as every download is
(`safe_copy.Spool`), and `safe_copy.extract_tar` unpacks it with the checks of
the other providers: no link followed or made, nothing outside `dst`, bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import shlex
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import helios.environments.shell.tar as _tar
from helios.environments.base import ExecResult
from helios.environments.shell.safe_copy import (
    Bounds,
    Spool,
    UnsafeDownload,
    extract_tar,
    spool_file,
)
from helios.environments.shell.transfer import (
    TAR_DONE,
    complaints,
    download_script,
    prepared_upload_script,
    refuse,
    upload_script,
)
from helios.errors import EnvironmentExecError

#: runs a command as root from / (the environment's `exec`)
Run = Callable[[str], Awaitable[ExecResult]]


def staging_path(kind: str) -> str:
    return f"/tmp/.helios-{kind}-{secrets.token_hex(8)}.tar"


async def upload(fs: Any, run: Run, src: Path, dst: str) -> None:
    """`src` (a file, or a folder's contents) to `dst` in the sandbox."""
    archive = await asyncio.to_thread(_tar.pack, src, "payload")
    is_dir = await asyncio.to_thread(src.is_dir)
    staged = staging_path("upload")
    try:
        await fs.upload_file(archive, staged)
    except Exception as exc:
        raise EnvironmentExecError(f"upload to {dst} failed: {str(exc)[:200]}") from None
    quoted = shlex.quote(staged)
    result = await run(f"({upload_script(dst, is_dir)}) < {quoted}\n"
                       f"code=$?; rm -f -- {quoted}; exit $code")  # fmt: skip
    if not result.ok:
        raise EnvironmentExecError(f"upload to {dst} failed: {result.stderr.strip()[:200]}")


async def prepare_and_upload(fs: Any, run: Run, prepare: str, src: Path,
                             dst: str) -> ExecResult | None:  # fmt: skip
    """`prepare`, then the folder `src` unpacked straight into `dst` (which `prepare`
    leaves empty), in one command once the archive is staged: the verifier's reset
    and its tests. None when it did not succeed (the two steps apart then say which
    failed)."""
    if not await asyncio.to_thread(src.is_dir):
        return None
    archive = await asyncio.to_thread(_tar.pack, src, "payload")
    staged = staging_path("upload")
    try:
        await fs.upload_file(archive, staged)
    except Exception:
        return None
    quoted = shlex.quote(staged)
    result = await run(f"({prepared_upload_script(prepare, dst)}) < {quoted}\n"
                       f"code=$?; rm -f -- {quoted}; exit $code")  # fmt: skip
    return result if result.ok else None


async def download(fs: Any, run: Run, src: str, dst: Path) -> list[str]:
    """`src` from the sandbox to `dst`, checked; what was skipped."""
    script = download_script(src)
    if script is None:
        raise EnvironmentExecError(f"download of {src}: not a path that can be copied")
    what = f"download of {src}"
    bounds = Bounds()
    staged = staging_path("download")
    quoted = shlex.quote(staged)
    try:
        archived = await run(f"({script}) > {quoted}")
        refuse(archived.exit_code, src, bounds)
        if archived.timed_out or archived.exit_code not in TAR_DONE:
            reason = "timed out" if archived.timed_out else archived.stderr.strip()[:200]
            raise UnsafeDownload(f"{what}: the sandbox could not archive it ({reason})")
        spool = spool_file()
        try:
            await _fetch(fs, staged, Spool(spool, bounds, what), what)
            await asyncio.to_thread(spool.seek, 0)
            skipped = await asyncio.to_thread(extract_tar, spool, dst, what=what, bounds=bounds)
        finally:
            spool.close()
    finally:
        await run(f"rm -f -- {quoted}")
    return [*complaints(archived.stderr, "tar"), *skipped]


async def _fetch(fs: Any, path: str, spool: Spool, what: str) -> None:
    """The archive at `path` streamed into `spool` (which raises past the bound)."""
    try:
        chunks = await fs.download_file_stream(path)
        async with contextlib.aclosing(chunks):  # closes the stream on a refusal
            async for chunk in chunks:
                spool.add(chunk)
    except EnvironmentExecError:
        raise
    except Exception as exc:
        raise EnvironmentExecError(f"{what} failed: {str(exc)[:200]}") from None
