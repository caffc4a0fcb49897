"""The compiled shell server (`shell/server.c`): built once per machine with the
host's C compiler and kept in Helios's cache; without a compiler, the sandboxes
use the Python server (`shell/server.py`), which speaks the same wire format.

Why compile: a sandbox's server starts once per trial, and a Python interpreter
costs ~13 ms of CPU to start against well under 1 ms for this program.

What a sandbox runs is never a file it can write: each sandbox's holder folder
(root-owned when Helios is root, outside the sandbox's root) gets a copy, which
bwrap binds read-only at `SERVER_MOUNT`. The cached build is used only when it is
this user's own and nobody else may write it or its folder; otherwise Helios
builds again in a private temporary folder.

Who needs this path: every local user with a C compiler (the default), and every
docker user of the shell stream (the static build). The protocol cases run against
it and its Python twin alike (tests/test_local_shell.py, parametrized "compiled" and
"python"); tests/test_local_shell_native.py tests the build and its cache.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import logging
import os
import platform
import shutil
import stat
import subprocess
import tempfile
import time
from pathlib import Path

#: where the server appears inside a sandbox (a read-only bind)
SERVER_MOUNT = "/.helios-shell"
#: the copy in a sandbox's holder folder
HOLDER_NAME = "shell"
BUILD_TIMEOUT = 120.0
_SOURCE = Path(__file__).with_name("server.c")
#: every file the build reads (the server includes its container mode)
SOURCES = (_SOURCE, Path(__file__).with_name("container_user.h"))
PREFIX = "shell-server-"
STATIC_PREFIX = "shell-static-"

log = logging.getLogger(__name__)


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "helios"


def _build_name(prefix: str) -> str:
    """The cache name of one build: its sources, this machine and its libc."""
    # The machine and libc in the key too: a home folder shared between hosts
    # must not hand one host's build to another.
    libc = os.confstr("CS_GNU_LIBC_VERSION") if "CS_GNU_LIBC_VERSION" in os.confstr_names else ""
    sources = [path.read_bytes() for path in SOURCES]
    key = b"\0".join([*sources, platform.machine().encode(), (libc or "").encode()])
    return f"{prefix}{hashlib.sha256(key).hexdigest()[:16]}"


def _server_build(prefix: str, flags: tuple[str, ...]) -> Path | None:
    """The build in Helios's cache (made now if missing); when the cache cannot be
    used (a read-only home, a folder someone else can write), a private build kept
    until this process ends; None when it cannot be built here."""
    try:
        name = _build_name(prefix)
    except OSError:
        return None
    cached = cache_dir() / name
    if _trusted(cached):
        return cached
    try:
        cached.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if _trusted(cached.parent, folder=True) and _build(cached, flags):
            prune_builds(cached.parent, keep=name, prefix=prefix)
            return cached
    except OSError:
        pass
    private = Path(tempfile.mkdtemp(prefix="helios-build-"))
    atexit.register(shutil.rmtree, private, True)
    target = private / name
    return target if _build(target, flags) else None


def _why_not_built(static: bool) -> str:
    if _compiler() is None:
        return "no C compiler: install gcc"
    if static:
        return "no static libc? install libc6-dev (Debian) or glibc-static (Fedora)"
    return "the C compiler failed"


@functools.cache
def native_server() -> bytes | None:
    """The compiled server's bytes, built if need be; None when it cannot be built
    here (no C compiler, or the build failed): the Python server is used then."""
    built = _server_build(PREFIX, ())
    if built is not None:
        return built.read_bytes()
    # Once per process: the sandboxes still work, a sixth slower (benchmarks/README.md).
    log.warning("local sandbox: the compiled shell server could not be built (%s); using "
                "the slower Python server", _why_not_built(static=False))  # fmt: skip
    return None


@functools.cache
def static_server() -> Path | None:
    """The server linked statically, for any container's root filesystem (the
    docker provider binds it read-only as the container's init): a file the
    daemon can read, or None when it cannot be built here (no compiler, or no
    static libc)."""
    built = _server_build(STATIC_PREFIX, ("-static",))
    if built is None:
        # Once per process: docker still works, each command a request to the daemon.
        log.warning("docker: the static shell server could not be built (%s); each command "
                    "goes to the Engine API instead, about 3x slower (benchmarks/README.md)",
                    _why_not_built(static=True))  # fmt: skip
    return built


def prune_builds(
    folder: Path, *, keep: str, max_age_days: float = 30, prefix: str = "shell-server-"
) -> list[Path]:
    """Delete the builds of other source versions (one per Helios upgrade) that no
    process has read or written for `max_age_days`. A build still in use by
    another installed version is read at each of its processes' starts, so it
    stays (atime moves at least daily under relatime)."""
    removed: list[Path] = []
    horizon = time.time() - max_age_days * 86400
    for path in folder.glob(f"{prefix}*"):
        try:
            info = path.lstat()
            if path.name == keep or not stat.S_ISREG(info.st_mode):
                continue
            if info.st_uid == os.geteuid() and max(info.st_atime, info.st_mtime) < horizon:
                path.unlink()
                removed.append(path)
        except OSError:
            continue
    return removed


def _compiler() -> str | None:
    return shutil.which("cc") or shutil.which("gcc")


def _trusted(path: Path, *, folder: bool = False) -> bool:
    """Ours, of the right kind, and writable by nobody else."""
    try:
        info = path.lstat()
    except OSError:
        return False
    kind = stat.S_ISDIR if folder else stat.S_ISREG
    return kind(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o022


def _build(target: Path, flags: tuple[str, ...]) -> bool:
    """Compile to a temporary name, then rename: two processes building at once
    each finish with a whole file."""
    compiler = _compiler()
    if compiler is None:
        return False
    partial = target.with_name(f".{target.name}.{os.getpid()}")
    try:
        result = subprocess.run(
            [compiler, "-O2", *flags, "-o", str(partial), str(_SOURCE)],
            capture_output=True, timeout=BUILD_TIMEOUT, check=False,
        )  # fmt: skip
        if result.returncode != 0 or not partial.is_file():
            reason = result.stderr.decode(errors="replace").strip().splitlines()[-1:]
            log.debug("the compiled shell server did not build: %s", reason)
            return False
        partial.chmod(0o755)
        os.replace(partial, target)
        return True
    except (OSError, subprocess.SubprocessError) as exc:
        log.debug("the compiled shell server did not build: %s", exc)
        return False
    finally:
        partial.unlink(missing_ok=True)


def place_server(holder: Path, binary: bytes) -> Path:
    """The sandbox's own read-only copy, in its holder folder (made once)."""
    path = holder / HOLDER_NAME
    if not path.exists():
        partial = holder / f".{HOLDER_NAME}.partial"
        partial.write_bytes(binary)
        partial.chmod(0o755)
        os.replace(partial, path)
    return path
