"""What one phase of an episode sees of a sandbox: its commands run as the phase's
user, and the files uploaded for it are that user's.

The task door hands the agent (and a step's setup hook) such a view, so every
tool, the oracle's solve.sh and any plugin agent run as `[agent] user` without
knowing it. Without a user the phase runs as the image's default user, and
files uploaded for it become that user's when it is not root (an image with
`USER runner` must still read the solve.sh Helios copied in as root). The
view never starts or stops the sandbox: its owner does.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from helios.environments.base import Capabilities, Environment, ExecResult, User
from helios.errors import EnvironmentExecError


class UserView(Environment):
    name: ClassVar[str] = "view"

    def __init__(self, inner: Environment, user: User | None) -> None:
        super().__init__(inner.spec, trial_id=inner.trial_id, run_id=inner.run_id)
        self.inner = inner
        self.user = user
        #: who gets the uploaded files, found once (None: nobody, root reads all)
        self._owner: User | None = None
        self._owner_known = False

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
        if not self._owner_known:
            self._owner, self._owner_known = await file_owner(self.inner, self.user), True
        if self._owner is not None:
            await self.inner.give_to(dst, self._owner)

    async def download(self, src: str, dst: Path) -> None:
        await self.inner.download(src, dst)

    async def stop_processes(self) -> None:
        await self.inner.stop_processes()

    async def stop(self) -> None:
        return None


async def file_owner(env: Environment, user: User | None) -> User | None:
    """Who must own the files Helios puts in place for a phase that runs as `user`:
    the user, or the image's default user when that is not root; None: nobody
    (root reads everything, or the provider has no users)."""
    if user is not None:
        return user
    if not env.supports_users:
        return None
    probe = await env.exec("id -u", cwd="/", timeout=60)
    uid = probe.stdout.strip()
    if not probe.ok or not uid.isdigit():
        raise EnvironmentExecError(f"cannot tell the sandbox's user: {probe.stderr.strip()[:200]}")
    return None if uid == "0" else int(uid)


def as_user(env: Environment, user: User | None) -> Environment:
    """A view of `env` for a phase that runs as `user` (None: the image's default)."""
    return UserView(env, user)
