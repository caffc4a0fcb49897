"""A trial's hot path to Docker through the Engine API (aiodocker), on the daemon's socket.

Each `docker` CLI call is a process that costs about 25 ms of CPU before the
daemon does anything (benchmarks/README.md). A trial makes one for every exec,
copy, kill, start and remove, so these go over HTTP instead: one aiodocker
client per event loop, shared by that loop's containers and closed when the
last one stops (an aiohttp session must not outlive its loop).

`docker run` (which pulls a missing image and reports an engine without
`--storage-opt`), builds, inspects and `helios cleanup` stay on the CLI: they
happen once per trial or less.

Who needs this path: a daemon on another host (DOCKER_HOST=tcp://..., where the
shell server cannot be bound in from this host's disk), a host that cannot build
the static shell server (no C compiler or no static libc), and HELIOS_DOCKER_SHELL=0.
On the shell path (`docker.shell`) it still removes the container and serves the
rare calls the stream does not carry. Tested by tests/test_docker_api.py and the
"docker-api" provider of tests/sandbox_helpers.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import posixpath
import shlex
import tempfile
import weakref
from collections.abc import AsyncGenerator, Awaitable
from pathlib import Path
from typing import TypeVar

import aiodocker
import aiohttp

import helios.environments.shell.safe_copy as _safe_copy
from helios._proc import OUTPUT_CAP, CappedOutput, ProcResult, decode
from helios.environments.base import ExecResult
from helios.environments.docker.cli import CONTROL_TIMEOUT
from helios.environments.shell.transfer import MISSING, refuse, size_check
from helios.errors import EnvironmentExecError

T = TypeVar("T")
#: the daemon's words when a command cannot start as the asked user
NO_USER = b"unable to find user"
#: The container's init on this path: the image's `sh`, waiting on a `sleep` of its
#: own. Its `wait` reaps every child, so the orphans a kill leaves behind go (a
#: bare `sleep` as pid 1 kept them as zombies, each holding a pid of the limit).
#: The `sleep` is the init's only child in the init's process group: an exec's
#: processes have sessions of their own and can never join it (`docker.services`).
INIT_LOOP = "while :; do sleep infinity & wait $!; done"

#: where the daemon listens when DOCKER_HOST does not say (as the docker CLI looks)
_SOCKETS = (Path("/var/run/docker.sock"), Path("/run/docker.sock"))
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[aiodocker.Docker, int]] = (
    weakref.WeakKeyDictionary()
)


def _new_client() -> aiodocker.Docker:
    """A client on the daemon's unix socket whose connections are not capped: an exec
    holds one for as long as its command runs, and aiohttp's default cap of 100
    would make the 101st trial's command (and its container's removal) wait.
    Another host (tcp, ssh, a docker context) gets aiodocker's own connector."""
    host = os.environ.get("DOCKER_HOST")
    if host is None and "DOCKER_CONTEXT" not in os.environ:
        found = [p for p in _SOCKETS if p.is_socket()]
        host = f"unix://{found[0]}" if found else None
    if host is None or not host.startswith("unix://"):
        return aiodocker.Docker()
    # Given a connector, aiodocker takes the url for composing request URLs only.
    connector = aiohttp.UnixConnector(host.removeprefix("unix://"), limit=0)
    return aiodocker.Docker(url="unix://localhost", connector=connector)


def acquire() -> aiodocker.Docker:
    """This loop's client; every `acquire` is matched by one `release`."""
    loop = asyncio.get_running_loop()
    client, users = _clients.get(loop) or (_new_client(), 0)
    _clients[loop] = (client, users + 1)
    return client


async def _close(client: aiodocker.Docker) -> None:
    await client.close()
    await client.connector.close()  # ours when we made it; closing twice is harmless


async def release(client: aiodocker.Docker) -> None:
    loop = asyncio.get_running_loop()
    held, users = _clients.get(loop, (None, 0))
    if held is not client:
        await _close(client)  # not the loop's (an earlier one's): nobody shares it
        return
    if users > 1:
        _clients[loop] = (client, users - 1)
        return
    del _clients[loop]
    await _close(client)


