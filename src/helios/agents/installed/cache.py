"""The host's cache of installed agents: one folder per agent and version, installed
once from its registry (npm or PyPI) and then only read.

`~/.cache/helios/agents/<registry>-<package>-<version>/` (`HELIOS_AGENT_CACHE`
moves the root); two agents on one package and version share it.
A file lock makes a second process wait for the first one's install rather than
install again; a finished install is marked by `.installed`, written last, so a
half-done folder (a killed install) is installed over.

A PyPI package is installed with the host's Python into `site/`, and a
relocatable copy of that Python goes beside it into `python/`
(`installed.python_runtime`): the sandbox needs no Python of its own. A package
that needs another Python (`Package.python`, "3.13") is installed with, and
bundled from, the host's build of it (`python_runtime.find`).
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from helios._proc import run_process
from helios.agents.installed import python_runtime
from helios.errors import EnvironmentError_
from helios.settings import current

#: what marks a complete install (written last)
DONE_FILE = ".installed"
#: how many of the installer's last lines an install error keeps
TAIL_LINES = 8
TAIL_CHARS = 360
INSTALL_TIMEOUT = 900.0


class InstallError(EnvironmentError_):
    """An agent's install failed: the message ends with the installer's last lines."""


@dataclass(frozen=True)
class Package:
    """What to install: `registry` is "npm" or "pip"; `name` the package, at `version`."""

    registry: str
    name: str
    version: str
    #: pinned packages installed beside it, from the same registry (Gemini CLI's Node)
    extras: tuple[str, ...] = ()
    #: a pip package's Python ("3.13"); "" for Helios's own
    python: str = ""

    @property
    def folder_name(self) -> str:
        """The cache folder's name: agents on one package and version share it."""
        name = f"{self.registry}-{self.name.lstrip('@').replace('/', '+')}-{self.version}"
        name = "+".join([name, *(e.lstrip("@").replace("/", "+") for e in self.extras)])
        return f"{name}-py{self.python}" if self.python else name

    @property
    def pinned(self) -> str:
        return f"{self.name}@{self.version}" if self.registry == "npm" else (
            f"{self.name}=={self.version}")  # fmt: skip


def cache_root() -> Path:
    """`HELIOS_AGENT_CACHE`, else `~/.cache/helios/agents` when every user can reach
    it (a sandbox's users read the install through a bind), else
    `/var/tmp/helios-agents-<uid>` (a home of mode 700, root's)."""
    given = current().agent_cache
    if given:
        return Path(given)
    base = Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache"))
    if _reachable_by_all(base):
        return base / "helios" / "agents"
    return Path("/var/tmp") / f"helios-agents-{os.getuid()}"


def check_reachable(folder: Path) -> None:
    """InstallError unless every user may reach `folder` (a sandbox's users read the
    install through a bind)."""
    if not _reachable_by_all(folder):
        raise InstallError(f"the agent cache {folder} is closed to other users (a folder on "
                           "its path lacks o+x), and a sandbox's users read the install there: "
                           "set HELIOS_AGENT_CACHE to a folder they can reach")  # fmt: skip


def _reachable_by_all(folder: Path) -> bool:
    """Whether every user may pass through each existing folder on the way to `folder`."""
    for part in [folder, *folder.parents]:
        try:
            mode = part.stat().st_mode
        except OSError:
            continue  # made later, with a mode that lets others through
        if not mode & 0o001:
            return False
    return True


@dataclass(frozen=True)
class Installed:
    folder: Path
    #: seconds spent installing now; 0.0 when the cache had it
    seconds: float


def _python(package: Package) -> Path | None:
    """The interpreter a pip package is installed with (None: Helios's own)."""
    if not package.python:
        return None
    found = python_runtime.find(package.python)
    if found is None:
        version = package.python
        raise InstallError(f"cannot install {package.pinned}: it needs Python {version}, and "
                           f"this host has none (no python{version} on PATH, none in pyenv): "
                           f"install one, e.g. `pyenv install {version}`")  # fmt: skip
    return found


def _argv(package: Package, folder: Path) -> list[str]:
    if package.registry == "npm":
        npm = shutil.which("npm")
        if npm is None:
            raise InstallError(f"cannot install {package.pinned}: npm is not on this host")
        return [npm, "install", "--prefix", str(folder), "--no-audit", "--no-fund",
                "--no-save", "--loglevel=error", package.pinned, *package.extras]  # fmt: skip
    if package.registry == "pip":
        python = _python(package) or Path(sys.executable)
        return [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                "--target", str(folder / "site"), package.pinned, *package.extras]  # fmt: skip
    raise InstallError(f"unknown registry {package.registry!r} for {package.name}")


async def ensure_installed(agent: str, package: Package, *, root: Path | None = None) -> Installed:
    """The folder holding `package` for `agent`, installing it first if no process
    has yet. Raises InstallError with the installer's last lines."""
    folder = (root or cache_root()) / package.folder_name
    if (folder / DONE_FILE).is_file():
        return Installed(folder, 0.0)
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.parent.chmod(0o755)
    lock_path = folder.parent / f".{folder.name}.lock"
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        await asyncio.to_thread(fcntl.flock, fd, fcntl.LOCK_EX)
        if (folder / DONE_FILE).is_file():  # another process installed it meanwhile
            return Installed(folder, 0.0)
        started = time.monotonic()
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        folder.chmod(0o755)
        result = await run_process(_argv(package, folder), timeout=INSTALL_TIMEOUT)
        if result.timed_out or result.returncode != 0:
            out = (result.stdout + result.stderr).decode(errors="replace").strip().splitlines()
            why = "timed out" if result.timed_out else f"exit {result.returncode}"
            # the message is kept to one line of 500 characters: the last lines win
            lines = [line.strip() for line in out[-TAIL_LINES:] if line.strip()]
            tail = " | ".join(lines)[-TAIL_CHARS:]
            raise InstallError(f"installing {package.pinned} for {agent} failed ({why}): {tail}")
        if package.registry == "pip":  # the sandbox may have no Python of this version
            await asyncio.to_thread(python_runtime.bundle, folder / "python",
                                    packages=folder / "site", python=_python(package))  # fmt: skip
        (folder / DONE_FILE).write_text(package.pinned + "\n")
        return Installed(folder, time.monotonic() - started)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
