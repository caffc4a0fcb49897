"""A docker container whose init is Helios's shell server: every command, copy and
the verifier's process stop go over the `docker run -i` stream, not one daemon
request (or three, for an exec) each.

Why: a trial used to ask the daemon for about nine things (run, a setup exec,
kill + start + top before the verifier, two execs and two copies for it, and a
remove), and each costs the daemon, containerd and runc tens of ms of CPU
(benchmarks/README.md). Here a trial is one `docker run --rm -i`, whatever it
runs: the server (`shell/server.c` in container mode, linked statically so it
runs on any image) is bound read-only at `SERVER_MOUNT` and started as root, and
runs each command as the asked user (the image's USER by default), looked up in
the container's own files as `docker exec -u` does.

Isolation holds as before:
- the server is the container's pid 1 and not dumpable: no process of the
  container may trace it, open its pipes or signal it (pid 1 of a namespace
  gets no signal it has no handler for), and its binary is a read-only bind;
- "stop" kills every other process of the container with `kill(-1)` from pid 1
  and answers only once /proc lists none (the kill + start it replaces did the
  same by ending the pid namespace); with services (`start_service`: the
  server's "service" operation) it spares them and what they spare, in passes
  over /proc until one finds nothing else (`shell/server.c`);
- the stream ends with Helios: its end closes the server's stdin, the server
  exits, and `--rm` removes the container (kill -9 of Helios included).

Without a static build (no compiler or static libc), for a daemon on another
host (the bind needs the server on the daemon's disk), or with
HELIOS_DOCKER_SHELL=0, the provider uses the Engine API for each call instead.

Who needs this path: every docker user whose daemon runs on this host and who can
build the static server (the default). Tested by tests/test_docker_shell.py and the
"docker-shell" provider of tests/sandbox_helpers.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path

from helios._proc import CappedOutput, within
from helios.environments.base import ROOT, ExecResult, User
from helios.environments.docker.cli import CONTROL_TIMEOUT
from helios.environments.shell.client import Dropped, SandboxShell, Sink, ended
from helios.environments.shell.native import static_server
from helios.errors import EnvironmentExecError
from helios.settings import current as helios_settings

log = logging.getLogger(__name__)

#: where the server appears in the container (a read-only bind)
SERVER_MOUNT = "/.helios-shell"
ENV_SWITCH = "HELIOS_DOCKER_SHELL"
#: how long a stream's end may take: the server exits, the container is removed
CLOSE_GRACE = 30.0
#: how long the server may take to kill and reap every other process
STOP_TIMEOUT = 10.0


#: why the server cannot be a container's init on this host (then never tried again)
unusable: str | None = None


def server_path() -> Path | None:
    """The static server to bind, or None: each call then goes to the Engine API."""
    if not helios_settings().docker_shell or unusable is not None:
        return None
    host = os.environ.get("DOCKER_HOST", "unix://")
    if not host.startswith("unix://") or os.environ.get("DOCKER_CONTEXT"):
        return None  # the daemon may be on another machine: it cannot bind our file
    path = static_server()
    # `--mount` splits its value on commas (and `-v` on colons): a path with one
    # cannot be said there.
    if path is None or "," in str(path) or ":" in str(path):
        return None
    return path


def run_options(server: Path, default_user: str) -> tuple[list[str], list[str]]:
    """The `docker run` options before the image, and the arguments after it."""
    before = [
        "-i", "--rm",
        # the stream carries the commands' output: the daemon must not log it too
        "--log-driver", "none",
        "--user", "0:0",
        "--mount", f"type=bind,source={server},target={SERVER_MOUNT},readonly",
        "--entrypoint", SERVER_MOUNT,
    ]  # fmt: skip
    return before, ["--container", default_user]


class ContainerShell(SandboxShell):
    """The stream to one container's server. `remove` removes the container by force:
    the way to end it when its server does not exit on its own."""

    #: `docker run` may pull the image, or wait on a loaded daemon
    start_timeout = CONTROL_TIMEOUT

    def __init__(self, argv: list[str], remove: Callable[[], Awaitable[None]],
                 kill_others: Callable[[], Awaitable[None]]) -> None:  # fmt: skip
        super().__init__(argv, dict(os.environ), marker="")
        self._remove = remove
        #: kill every process of the container but its init, from outside (an exec)
        self._kill_others = kill_others
        #: a command whose caller was cancelled; it runs on until it ends (see `run_as`)
        self.abandoned: asyncio.Future[ExecResult] | None = None

    async def run_as(
        self, user: str, script: str, env: dict[str, str], timeout: float | None, *,
        data: bytes = b"", sink: Sink | None = None, operation: bytes = b"run",
    ) -> ExecResult:  # fmt: skip
        """Run one command as `user` ("": the image's USER). A cancel leaves the
        command running, as a cancelled `docker exec` does, and the stream with it:
        the container must outlive its agent's timeout for the verifier. Until it
        ends, `busy` holds and other commands take the Engine API."""
        # Busy from now, not from when the task first runs: a second command in
        # between would write its request into this one's stream.
        self.busy = True
        head = self.head(operation, user)
        inner = asyncio.ensure_future(
            self._run_busy(script, env, timeout, data=data, sink=sink, head=head)
        )
        try:
            return await asyncio.shield(inner)
        except asyncio.CancelledError:
            self.abandoned = inner
            raise

    async def _run_busy(
        self, script: str, env: dict[str, str], timeout: float | None, *, data: bytes,
        sink: Sink | None, head: tuple[bytes, ...],
    ) -> ExecResult:  # fmt: skip
        try:
            return await self.run(script, env, timeout, data=data, sink=sink, head=head)
        finally:
            self.busy = False

    async def refused(self) -> None:
        """Stop a command whose output was refused (a download past its bound) and
        keep the container, whose files the next steps read: the server serves
        nothing else meanwhile, so it is killed from outside (`kill -9 -1` by an
        exec: during a transfer nothing else runs), and its end read, the rest of
        its output dropped (services spared: `kill_others`). If that fails, the
        container goes."""
        try:
            async with asyncio.timeout(STOP_TIMEOUT):
                await self._kill_others()
                await self._collect(Dropped(), CappedOutput())
        except Exception:
            await self._kill()

    def head(self, operation: bytes, user: str = "") -> tuple[bytes, ...]:
        return (operation, user.encode())

    async def stop_all(self) -> ExecResult:
        """Kill every process of the container but the server (and what its services
        spare); ok when none is left."""
        return await self.stop_others(STOP_TIMEOUT)

    async def _close(self) -> None:
        """End the stream: an idle server exits on it, and `--rm` removes the
        container before `docker run` returns. Otherwise (a command still
        running, or a server gone astray) the container is removed by force.
        (`close` runs this to its end, even through a cancel.)"""
        self.dead = True
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        if not self.busy:
            with contextlib.suppress(TimeoutError):
                await within(CLOSE_GRACE, proc.wait())
        self.clean = proc.returncode == 0
        if not self.clean:
            # The client first: until its stream is gone, the daemon waits for
            # someone to read the rest of a command's output before it removes
            # the container (a refused download's: `docker rm` hung 120 s).
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                await self._remove()
            with contextlib.suppress(TimeoutError):
                await within(5, ended(proc))
        if self._stderr is not None:
            self._stderr.cancel()
            with contextlib.suppress(BaseException):
                await self._stderr


async def exec_in(
    shell: ContainerShell, command: str, cwd: str, env: dict[str, str] | None,
    timeout: float | None, user: User | None, *, data: bytes = b"", sink: Sink | None = None,
) -> ExecResult:  # fmt: skip
    """`docker exec`'s equivalent over the stream (`data` its stdin; with `sink`, its
    stdout goes there: a transfer's archive)."""
    script = f"cd -- {shlex.quote(cwd)} || exit 126\n{command}"
    result = await _on_stream(shell, "" if user is None else str(user), script, env, timeout,
                              data=data, sink=sink)  # fmt: skip
    if user is not None and result.exit_code == 126 and "unable to find user" in result.stderr:
        raise EnvironmentExecError(f"user {user!r} does not exist in the sandbox")
    return result


async def steps_in(
    shell: ContainerShell, words: list[str], env: dict[str, str] | None, timeout: float | None,
    *, data: bytes = b"",
) -> ExecResult:  # fmt: skip
    """The server's "steps" as root (`shell/server.c`): file work without a process,
    then the program the words may end with."""
    return await _on_stream(shell, str(ROOT), "\0".join(words), env, timeout, data=data,
                            operation=b"steps")  # fmt: skip


async def _on_stream(
    shell: ContainerShell, user: str, script: str, env: dict[str, str] | None,
    timeout: float | None, *, data: bytes = b"", sink: Sink | None = None,
    operation: bytes = b"run",
) -> ExecResult:  # fmt: skip
    """One request to the container's init as `user`; the container's end raises."""
    if shell.dead:
        raise EnvironmentExecError("the container has stopped: its init ended")
    result = await shell.run_as(user, script, env or {}, timeout, data=data, sink=sink,
                                operation=operation)  # fmt: skip
    if shell.dead:
        # No command can end the server (pid 1): its stream ended because the
        # container did (removed, out of memory, the daemon restarted).
        raise EnvironmentExecError("the container stopped during the command")
    return result


async def stop_all(shell: ContainerShell, kill_by_exec: Callable[[], Awaitable[None]]) -> None:
    """Every process of the container but its init killed, or EnvironmentExecError."""
    abandoned = shell.abandoned
    if abandoned is not None and not abandoned.done():
        # The server is still serving a cancelled command: end it from outside
        # (one exec's `kill -9 -1`), and the server answers again.
        with contextlib.suppress(EnvironmentExecError):
            await kill_by_exec()
        with contextlib.suppress(TimeoutError, Exception):
            await within(STOP_TIMEOUT, asyncio.shield(abandoned))
    if shell.dead or shell.busy:
        raise EnvironmentExecError("could not stop the agent's processes: the container's "
                                   "init is not answering")  # fmt: skip
    result = await shell.stop_all()
    if not result.ok:
        raise EnvironmentExecError(
            f"could not stop the agent's processes: {result.stderr.strip()[:200] or 'no answer'}"
        )


def give_up(reason: str) -> bool:
    """Whether `docker run` failed for the server itself (an engine that cannot run
    it: SELinux labels, a noexec bind, another architecture): then this process
    uses the Engine API from now on, and says so once."""
    global unusable
    if SERVER_MOUNT not in reason:
        return False
    unusable = stream_reason(reason)
    log.warning("docker: Helios's shell server cannot be a container's init here (%s); "
                "using the Engine API for each command instead", unusable)  # fmt: skip
    return True


def stream_reason(reason: str) -> str:
    """`docker run`'s last words, without its usage hint."""
    lines = [ln for ln in reason.strip().splitlines() if ln.strip() and "--help" not in ln]
    return lines[-1] if lines else "no reason given"
