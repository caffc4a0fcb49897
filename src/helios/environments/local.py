"""Local provider: a bubblewrap sandbox per trial, no Docker needed.

Each trial gets a fresh root directory bound at `/`; the host's system
directories are mounted read-only over it, so the sandbox has the host's tools
but cannot see the host's home, the repository or any other trial. Every exec
is its own `bwrap` with no network, its own pid namespace and die-with-parent.
Files persist between execs through the trial's root; processes do not.

The Dockerfile is not run: the build context's files (a task's `environment/`) are copied into the
working directory. Tasks whose Dockerfile installs software need docker.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import posixpath
import shlex
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path, PurePosixPath
from typing import ClassVar

from helios._proc import decode, last_line, run_process
from helios.environments.base import Environment, ExecResult
from helios.environments.spec import SandboxSpec
from helios.errors import EnvironmentExecError, EnvironmentUnavailable

#: host directories shared read-only with every sandbox
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc")
SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SANDBOX_PREFIX = "helios-sandbox-"
TRANSFER_MOUNT = "/.helios-transfer"
SKIPPED_ENV_FILES = {"Dockerfile", ".dockerignore"}
INSTALL_HINT = (
    "bubblewrap (bwrap) is not installed: install it with `apt-get install bubblewrap` "
    "(Debian/Ubuntu) or `dnf install bubblewrap` (Fedora), or use --provider docker"
)


@functools.cache
def _system_mounts(with_symlinks: bool = False) -> tuple[str, ...]:
    """Read-only binds of the host's system dirs; merged-/usr symlinks are
    made in the trial root itself (bwrap cannot re-create them on each exec)."""
    args: list[str] = []
    for name in SYSTEM_DIRS:
        host = Path("/") / name
        if host.is_symlink():
            if with_symlinks:
                args += ["--symlink", os.readlink(host), f"/{name}"]
        elif host.is_dir():
            args += ["--ro-bind", str(host), f"/{name}"]
    return tuple(args)


def _make_system_symlinks(root: Path) -> None:
    for name in SYSTEM_DIRS:
        host = Path("/") / name
        if host.is_symlink():
            (root / name).symlink_to(os.readlink(host))


class LocalEnvironment(Environment):
    name: ClassVar[str] = "local"

    def __init__(self, spec: SandboxSpec, *, trial_id: str, run_id: str) -> None:
        super().__init__(spec, trial_id=trial_id, run_id=run_id)
        self.root: Path | None = None
        self._holder: Path | None = None

    @classmethod
    async def preflight(cls) -> None:
        if shutil.which("bwrap") is None:
            raise EnvironmentUnavailable(INSTALL_HINT)
        probe = await run_process(
            ["bwrap", "--unshare-all", *_system_mounts(with_symlinks=True), "true"], timeout=30
        )
        if probe.returncode != 0:
            reason = last_line(decode(probe.stderr), "unknown")
            raise EnvironmentUnavailable(
                f"bwrap cannot create a sandbox here ({reason}); "
                "enable unprivileged user namespaces or use --provider docker"
            )

    @classmethod
    async def cleanup_run(cls, run_id: str | None, *, force: bool = False) -> list[str]:
        removed = await asyncio.to_thread(remove_orphan_sandboxes)
        return [str(path) for path in removed]

    async def start(self) -> None:
        if shutil.which("bwrap") is None:
            raise EnvironmentUnavailable(INSTALL_HINT)
        # <tmp>/helios-sandbox-*/{owner.pid, root/}: the pid file lets
        # `helios cleanup` remove sandboxes whose process died (kill -9).
        self._holder = Path(tempfile.mkdtemp(prefix=SANDBOX_PREFIX))
        (self._holder / "owner.pid").write_text(str(os.getpid()))
        self.root = self._holder / "root"
        self.root.mkdir()
        await asyncio.to_thread(self._populate, self.root)

    def _populate(self, root: Path) -> None:
        # Runs before any sandboxed process exists, so host paths hold no planted links.
        _make_system_symlinks(root)
        workdir = root / PurePosixPath(self.workdir).relative_to("/")
        workdir.mkdir(parents=True, exist_ok=True)
        for sub in ("logs/agent", "logs/verifier", "tmp", "root"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        (root / "tmp").chmod(0o1777)
        env_dir = self.spec.build_context
        if env_dir is not None and env_dir.is_dir():
            for entry in env_dir.iterdir():
                if entry.name in SKIPPED_ENV_FILES:
                    continue
                if entry.is_dir():
                    shutil.copytree(entry, workdir / entry.name, symlinks=True)
                else:
                    shutil.copy2(entry, workdir / entry.name)

    def _bwrap_args(self, cwd: str, env: dict[str, str], transfer: Path | None) -> list[str]:
        if self.root is None:
            raise EnvironmentExecError("sandbox is not running")
        args = [
            "bwrap", "--unshare-all", "--die-with-parent", "--new-session",
            "--hostname", "sandbox",
            "--bind", str(self.root), "/",
            *_system_mounts(),
            "--proc", "/proc", "--dev", "/dev",
            "--chdir", cwd, "--clearenv",
        ]  # fmt: skip
        if transfer is not None:
            args += ["--bind", str(transfer), TRANSFER_MOUNT]
        base_env = {"PATH": SANDBOX_PATH, "HOME": "/root", "TMPDIR": "/tmp", "LANG": "C.UTF-8"}
        base_env.update(self.spec.env)
        base_env.update(env)
        for key, value in base_env.items():
            args += ["--setenv", key, value]
        return args

    async def exec(
        self,
        command: str,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        return await self._exec(command, cwd or self.workdir, env or {}, timeout)

    async def _exec(
        self,
        command: str,
        cwd: str,
        env: dict[str, str],
        timeout: float | None,
        transfer: Path | None = None,
    ) -> ExecResult:
        # The working directory is made from inside the sandbox: on the host side a
        # path could run through a symlink the agent planted, and lead outside.
        quoted = shlex.quote(cwd)
        script = f"mkdir -p -- {quoted} 2>/dev/null; cd -- {quoted} || exit 125\n{command}"
        argv = [*self._bwrap_args("/", env, transfer), "sh", "-c", script]
        result = await run_process(argv, timeout=timeout)
        return ExecResult(
            decode(result.stdout), decode(result.stderr), result.returncode, result.timed_out
        )

    # Files cross the sandbox boundary only through a fresh transfer folder that
    # the sandbox sees at TRANSFER_MOUNT; the copy to or from the destination
    # runs inside the sandbox, so symlinks the agent made resolve in its own
    # view and can never reach host files.
    async def upload(self, src: Path, dst: str) -> None:
        is_dir = await asyncio.to_thread(src.is_dir)
        target = shlex.quote(dst)
        if is_dir:
            copy = f"mkdir -p -- {target} && cp -a {TRANSFER_MOUNT}/payload/. {target}/"
        else:
            parent = shlex.quote(posixpath.dirname(dst) or "/")
            copy = f"mkdir -p -- {parent} && cp -a {TRANSFER_MOUNT}/payload {target}"
        async with self._transfer() as folder:
            await asyncio.to_thread(_copy, src, folder / "payload")
            result = await self._exec(copy, "/", {}, 120, transfer=folder)
        if result.exit_code != 0:
            raise EnvironmentExecError(f"upload to {dst} failed: {result.stderr.strip()[:200]}")

    async def download(self, src: str, dst: Path) -> None:
        source = shlex.quote(src)
        # -L: symlinks are followed inside the sandbox, so only plain files come out.
        copy = f"test -e {source} || exit 3; cp -RL -- {source} {TRANSFER_MOUNT}/payload"
        async with self._transfer() as folder:
            result = await self._exec(copy, "/", {}, 120, transfer=folder)
            payload = folder / "payload"
            if result.exit_code == 3 or not payload.exists():
                raise EnvironmentExecError(f"{src} does not exist in the sandbox")
            await asyncio.to_thread(_copy, payload, dst)

    @contextlib.asynccontextmanager
    async def _transfer(self) -> AsyncIterator[Path]:
        if self._holder is None:
            raise EnvironmentExecError("sandbox is not running")
        folder = Path(await asyncio.to_thread(tempfile.mkdtemp, "", "xfer-", str(self._holder)))
        try:
            yield folder
        finally:
            await asyncio.to_thread(shutil.rmtree, folder, True)

    async def stop(self) -> None:
        holder, self._holder, self.root = self._holder, None, None
        if holder is not None:
            await asyncio.shield(asyncio.to_thread(shutil.rmtree, holder, True))


def _copy(src: Path, dst: Path) -> None:
    if src.is_dir():
        shutil.copytree(src, dst, symlinks=True, dirs_exist_ok=True)
    else:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)


def remove_orphan_sandboxes() -> list[Path]:
    """Delete sandbox folders whose owning process is gone; return them."""
    removed: list[Path] = []
    for holder in Path(tempfile.gettempdir()).glob(f"{SANDBOX_PREFIX}*"):
        try:
            pid = int((holder / "owner.pid").read_text().strip())
        except (OSError, ValueError):
            pid = 0
        if pid and _alive(pid):
            continue
        shutil.rmtree(holder, ignore_errors=True)
        removed.append(holder)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
