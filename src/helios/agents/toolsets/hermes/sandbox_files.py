"""Reading and writing whole text files inside a sandbox, for the Hermes file tools.

One exec reads a file with its metadata (or lists its directory when it is
missing, for "did you mean" hints); one upload writes it. Only POSIX sh and
coreutils-or-busybox are assumed in the sandbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import posixpath
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path

from helios.agents.tools_text import ToolInputError
from helios.environments.base import Environment
from helios.errors import EnvironmentError_

#: larger files are refused: the exec output cap (8 MiB) would cut them silently
MAX_FILE_BYTES = 4 * 1024 * 1024
EXEC_TIMEOUT = 60.0
NEW_FILE_MODE = 0o644

# Header line, then the content: D (directory), O (not a regular file),
# "M" then the parent's entries (missing), or "F <mode> <size> <w|-> <real path>".
_READ = """p={path}
if [ -d "$p" ]; then echo D; exit 0; fi
if [ ! -e "$p" ]; then echo M; ls -1A -- "$(dirname -- "$p")" 2>/dev/null | head -n 500; exit 0; fi
if [ ! -f "$p" ]; then echo O; exit 0; fi
set -- $(stat -L -c '%a %s' -- "$p" 2>/dev/null)
w=-; [ -w "$p" ] && w=w
printf 'F %s %s %s %s\\n' "${{1:--}}" "${{2:-0}}" "$w" "$(readlink -f -- "$p" 2>/dev/null)"
[ "${{2:-0}}" -le {limit} ] || exit 0
exec cat -- "$p"
"""

# Makes the parent folder; prints D, O, or "<E|N> <mode> <real path>".
_PREPARE = """p={path}; d={parent}
if [ -d "$p" ]; then echo D; exit 0; fi
if [ -e "$p" ] && [ ! -f "$p" ]; then echo O; exit 0; fi
mkdir -p -- "$d" || exit 1
s=N; [ -e "$p" ] && s=E
r=$(readlink -f -- "$p" 2>/dev/null)
if [ -z "$r" ]; then q=$(readlink -f -- "$d" 2>/dev/null) && r="${{q%/}}/"{name}; fi
[ -n "$r" ] || {{ echo "cannot resolve the real location of $p" >&2; exit 1; }}
printf '%s %s %s\\n' "$s" "$(stat -L -c %a -- "$p" 2>/dev/null || echo -)" "$r"
"""


@dataclass(frozen=True, slots=True)
class SandboxFile:
    text: str
    size: int
    mode: int
    writable: bool
    real_path: str


class FileMissing(ToolInputError):
    def __init__(self, path: str, siblings: list[str]) -> None:
        super().__init__(f"File not found: {path}")
        self.siblings = siblings


def _mode(field: str) -> int:
    try:
        return int(field, 8) & 0o7777
    except ValueError:
        return NEW_FILE_MODE


def _reason(stderr: str, stdout: str) -> str:
    lines = (stderr.strip() or stdout.strip() or "unknown reason").splitlines()
    return " | ".join(lines[-3:])[:300]


async def _exec(env: Environment, script: str, path: str) -> tuple[int, str, str]:
    result = await env.exec(script, cwd="/", timeout=EXEC_TIMEOUT)
    if result.timed_out:
        raise ToolInputError(f"accessing {path} did not finish within {EXEC_TIMEOUT:g}s")
    return result.exit_code, result.stdout, result.stderr


async def read_text(env: Environment, path: str) -> SandboxFile:
    """The file's text; ToolInputError (FileMissing for a missing one) otherwise."""
    script = _READ.format(path=shlex.quote(path), limit=MAX_FILE_BYTES)
    code, out, err = await _exec(env, script, path)
    head, _, text = out.partition("\n")
    if head == "D":
        raise ToolInputError(f"{path} is a directory, not a file")
    if head == "M":
        raise FileMissing(path, [s for s in text.splitlines() if s])
    if head == "O":
        raise ToolInputError(f"{path} is not a regular file")
    fields = head.split(" ", 4)
    if code != 0 or len(fields) != 5 or fields[0] != "F" or not fields[2].isdigit():
        raise ToolInputError(f"cannot read {path}: {_reason(err, out)}")
    _, mode, size, writable, real = fields
    if int(size) > MAX_FILE_BYTES:
        raise ToolInputError(
            f"{path} is {int(size)} bytes, more than the {MAX_FILE_BYTES} bytes the file "
            "tools handle; use terminal tools (grep, sed -n, head) on it"
        )
    if "\x00" in text[:8192]:
        raise ToolInputError(f"{path} looks like a binary file (it contains NUL bytes)")
    return SandboxFile(text, int(size), _mode(mode), writable == "w", real or path)


def _write_temp(text: str, mode: int) -> Path:
    fd, name = tempfile.mkstemp(prefix="helios-hermes-")
    with os.fdopen(fd, "wb") as handle:
        handle.write(text.encode("utf-8", errors="replace"))
    os.chmod(name, mode)
    return Path(name)


async def write_text(env: Environment, path: str, text: str) -> bool:
    """Write `text` as the whole file (parents made); True if the file existed."""
    script = _PREPARE.format(
        path=shlex.quote(path),
        parent=shlex.quote(posixpath.dirname(path) or "/"),
        name=shlex.quote(posixpath.basename(path)),
    )
    code, out, err = await _exec(env, script, path)
    head = out.partition("\n")[0]
    if head == "D":
        raise ToolInputError(f"{path} is a directory")
    if head == "O":
        raise ToolInputError(f"{path} exists and is not a regular file")
    fields = head.split(" ", 2)
    if code != 0 or len(fields) != 3 or fields[0] not in ("E", "N"):
        raise ToolInputError(f"cannot write {path}: {_reason(err, out)}")
    existed = fields[0] == "E"
    await upload_text(env, fields[2], text, _mode(fields[1]) if existed else NEW_FILE_MODE)
    return existed


async def upload_text(env: Environment, target: str, text: str, mode: int) -> None:
    temp = await asyncio.to_thread(_write_temp, text, mode)
    try:
        await env.upload(temp, target)
    except (EnvironmentError_, OSError) as exc:
        # A refused path and a dead sandbox both land here; only the first is the model's.
        probe = await env.exec("true", cwd="/", timeout=EXEC_TIMEOUT)
        if not probe.ok:
            raise
        raise ToolInputError(f"could not write {target}: {exc}") from exc
    finally:
        await asyncio.shield(asyncio.to_thread(_unlink, temp))


def _unlink(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()
