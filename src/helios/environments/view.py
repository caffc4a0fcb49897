"""What one phase of an episode sees of a sandbox: its commands run as the phase's
user, and the files uploaded for it are that user's.

The task door hands the agent (and a step's setup hook) such a view, so every
tool, the oracle's solve.sh and any plugin agent run as `[agent] user` without
knowing it. Without a user the phase runs as the image's default user.

Uploads go through root (`docker cp`), so for a phase that is not root they
are staged and then copied into place *as the user*: an agent that may not
write /etc with bash may not write it with the editor either. Only Helios's
own folders (/solution, /logs/...) are written as root and then given to the
user. The view never starts or stops the sandbox: its owner does.
"""

from __future__ import annotations

import asyncio
import posixpath
import secrets
from pathlib import Path, PurePosixPath
from typing import ClassVar

from helios.environments.base import ROOT, Capabilities, Environment, ExecResult, User
from helios.environments.egress.policy import Network
from helios.environments.shell.payload import place_payload
from helios.errors import EnvironmentExecError

#: folders Helios itself fills for a phase: written as root, then given to its user
HELIOS_FOLDERS = ("/solution", "/logs")


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

    @property
    def supports_services(self) -> bool:  # type: ignore[override]
        # the sandbox's answer (a class-wide fact of its provider; see there)
        return self.inner.supports_services

    @property
    def supports_allowlist(self) -> bool:  # type: ignore[override]
        return self.inner.supports_allowlist

    @property
    def network(self) -> Network:
        """The sandbox's network now (a phase's own, once `set_network` switched it)."""
        return self.inner.network

    @network.setter
    def network(self, value: Network) -> None:
        """Set only by `Environment.__init__`: the sandbox's own is switched through
        `set_network`."""

    async def set_network(self, network: Network) -> None:
        await self.inner.set_network(network)

    def egress_denials(self) -> list[str]:
        return self.inner.egress_denials()

    def direct_hosts(self) -> tuple[str, ...]:
        return self.inner.direct_hosts()

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
        if not self._owner_known:
            self._owner, self._owner_known = await file_owner(self.inner, self.user), True
        owner = self._owner
        if owner is None:
            await self.inner.upload(src, dst)
        elif _is_helios_folder(dst):
            await self.inner.upload(src, dst)
            await self.inner.give_to(dst, owner)
        else:
            await self._upload_as(owner, src, dst)

    async def _upload_as(self, owner: User, src: Path, dst: str) -> None:
        """Stage the files as root, then copy them into place as `owner`, so the
        write is subject to the user's own permissions."""
        staging = f"/tmp/.helios-upload-{secrets.token_hex(8)}"
        await self.inner.upload(src, f"{staging}/payload")
        try:
            await self.inner.give_to(staging, owner)
            is_dir = await asyncio.to_thread(src.is_dir)
            copy = place_payload(staging, dst, is_dir=is_dir, keep_owner=False)
            result = await self.inner.exec(copy, cwd="/", timeout=120, user=owner)
            if not result.ok:
                raise EnvironmentExecError(f"upload to {dst} failed: {result.stderr.strip()[:200]}")
        finally:
            await self.inner.exec(f"rm -rf -- {staging}", cwd="/", timeout=60, user=ROOT)

    async def mount_readonly(self, host: Path, dst: str) -> bool:
        return await self.inner.mount_readonly(host, dst)

    async def download(self, src: str, dst: Path) -> list[str]:
        return await self.inner.download(src, dst)

    async def stop_processes(self) -> None:
        await self.inner.stop_processes()

    async def start_service(
        self,
        name: str,
        command: str,
        *,
        env: dict[str, str] | None = None,
        user: User | None = None,
    ) -> None:
        """Helios's, not the phase's: it runs as the sandbox's default user unless
        told otherwise, never as the phase's user by default (processes of one
        user may signal and trace each other)."""
        await self.inner.start_service(name, command, env=env, user=user)

    async def service_running(self, name: str) -> bool:
        return await self.inner.service_running(name)

    def exchange_dir(self) -> tuple[str, Path] | None:
        return self.inner.exchange_dir()

    async def stop(self) -> None:
        return None


def _is_helios_folder(path: str) -> bool:
    parts = PurePosixPath(posixpath.normpath(path)).parts
    return any(parts[:2] == PurePosixPath(folder).parts for folder in HELIOS_FOLDERS)


async def file_owner(env: Environment, user: User | None) -> User | None:
    """Who must own the files Helios puts in place for a phase that runs as `user`
    (None: the sandbox's default user); None: nobody needs them given."""
    return user if user is not None else await env.default_owner()


def as_user(env: Environment, user: User | None) -> Environment:
    """A view of `env` for a phase that runs as `user` (None: the image's default)."""
    return UserView(env, user)
