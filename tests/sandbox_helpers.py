"""Running a test body in a fresh sandbox (started, then always stopped): local, or
each provider path that runs services."""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from helios.environments.base import Environment
from helios.environments.docker import DockerEnvironment
from helios.environments.local import LocalEnvironment
from helios.environments.local.bwrap import system_binds
from helios.environments.local.program import ENV_SWITCH, server_program
from helios.environments.shell.native import native_server
from helios.environments.spec import SandboxSpec

Body = Callable[[LocalEnvironment], Awaitable[None]]


def host_system_binds() -> list[str]:
    """bwrap arguments showing the host's system folders read-only, and nothing else.
    Never `--ro-bind / /`: that binds every host mount recursively, and a concurrent
    test's sandbox tmpfs unmounted meanwhile fails bwrap's remount ("No such file")."""
    return [arg for source, dest in system_binds() for arg in ("--ro-bind", source, dest)]


def in_sandbox(body: Body, *, spec: SandboxSpec | None = None, run_id: str = "test") -> None:
    env = LocalEnvironment(spec or SandboxSpec(), trial_id=uuid.uuid4().hex[:8], run_id=run_id)
    in_env(env, body)


def in_env(env: Environment, body: Callable[[Environment], Awaitable[None]]) -> None:
    """`body(env)` between the environment's start and its stop."""

    async def go() -> None:
        await env.start()
        try:
            await body(env)
        finally:
            await env.stop()

    asyncio.run(go())


# -- every sandbox path that runs services (tests/test_sandbox_services.py and
# -- tests/security/test_service_isolation.py) ----------------------------------

#: local with the compiled server and with its Python twin; docker with the shell
#: server as the container's init, and through the Engine API alone
SERVICE_PROVIDERS = ("local-compiled", "local-python", "docker-shell", "docker-api")
IMAGE = "debian:bookworm-slim"

#: the sandbox's processes by the listing shell's builtins alone (no fork): its own
#: pid and its parent's (a `timeout` on docker's Engine API path) first, then each
#: process's stat line and its arguments (joined), tab apart
LIST_PROCESSES = (
    'echo "$$ $PPID"; for d in /proc/[0-9]*; do read -r s 2>/dev/null <"$d/stat" || continue; '
    'c=; read -r c 2>/dev/null <"$d/cmdline"; printf "%s\\t%s\\n" "$s" "$c"; done'
)


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    comm: str
    state: str
    #: its arguments run together (the shell's `read` drops the NULs between them)
    args: str


def select_provider(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Set up one of SERVICE_PROVIDERS (`request.param`), skipping (or, in CI,
    failing) where its engine is missing."""
    kind = str(request.param)
    if kind.startswith("local"):
        request.getfixturevalue("need_bwrap")
        if kind == "local-compiled" and native_server() is None:
            if os.environ.get("HELIOS_REQUIRE_BWRAP") == "1":
                pytest.fail("the compiled shell server did not build (a C compiler is required)")
            pytest.skip("no C compiler: the compiled shell server cannot be built")
        monkeypatch.setenv(ENV_SWITCH, "1" if kind == "local-compiled" else "python")
        server_program.cache_clear()
    else:
        request.getfixturevalue("need_docker")
        monkeypatch.setenv("HELIOS_DOCKER_SHELL", "1" if kind == "docker-shell" else "0")
    return kind


@pytest.fixture(params=SERVICE_PROVIDERS)
def provider(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Each of SERVICE_PROVIDERS in turn, set up by `select_provider`: the fixture
    of the modules that import it."""
    yield select_provider(request, monkeypatch)


def provider_env(kind: str, run_id: str = "services", **spec: Any) -> Environment:
    trial = uuid.uuid4().hex[:8]
    if kind.startswith("local"):
        return LocalEnvironment(SandboxSpec(**spec), trial_id=trial, run_id=run_id)
    return DockerEnvironment(SandboxSpec(image=IMAGE, **spec), trial_id=trial, run_id=run_id)


def in_provider(kind: str, body: Callable[[Environment], Awaitable[None]],
                run_id: str = "services", **spec: Any) -> None:  # fmt: skip
    """`body` in a fresh sandbox of `kind` (started on the path `kind` names, then
    always stopped)."""
    env = provider_env(kind, run_id, **spec)

    async def go() -> None:
        await env.start()
        try:
            if isinstance(env, DockerEnvironment):
                assert (env._shell is not None) == (kind == "docker-shell"), kind
            await body(env)
        finally:
            await env.stop()

    try:
        asyncio.run(go())
    finally:
        server_program.cache_clear()


async def processes(env: Environment, user: str | None = None) -> list[Proc]:
    """The sandbox's living processes (as its default user, or `user`, sees them:
    on local each user's commands have a pid namespace of their own), but its init
    (pid 1, and its own `sleep` on docker's Engine API path) and the listing
    itself; zombies left out."""
    listed = await env.exec(LIST_PROCESSES, cwd="/", timeout=60, user=user)
    lines = listed.stdout.splitlines()
    assert listed.ok and lines, listed
    found = []
    for line in lines[1:]:
        stat, _, args = line.partition("\t")
        head, _, rest = stat.rpartition(") ")
        pid, _, comm = head.partition(" (")
        fields = rest.split()
        if pid in (*lines[0].split(), "1") or len(fields) < 3 or fields[0] in ("Z", "X"):
            continue
        if fields[1:3] == ["1", "1"]:
            continue  # the init's own `sleep` (docker's Engine API path)
        found.append(Proc(int(pid), int(fields[1]), comm, fields[0], args))
    return found


def running(found: list[Proc], args: str) -> list[Proc]:
    """The processes whose arguments, run together, hold `args` ("sleep1001")."""
    return [p for p in found if args in p.args]


async def until(check: Callable[[], Awaitable[bool]], what: str, within: float = 60.0) -> None:
    """Wait, with a deadline, for `check` to hold (no fixed sleep): 60 s, as a loaded
    machine (CI, at a load of 25) took over 20 s for an Xvfb to be seen alone."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not await check():
        assert loop.time() < deadline, f"not within {within:g}s: {what}"
        await asyncio.sleep(0.02)


async def program_runs(env: Environment, args: str, user: str | None = None) -> None:
    """Wait until a service's `sh -c 'exec …'` has become its program: until then a
    listing shows only the shell, and a count of the program is off by one."""

    async def seen() -> bool:
        return bool(running(await processes(env, user=user), args))

    await until(seen, f"{args} runs")


async def container_commands(container: str) -> list[str]:
    """The command lines of a container's processes, seen from the host (`docker
    top`): nothing runs inside, so a test watches a command without one of its own
    (and a container not running yet has none)."""
    command = ["docker", "top", container, "-eo", "pid,args"]
    top = await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True)
    return [line.split(None, 1)[-1] for line in top.stdout.splitlines()[1:]]
