"""Services in a local sandbox (`Environment.start_service`): each lives in the
persistent shell of its user (and network), started by that shell's server (its
"service" operation), whose kills, after each command and at `stop_processes`,
spare it (`shell/server.c`). The one-shot bwrap path has none. Its exchange
folder (`exchange_dir`) is a folder of the root hidden under /dev and bound at
`EXCHANGE_MOUNT` (`local.bwrap`).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from helios.environments.base import User, check_service_name
from helios.environments.local.bwrap import EXCHANGE_FOLDER, EXCHANGE_MOUNT, BwrapCall, sandbox_env
from helios.environments.local.pool import ShellPool
from helios.environments.local.program import server_program
from helios.environments.local.root import RootNamespace
from helios.environments.local.users import LocalUsers, SandboxUser
from helios.environments.shell.client import SERVICE_LOGS, SandboxShell, ShellUnavailable
from helios.environments.shell.transfer import ShellTransfers
from helios.errors import EnvironmentExecError, UnsupportedFeature


class _ShellServices:
    """`LocalEnvironment.supports_services`, asked of this host when read: whether a
    shell server can run here (`server_program`, cached; its first call may build
    the compiled server, as the first sandbox's start would)."""

    def __get__(self, instance: object, owner: type | None = None) -> bool:
        return server_program() is not None


class LocalServices(ShellTransfers):
    """The services of `LocalEnvironment`, which provides the root, the users, the
    shells and the hooks below."""

    #: services live in a persistent shell: False where no shell server can run (no
    #: C compiler and no system python3, or HELIOS_LOCAL_SHELL=0): every command is
    #: then a one-shot bwrap
    supports_services: ClassVar[bool] = _ShellServices()  # type: ignore[assignment]
    root: Path | None
    _namespace: RootNamespace | None
    _users: LocalUsers | None
    _pool: ShellPool
    #: the shell each service lives in, by name
    _services: dict[str, SandboxShell]

    async def _user(self, user: User) -> SandboxUser:
        raise NotImplementedError

    def _declared(self, who: SandboxUser | None) -> dict[str, str]:
        raise NotImplementedError

    def _call(self, who: SandboxUser | None, env: dict[str, str],
              transfer: Path | None = None) -> BwrapCall:  # fmt: skip
        raise NotImplementedError

    async def start_service(
        self,
        name: str,
        command: str,
        *,
        env: dict[str, str] | None = None,
        user: User | None = None,
    ) -> None:
        """The service lives in the persistent shell of its user (and network): the
        server starts it, and its kills, after each command and at
        `stop_processes`, spare it (see `shell/server.c`)."""
        check_service_name(name)
        if self.root is None or self._users is None:
            raise EnvironmentExecError("sandbox is not running")
        old = self._services.get(name)
        if old is not None and await self._alive(old, name):
            raise EnvironmentExecError(f"the service {name!r} is running already")
        who = await self._user(user) if user is not None else None
        declared = self._declared(who)
        shell = await self._pool.for_service(self._call(who, sandbox_env(declared, {})))
        if shell is None:
            raise UnsupportedFeature(
                "the local sandbox runs services in its persistent shell, which cannot run "
                "here (no C compiler and no system python3, or HELIOS_LOCAL_SHELL=0)"
            )
        full_env = sandbox_env(declared, env or {})
        try:
            made = await shell.run(f"mkdir -p -- {SERVICE_LOGS}", full_env, 60)
            if not made.ok:
                raise EnvironmentExecError(
                    f"the service {name!r} did not start: no {SERVICE_LOGS}: "
                    f"{made.stderr.strip()[:200]}"
                )
            await shell.start_service(name, command, full_env)
        except ShellUnavailable as exc:
            raise EnvironmentExecError(f"the service {name!r} did not start: {exc}") from None
        self._services[name] = shell

    async def service_running(self, name: str) -> bool:
        shell = self._services.get(name)
        return shell is not None and await self._alive(shell, name)

    @staticmethod
    async def _alive(shell: SandboxShell, name: str) -> bool:
        service = shell.services.get(name)
        if service is None or shell.dead:
            return False
        try:
            return service.pid in await shell.running_services()
        except ShellUnavailable:
            return False

    def host_root(self) -> Path | None:
        """Where the host reaches the root's files while the sandbox runs: through the
        root's own mount namespace when it has one, else `root` itself."""
        return self.root if self._namespace is None else self._namespace.host_root()

    def exchange_dir(self) -> tuple[str, Path] | None:
        # A folder of the root that only bwrap's --bind reaches (/dev covers it inside).
        root = self.host_root()
        return None if root is None else (EXCHANGE_MOUNT, root / EXCHANGE_FOLDER)