async def control(what: str, call: Awaitable[T], timeout: float | None = CONTROL_TIMEOUT) -> T:
    """`call`, with the daemon's refusal, silence or absence (past `timeout`, the same
    bound as the CLI's calls) as EnvironmentExecError. An outer timeout's
    TimeoutError goes through: it is not this bound's."""
    bound = asyncio.timeout(timeout)
    try:
        async with bound:
            return await call
    except TimeoutError:
        if not bound.expired():
            raise
        raise EnvironmentExecError(f"docker {what} did not answer within {timeout:g}s") from None
    except aiodocker.DockerError as exc:
        raise EnvironmentExecError(f"docker {what}: {exc.message}"[:300]) from None
    except aiohttp.ClientError as exc:
        raise EnvironmentExecError(f"docker {what}: the engine is unreachable ({exc})") from None


async def exec_command(
    client: aiodocker.Docker,
    container: str,
    argv: list[str],
    *,
    user: str,
    workdir: str,
    env: dict[str, str],
    timeout: float | None,
) -> ProcResult:
    """Run `argv` in the container; each stream kept up to OUTPUT_CAP. A client-side
    timeout gives `timed_out` (the caller wraps `timeout` inside to kill it there)."""
    handle = client.containers.container(container)
    created = handle.exec(argv, stdout=True, stderr=True, stdin=False, user=user,
                          environment=env, workdir=workdir)  # fmt: skip
    run = await control("exec", created)
    out, err = CappedOutput(OUTPUT_CAP), CappedOutput(OUTPUT_CAP)

    async def pump() -> None:
        async with run.start(detach=False) as stream:
            while (message := await stream.read_out()) is not None:
                (out if message.stream == 1 else err).add(message.data)

    timed_out = False
    try:
        async with asyncio.timeout(timeout):
            await control("exec", pump(), timeout=None)
    except TimeoutError:
        timed_out = True
    code = -1
    if not timed_out:
        info = await control("exec inspect", run.inspect())
        code = info["ExitCode"] if info.get("ExitCode") is not None else -1
    stdout, stderr = out.value(), err.value()
    if code == 126 and NO_USER in stdout:
        # The daemon puts its reason on the output stream; the caller looks in stderr.
        stdout, stderr = b"", stdout + stderr
    return ProcResult(stdout, stderr, code, timed_out)


async def run_shell_command(
    client: aiodocker.Docker, container: str, command: str, *, cwd: str,
    env: dict[str, str], timeout: float | None, user: str | int | None, has_timeout: bool,
) -> ExecResult:  # fmt: skip
    """`sh -c command` by an exec, as `Environment.exec` answers. The container
    itself gone or broken raises EnvironmentExecError: not the command's failure."""
    inner = ["sh", "-c", command]
    if timeout is not None and has_timeout:
        # Kill inside the container too: the client giving up alone would leave
        # the command running there.
        inner = ["timeout", "-k", "5", f"{timeout:g}", *inner]
    result = await exec_command(
        client, container, inner, user="" if user is None else str(user), workdir=cwd,
        env=env, timeout=None if timeout is None else timeout + 15,
    )  # fmt: skip
    if user is not None and result.returncode == 126 and NO_USER in result.stderr:
        raise EnvironmentExecError(f"user {user!r} does not exist in the sandbox")
    timed_out = result.timed_out or (timeout is not None and result.returncode == 124)
    return ExecResult(decode(result.stdout), decode(result.stderr), result.returncode, timed_out)


async def upload(client: aiodocker.Docker, container: str, archive: bytes) -> None:
    """Unpack `archive` at / (its entries are named by full path), as `docker cp -`
    does: a folder is never replaced by a file."""
    query = client._query(
        f"containers/{container}/archive", method="PUT", data=archive,
        params={"path": "/", "noOverwriteDirNonDir": "1"},
        headers={"Content-Type": "application/x-tar"},
    )  # fmt: skip

    async def put() -> None:
        async with query as response:
            await response.read()

    await control("upload", put())


