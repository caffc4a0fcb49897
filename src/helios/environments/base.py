"""The Environment contract every provider implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from helios.environments.spec import SandboxSpec


@dataclass(frozen=True, slots=True)
class ExecResult:
    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@dataclass(frozen=True, slots=True)
class Capabilities:
    network: bool
    cpus: float
    memory_mb: int


class Environment(ABC):
    """One trial's sandbox. Created per trial; `stop` must always be safe to call."""

    #: the provider name used on the command line (`--provider NAME`)
    name: ClassVar[str]

    def __init__(self, spec: SandboxSpec, *, trial_id: str, run_id: str) -> None:
        self.spec = spec
        self.trial_id = trial_id
        self.run_id = run_id

    @property
    def capabilities(self) -> Capabilities:
        spec = self.spec
        return Capabilities(network=spec.network, cpus=spec.cpus, memory_mb=spec.memory_mb)

    @property
    def workdir(self) -> str:
        return self.spec.workdir

    @classmethod
    async def preflight(cls) -> None:
        """Raise `EnvironmentUnavailable` with a how-to-fix line if unusable here."""

    async def build(self) -> None:
        """Prepare what `start` needs (an image); shared work is done once."""

    @classmethod
    async def cleanup_run(cls, run_id: str | None, *, force: bool = False) -> list[str]:
        """Remove what this provider left behind for one run (or, with None, every run
        whose owner is gone; `force` also takes live ones). Returns what was removed.

        The batch service calls it after an interrupt; `helios cleanup` calls it too."""
        return []

    @abstractmethod
    async def start(self) -> None: ...

    @abstractmethod
    async def exec(
        self,
        command: str,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        """Run `command` with `sh -c` inside the sandbox. Never raises on a non-zero exit."""

    @abstractmethod
    async def upload(self, src: Path, dst: str) -> None:
        """Copy a host file or directory to `dst`; a directory's contents land in `dst`."""

    @abstractmethod
    async def download(self, src: str, dst: Path) -> None:
        """Copy a sandbox file or directory to the host path `dst`."""

    async def stop_processes(self) -> None:
        """Kill every process in the sandbox and check that none is left.

        The episode calls it after the agent and before the scorer, so nothing
        the agent started can run while it is scored. Raise
        `EnvironmentExecError` if a process survives."""

    @abstractmethod
    async def stop(self) -> None:
        """Tear the sandbox down. Idempotent; safe after a failed or cancelled start."""
