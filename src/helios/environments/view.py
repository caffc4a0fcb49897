"""What one phase of an episode sees of a sandbox: its commands run as the phase's
user, and the files uploaded for it are that user's.

The task door hands the agent (and a step's setup hook) such a view when the
task names `[agent] user`, so every tool, the oracle's solve.sh and any
plugin agent run as that user without knowing it. The view never starts or
stops the sandbox: its owner does.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from helios.environments.base import Capabilities, Environment, ExecResult, User


class UserView(Environment):
    name: ClassVar[str] = "view"

    def __init__(self, inner: Environment, user: User | None) -> None:
        super().__init__(inner.spec, trial_id=inner.trial_id, run_id=inner.run_id)
        self.inner = inner
        self.user = user

    @property
    def capabilities(self) -> Capabilities:
        return self.inner.capabilities

    @property
    def workdir(self) -> str:
        return self.inner.workdir

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
        who = user if user is not None else self.user
        if who is None:
            # Plugin providers written before users existed take no `user`.
            return await self.inner.exec(command, cwd=cwd, env=env, timeout=timeout)
        return await self.inner.exec(command, cwd=cwd, env=env, timeout=timeout, user=who)

    async def upload(self, src: Path, dst: str) -> None:
        await self.inner.upload(src, dst)
        if self.user is not None:
            await self.inner.give_to(dst, self.user)

    async def download(self, src: str, dst: Path) -> None:
        await self.inner.download(src, dst)

    async def stop_processes(self) -> None:
        await self.inner.stop_processes()

    async def stop(self) -> None:
        return None


def as_user(env: Environment, user: User | None) -> Environment:
    """`env` itself when no user is asked for, else a view that runs as `user`."""
    return env if user is None else UserView(env, user)
