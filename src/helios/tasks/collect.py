"""`[[verifier.collect]]`: commands that run once the agent has stopped, each in its
compose service (`main` is the sandbox itself), before the verifier and the
artifacts. As in Harbor, a command's failure is not the trial's: what it should
have made is then missing, and the verifier says so. Each command's outcome goes
to `verifier/collect.log`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Protocol

from helios.environments.base import ROOT, Environment, ExecResult, User
from helios.errors import EnvironmentError_, EnvironmentExecError
from helios.tasks.schema import CollectConfig

MAIN = "main"
LOG = "collect.log"


class ServiceSandbox(Protocol):
    """What the collection needs of a compose service: commands and downloads."""

    supports_users: bool
    workdir: str

    async def exec(self, command: str, *, cwd: str | None = None,
                   env: dict[str, str] | None = None, timeout: float | None = None,
                   user: User | None = None) -> ExecResult: ...  # fmt: skip

    async def download(self, src: str, dst: Path) -> list[str]: ...


async def service_sandbox(env: Environment, service: str | None) -> Environment | ServiceSandbox:
    """The sandbox of `service` (None or "main": `env` itself); EnvironmentExecError
    when the provider runs no such service."""
    if service in (None, MAIN):
        return env
    find: Any = getattr(env, "compose_service", None)
    if find is None:
        raise EnvironmentExecError(f"the {env.name} provider runs no compose service {service!r}")
    found: ServiceSandbox = await find(service)
    return found


async def run_collect(env: Environment, commands: tuple[CollectConfig, ...],
                      log_dir: Path | None) -> None:  # fmt: skip
    """Run each command in its service, in order; record each outcome."""
    if not commands:
        return
    lines: list[str] = []
    for item in commands:
        try:
            where = await service_sandbox(env, item.service)
            as_user: dict[str, Any] = {}
            if where.supports_users:
                as_user["user"] = item.user if item.user is not None else ROOT
            result = await where.exec(item.command, cwd="/", timeout=item.timeout_sec, **as_user)
            said = "timed out" if result.timed_out else f"exit {result.exit_code}"
            tail = (result.stderr or result.stdout).strip()[-300:]
            said += f": {tail}" if tail else ""
            lines.append(f"[{item.service}] {item.command!r}: {said}")
        except EnvironmentError_ as exc:
            lines.append(f"[{item.service}] {item.command!r}: failed: {exc}")
    if log_dir is not None:
        text = "\n".join(lines) + "\n"

        def write() -> None:
            log_dir.mkdir(parents=True, exist_ok=True)
            (log_dir / LOG).write_text(text, "utf-8")

        await asyncio.to_thread(write)
