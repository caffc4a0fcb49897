"""The null environment: no sandbox at all, for units that never run a command.

Tool-call tests score what an agent *says* it would call, so they need no
sandbox; the null provider lets them go through the same trial lifecycle.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from helios.environments.base import Environment, ExecResult, User
from helios.errors import EnvironmentExecError


class NullEnvironment(Environment):
    name: ClassVar[str] = "null"

    async def start(self) -> None:
        return None

    async def exec(
        self,
        command: str,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
        user: User | None = None,
    ) -> ExecResult:
        raise EnvironmentExecError("the null environment has no sandbox to run commands in")

    async def upload(self, src: Path, dst: str) -> None:
        raise EnvironmentExecError("the null environment has no sandbox to upload to")

    async def download(self, src: str, dst: Path) -> list[str]:
        raise EnvironmentExecError("the null environment has no sandbox to download from")

    async def stop(self) -> None:
        return None
