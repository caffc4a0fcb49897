"""Services in a docker sandbox (`Environment.start_service`), and the stop of its
processes that spares them.

On the shell path the container's init, Helios's shell server, starts each
service (its "service" operation) and its "stop" spares them (`shell/server.c`).
On the Engine API path an exec starts each (`start_by_exec`: in a session of its
own, its pid and start time read before that exec ends), and the stop is an
exec'd script (`SPARING_KILL`) with the same rules; the container's init there
(`docker.api.INIT_LOOP`) reaps what it kills. Where that exec cannot start (the
pids limit full), the container is killed and started again, the services with it.

A host folder is bound at EXCHANGE_MOUNT (`exchange_dir`) when the daemon shares
this host's files: a service's socket (the VNC of `--watch`) is reached there. It
goes with the container's `stop`, or, after a kill -9, with `cleanup_run`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import aiodocker

import helios.environments.docker.shell as _docker_shell
from helios._proc import decode
from helios.environments.base import ROOT, User, check_service_name
from helios.environments.docker.api import exec_command, restart_alone
from helios.environments.docker.cli import LABEL_INSTANCE, LABEL_MANAGED, docker
from helios.environments.docker.shell import ContainerShell
from helios.environments.shell.client import SERVICE_LOGS, ServiceId, ShellUnavailable
from helios.environments.shell.transfer import ShellTransfers
from helios.errors import EnvironmentExecError

log = logging.getLogger(__name__)

#: where a container sees its exchange folder (`exchange_dir`)
EXCHANGE_MOUNT = "/run/helios"
EXCHANGE_PREFIX = "helios-exchange-"
#: a cleanup of every run leaves exchange folders younger than this (seconds)
EXCHANGE_GRACE = 300.0


class ContainerServices(ShellTransfers):
    """The services and the process stop of `DockerEnvironment`, which provides the
    container, its shell and the hooks below."""

    supports_services: ClassVar[bool] = True
    container: str | None
    instance: str
    _shell: ContainerShell | None
    #: the services started by an exec (the Engine API path), by name; on the
    #: shell path the shell knows its own
    _services: dict[str, ServiceId]
    #: the host folder bound at EXCHANGE_MOUNT, while the container may exist
    _exchange: Path | None

    @property
    def container_name(self) -> str:
        raise NotImplementedError

    @property
    def _engine(self) -> aiodocker.Docker:
        raise NotImplementedError

    def _require_container(self) -> str:
        raise NotImplementedError

    async def _image_user(self) -> str:
        raise NotImplementedError

    async def stop_processes(self) -> None:
        """Kill every process of the container but its init and the services: the
        shell server does it from pid 1 (`docker.shell`); without it, an exec'd kill
        (`kill_sparing`: 90 ms against the restart's 500). That exec
        needs a process of its own: with the pids limit full (a fork bomb), the
        container's pid 1 is killed instead, which kills every process in its pid
        namespace (setsid, nohup and double forks included), and it is started
        again with its entrypoint alone: the services die too."""
        container = self._require_container()
        if self._shell is None:
            try:
                await kill_sparing(self._engine, container, self._service_ids())
                return
            except EnvironmentExecError as exc:
                # No exec can start while the pids limit is full (a fork bomb): the
                # restart then, and the services go with the rest.
                if self._services:
                    log.warning("docker: the services are stopped with the agent's "
                                "processes: %s", exc)  # fmt: skip
                self._services.clear()
            await restart_alone(self._engine, container)
            return
        await _docker_shell.stop_all(self._shell, self._kill_by_exec)

    def _service_ids(self) -> list[tuple[int, int]]:
        known = self._shell.services if self._shell is not None else self._services
        return [(s.pid, s.start) for s in known.values()]

    async def _kill_by_exec(self) -> None:
        """`kill -9 -1` in the container by an exec: all but its init (and what the
        services spare)."""
        await kill_all(self._engine, self.container_name, self._service_ids())

    async def start_service(
        self,
        name: str,
        command: str,
        *,
        env: dict[str, str] | None = None,
        user: User | None = None,
    ) -> None:
        check_service_name(name)
        container = self._require_container()
        if await self.service_running(name):
            raise EnvironmentExecError(f"the service {name!r} is running already")
        log_path = f"{SERVICE_LOGS}/{name}.log"
        owner = str(user) if user is not None else (await self._image_user() or "0")
        # Made by root for its user: a folder the agent (another user) cannot change.
        prepared = await self.exec(
            f"mkdir -p {SERVICE_LOGS} && rm -f -- {log_path} && : > {log_path} && "
            f"chown -- {shlex.quote(owner)} {log_path}", cwd="/", user=ROOT,
        )  # fmt: skip
        if not prepared.ok:
            raise EnvironmentExecError(
                f"the service {name!r} did not start: {prepared.stderr.strip()[:200]}"
            )
        who = "" if user is None else str(user)
        shell = self._shell
        if shell is None:
            pid, start = await start_by_exec(
                self._engine, container, command, log_path, env=env or {}, user=who
            )
            self._services[name] = ServiceId(pid, start)
            return
        if shell.dead or (shell.abandoned is not None and not shell.abandoned.done()):
            raise EnvironmentExecError(
                f"the service {name!r} did not start: the container's init is not answering"
            )
        try:
            await shell.start_service(name, command, env or {}, user=who)
        except ShellUnavailable as exc:
            raise EnvironmentExecError(f"the service {name!r} did not start: {exc}") from None

    async def service_running(self, name: str) -> bool:
        shell = self._shell
        known = shell.services if shell is not None else self._services
        service = known.get(name)
        if service is None or self.container is None:
            return False
        if shell is not None and not shell.busy:
            try:
                return service.pid in await shell.running_services()
            except ShellUnavailable:
                return False
        # no server, or one serving a command still: ask by an exec
        return await alive_by_exec(self._engine, self.container, service.pid, service.start)

    def exchange_dir(self) -> tuple[str, Path] | None:
        exchange = self._exchange
        return None if exchange is None or self.container is None else (EXCHANGE_MOUNT, exchange)

    async def _make_exchange(self, run: str) -> None:
        """The host folder to bind, made before the container (once: a start may be
        tried again)."""
        if self._exchange is None:
            self._exchange = await asyncio.to_thread(make_exchange, self.instance, run)

    async def _drop_exchange(self) -> None:
        """Remove the host folder, once the container is gone."""
        exchange, self._exchange = self._exchange, None
        if exchange is not None:
            await asyncio.to_thread(shutil.rmtree, exchange, True)


def make_exchange(instance: str, run: str) -> Path | None:
    """A host folder for the container's exchange folder, named by its instance
    label and its run (`run`: as in its name), or None when the daemon may not see
    this host's files (the same test as the shell server's bind)."""
    host = os.environ.get("DOCKER_HOST", "unix://")
    if not host.startswith("unix://") or os.environ.get("DOCKER_CONTEXT"):
        return None
    folder = Path(tempfile.mkdtemp(prefix=f"{EXCHANGE_PREFIX}{instance}-{run}-"))
    if "," in str(folder) or ":" in str(folder):  # `--mount` cannot say such a path
        folder.rmdir()
        return None
    folder.chmod(0o755)
    return folder


async def remove_exchanges(run: str | None) -> list[str]:
    """The exchange folders whose container is gone (their Helios was killed before
    its `stop`): of one run (`run`: as in their names) or, with None, any older than
    EXCHANGE_GRACE (a younger one may be a start whose container is not made yet)."""
    folders = await asyncio.to_thread(
        lambda: sorted(Path(tempfile.gettempdir()).glob(f"{EXCHANGE_PREFIX}*"))
    )
    if not folders:
        return []
    label = f'{{{{.Label "{LABEL_INSTANCE}"}}}}'
    code, out, _ = await docker("ps", "-a", "--filter", f"label={LABEL_MANAGED}=true",
                                "--format", label)  # fmt: skip
    if code != 0:
        return []
    chosen = [f for f in folders if await asyncio.to_thread(_gone, f, set(out.split()), run)]
    for folder in chosen:
        await asyncio.to_thread(shutil.rmtree, folder, True)
    return [str(folder) for folder in chosen]


def _gone(folder: Path, live: set[str], run: str | None) -> bool:
    instance, _, rest = folder.name.removeprefix(EXCHANGE_PREFIX).partition("-")
    if instance in live:
        return False
    if run is not None:
        return rest.startswith(f"{run}-")
    try:
        return time.time() - folder.lstat().st_mtime > EXCHANGE_GRACE
    except OSError:
        return False


async def kill_all(client: aiodocker.Docker, container: str,
                   services: Sequence[tuple[int, int]] = ()) -> None:  # fmt: skip
    """`kill -9 -1` by an exec: every process of the container but its init and the
    exec itself (the shell's own `kill`, so no binary of the image is needed).
    With services, (pid, start time) each, what they spare lives (`SPARING_KILL`)."""
    if services:
        await kill_sparing(client, container, services)
        return
    await exec_command(client, container, ["sh", "-c", "kill -9 -1"], user="0", workdir="/",
                       env={}, timeout=30)  # fmt: skip


#: The shell server's kill that spares services (`shell/server.c`), as a script of
#: the image's own `sh` run as root by an exec: its arguments are the services'
#: `pid:start`. Builtins only (`read`, `kill`, `test -ef`): no process of its own
#: but itself, which it spares with pid 1. A pass reads /proc, marks the services
#: (pid *and* start time) and, along chains of spared parents, the descendants that
#: run one of a service's own programs (a service still running the `sh` it was
#: started with owns the programs that shell started), and SIGKILLs the rest; the
#: passes repeat until one kills nothing (nothing with SIGKILL pending can fork)
#: and the init has reaped the killed (they would hold pids of the limit).
#: The init's own `sleep` (INIT_LOOP: its child in its process group) is spared
#: too. A stat line cut short (a process named with a newline) is not spared. As root
#: without CAP_SYS_PTRACE it cannot read another user's or an undumpable
#: process's /proc/<pid>/exe: such descendants are not spared (the services are).
SPARING_KILL = r"""
services=$*
all=
pass=0
while :; do
  pass=$((pass + 1))
  for p in $all; do unset "pp_$p" "st_$p" "s_$p" "own_$p"; done
  all=
  z=0
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    case $p in 1|$$) continue;; esac
    l=
    read -r l 2>/dev/null <"$d/stat" || [ -n "$l" ] || continue
    set -f
    set -- ${l##*) }
    set +f
    if [ $# -ge 20 ]; then
      case $1 in Z|X|x) [ "$2" = 1 ] && z=$((z + 1)); continue;; esac
      [ "$2" = 1 ] && [ "$3" = 1 ] && continue
      eval "pp_$p=\$2 st_$p=\${20}"
    else
      eval "pp_$p=0 st_$p=-"
    fi
    eval "s_$p="
    all="$all $p"
  done
  for e in $services; do
    r=${e%%:*}
    eval "t=\${st_$r-}"
    [ "$t" = "${e#*:}" ] || continue
    eval "s_$r=$r"
    own=$r
    if [ /proc/$r/exe -ef /bin/sh ]; then
      own=
      for p in $all; do
        eval "pp=\$pp_$p s=\$s_$p"
        if [ "$pp" = "$r" ] && [ -z "$s" ]; then eval "s_$p=$r"; own="$own $p"; fi
      done
    fi
    eval "own_$r=\$own"
  done
  changed=1
  while [ $changed = 1 ]; do
    changed=0
    for p in $all; do
      eval "s=\$s_$p pp=\$pp_$p"
      [ -z "$s" ] || continue
      eval "o=\${s_$pp-}"
      [ -n "$o" ] || continue
      eval "own=\$own_$o"
      for q in $own; do
        if [ "/proc/$p/exe" -ef "/proc/$q/exe" ]; then eval "s_$p=$o"; changed=1; break; fi
      done
    done
  done
  k=0
  for p in $all; do
    eval "s=\$s_$p"
    [ -n "$s" ] && continue
    kill -9 "$p" 2>/dev/null
    k=$((k + 1))
  done
  [ $k = 0 ] && [ $z = 0 ] && break
  [ $pass -lt 20000 ] || break
done
echo "left $k, unreaped $z"
[ $k = 0 ] && [ $z = 0 ]
"""


async def kill_sparing(client: aiodocker.Docker, container: str,
                       services: Sequence[tuple[int, int]]) -> None:  # fmt: skip
    """Every process but the init (its `sleep` too) and what the services spare
    killed, or EnvironmentExecError."""
    argv = ["sh", "-c", SPARING_KILL, "sh", *(f"{pid}:{start}" for pid, start in services)]
    result = await exec_command(client, container, argv, user="0", workdir="/", env={},
                                timeout=60)  # fmt: skip
    if result.timed_out or result.returncode != 0:
        said = decode(result.stdout + result.stderr).strip()[-200:] or "no answer"
        raise EnvironmentExecError(f"could not stop the agent's processes: {said}")


async def start_by_exec(
    client: aiodocker.Docker, container: str, command: str, log: str, *,
    env: dict[str, str], user: str,
) -> tuple[int, int]:  # fmt: skip
    """`sh -c command` in a session of its own (`setsid`, where the image has it),
    started by an exec that then ends: (its pid, its start time)."""
    script = (
        "cd / || exit 1\n"
        "s=; command -v setsid >/dev/null 2>&1 && s=setsid\n"
        f"$s sh -c {shlex.quote(command)} </dev/null >>{shlex.quote(log)} 2>&1 &\n"
        "p=$!\nread -r l </proc/$p/stat || exit 1\n"
        'set -f; set -- ${l##*) }\necho "$p ${20}"'
    )
    result = await exec_command(client, container, ["sh", "-c", script], user=user,
                                workdir="/", env=env, timeout=60)  # fmt: skip
    fields = decode(result.stdout).split()
    if result.returncode != 0 or len(fields) != 2 or not all(f.isdigit() for f in fields):
        said = decode(result.stderr).strip()[-300:] or f"exit {result.returncode}"
        raise EnvironmentExecError(f"the service did not start: {said}")
    return int(fields[0]), int(fields[1])


async def alive_by_exec(client: aiodocker.Docker, container: str, pid: int, start: int) -> bool:
    """Whether the process `pid` started at `start` (clock ticks) runs, by an exec."""
    script = (
        f"read -r l </proc/{pid}/stat || exit 1\n"
        "set -f; set -- ${l##*) }\n"
        f'[ $# -ge 20 ] && [ "${{20}}" = {start} ] && case $1 in Z|X|x) exit 1;; esac'
    )
    try:
        result = await exec_command(client, container, ["sh", "-c", script], user="0",
                                    workdir="/", env={}, timeout=30)  # fmt: skip
    except EnvironmentExecError:
        return False
    return result.returncode == 0 and not result.timed_out