async def archive_chunks(client: aiodocker.Docker, container: str,
                         src: str) -> AsyncGenerator[bytes, None]:  # fmt: skip
    """The tar of `src` in the container, as the daemon streams it."""
    query = client._query(f"containers/{container}/archive", params={"path": src})
    async with query as response:
        try:
            async for chunk in response.content.iter_chunked(65536):
                yield chunk
        finally:
            # aiodocker leaves the response to us. One not read to its end (a
            # refused or broken download) must close its connection now: while the
            # daemon streams an archive it holds the container's lock, and every
            # later call on the container (exec, inspect, rm) would wait on it.
            response.close()


async def download(client: aiodocker.Docker, container: str, src: str, dst: Path,
                   bounds: _safe_copy.Bounds) -> list[str]:  # fmt: skip
    """The archive of `src` spooled to a temporary file (refused past the bound, as
    the local sandbox's), then extracted with `extract_tar`'s checks; returns what
    was skipped. A tree already past the bound is refused before the daemon
    streams it (`_measure`)."""
    what = f"download of {src}"
    await _measure(client, container, src, bounds)
    file = await asyncio.to_thread(tempfile.TemporaryFile)
    try:
        await control(what, _spool(archive_chunks(client, container, src),
                                   _safe_copy.Spool(file, bounds, what)))  # fmt: skip
        await asyncio.to_thread(file.seek, 0)
        return await asyncio.to_thread(_safe_copy.extract_tar, file, dst, what=what,
                                       bounds=bounds)  # fmt: skip
    finally:
        await asyncio.to_thread(file.close)


async def _measure(client: aiodocker.Docker, container: str, src: str,
                   bounds: _safe_copy.Bounds) -> None:  # fmt: skip
    """The shell path's `size_check` by an exec: a `truncate -s 2T` file is refused
    at once, not streamed by the daemon up to the bound. An image without a shell
    skips it (the bound on the stream still holds)."""
    path = posixpath.join("/", posixpath.normpath(src))
    script = (f"[ -e {shlex.quote(path)} ] || [ -L {shlex.quote(path)} ] || exit {MISSING}\n"
              f"{size_check(path, bounds)}")  # fmt: skip
    try:
        result = await exec_command(client, container, ["sh", "-c", script], user="0",
                                    workdir="/", env={}, timeout=60)  # fmt: skip
    except EnvironmentExecError:
        return
    if not result.timed_out:
        refuse(result.returncode, src, bounds)


async def _spool(chunks: AsyncGenerator[bytes, None], spool: _safe_copy.Spool) -> None:
    async with contextlib.aclosing(chunks):  # closes the daemon's stream on a refusal
        async for chunk in chunks:
            spool.add(chunk)


async def remove(client: aiodocker.Docker, container: str) -> None:
    """`docker rm -f -v`; a container already gone is removed."""
    try:
        await control("rm", client.containers.container(container).delete(force=True, v=True))
    except EnvironmentExecError as exc:
        if "No such container" not in str(exc):
            raise


async def restart_alone(client: aiodocker.Docker, container: str) -> None:
    """SIGKILL the container's pid 1, which kills every process in its pid namespace
    (setsid, nohup and double forks included), then start it again with its
    entrypoint alone (INIT_LOOP: the init and its `sleep`), and check that it is."""
    handle = client.containers.container(container)
    try:
        await control("kill", handle.kill())
    except EnvironmentExecError as exc:
        if "is not running" not in str(exc):
            raise EnvironmentExecError(f"could not stop the agent's processes: {exc}") from None
    try:
        await control("start", handle.start())
    except EnvironmentExecError as exc:
        raise EnvironmentExecError(f"could not restart the container: {exc}") from None
    running = await process_count(client, container)
    if running not in (1, 2):
        raise EnvironmentExecError(
            f"{running} processes run in the container after its restart, expected 2"
        )


async def process_count(client: aiodocker.Docker, container: str) -> int:
    """How many processes run in the container (`docker top`)."""
    top = await control("top", client._query_json(f"containers/{container}/top"))
    return len(top.get("Processes") or [])
