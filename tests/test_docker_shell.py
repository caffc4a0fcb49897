"""The docker provider with Helios's shell server as the container's init
(`docker.shell`): what a hostile agent inside can and cannot do to it, `docker
exec`'s semantics kept (users, background processes, timeouts), and the
container's end with its stream (kill -9 of Helios included)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import helios.environments.docker.api as _docker_api
import helios.environments.docker.shell as _docker_shell
from helios.environments.docker import DockerEnvironment
from helios.errors import EnvironmentExecError
from helios.tasks.task import load_task

from .conftest import TaskMaker
from .sandbox_helpers import container_commands, until
from .waiting import wait_until

pytestmark = pytest.mark.usefixtures("need_docker")

#: the container's processes, by the counting shell alone (a glob, no fork):
#: /proc lists exactly the container's pid namespace
COUNT = "set -- /proc/[0-9]*; echo $#"
#: the pids limit of the container a forker fills
PIDS = 64


def _env(task_dir: Path) -> DockerEnvironment:
    spec = load_task(task_dir).sandbox_spec()
    return DockerEnvironment(spec, trial_id=uuid.uuid4().hex[:8], run_id="shell")


@contextlib.asynccontextmanager
async def _running(env: DockerEnvironment) -> AsyncIterator[DockerEnvironment]:
    await env.build()
    await env.start()
    try:
        assert env._shell is not None, "the shell server is not the container's init"
        yield env
    finally:
        await env.stop()


async def _others(env: DockerEnvironment) -> int:
    counted = await env.exec(COUNT)
    return int(counted.stdout.strip()) - 2  # pid 1 and the counting sh


async def _none_other(env: DockerEnvironment) -> bool:
    return await _others(env) == 0


async def _runs(env: DockerEnvironment, *commands: str) -> bool:
    """Whether each of `commands` (a command line) runs in the container now, seen
    from the host: the init's shell stays free for the command under test."""
    assert env.container is not None
    return set(commands) <= set(await container_commands(env.container))


def _listed(trial_id: str) -> list[str]:
    mine = f"label=helios.trial={trial_id}"
    listed = subprocess.run(["docker", "ps", "-aq", "--filter", mine],
                            capture_output=True, text=True, check=True)  # fmt: skip
    return listed.stdout.split()


def test_the_agent_can_neither_signal_trace_nor_replace_the_init(make_task: TaskMaker) -> None:
    env = _env(make_task("init"))

    async def go() -> None:
        async with _running(env):
            init = await env.exec("tr '\\0' ' ' < /proc/1/cmdline")
            assert init.stdout.startswith("/.helios-shell --container"), init
            attacks = await env.exec(
                "kill -KILL 1; kill -TERM 1; kill -INT 1; kill -USR1 1; "
                "echo x > /.helios-shell || echo not-writable; "
                "cat /proc/1/environ > /dev/null || echo no-environ; "
                "readlink /proc/1/fd/0 || echo no-fd; "
                "mount -o remount,rw /.helios-shell 2>/dev/null || echo no-remount"
            )
            for refused in ("not-writable", "no-environ", "no-fd", "no-remount"):
                assert refused in attacks.stdout, attacks
            # the init is still there and still serving
            assert (await env.exec("echo alive")).stdout == "alive\n"

    asyncio.run(go())


def test_processes_live_between_commands_until_stop_processes_kills_all(
    make_task: TaskMaker,
) -> None:
    env = _env(make_task("bg", toml_extra=f"pids = {PIDS}\n"))

    async def go() -> None:
        async with _running(env):
            started = await env.exec(
                "sleep 300 & setsid sleep 301 & nohup sh -c 'sleep 302' >/dev/null 2>&1 & "
                "echo started"
            )
            assert started.stdout == "started\n"
            await until(lambda: _runs(env, "sleep 300", "sleep 301", "sleep 302"),
                        "the command's three sleeps run after it")  # fmt: skip
            assert await _others(env) >= 3  # as with `docker exec`, they outlive it
            # a forker racing the kill, held to the container's pids limit
            await env.exec("(while :; do sleep 1000 & done) >/dev/null 2>&1 &")

            async def at_the_limit() -> bool:  # a fork or two in flight aside
                assert env.container is not None
                return len(await container_commands(env.container)) >= PIDS - 2

            await until(at_the_limit, f"the forker filled the container's {PIDS} pids")
            began = time.monotonic()
            await env.stop_processes()
            assert time.monotonic() - began < 10
            assert await _others(env) == 0
            # and the container still serves the verifier, as every user
            assert (await env.exec("id -u", user="nobody")).stdout == "65534\n"

    asyncio.run(go())


def test_users_are_those_docker_exec_gives(make_task: TaskMaker) -> None:
    """Each `-u` form through the init and through `docker exec` (the Engine API)
    gives the same identity, groups and HOME."""
    env = _env(make_task("users"))

    async def go() -> None:
        async with _running(env):
            made = await env.exec(
                "echo 'alice:x:1500:1500::/home/alice:/bin/sh' >> /etc/passwd && "
                "echo 'alice:x:1500:' >> /etc/group && echo 'team:x:1600:bob,alice' >> /etc/group"
            )
            assert made.ok, made
            assert env.container is not None
            for user in ("alice", "1500", "alice:team", "nobody", "1234", "1234:5", "0", "root"):
                ours = await env.exec("id; echo $HOME", user=user)
                theirs = await _docker_api.exec_command(
                    env._engine, env.container, ["sh", "-c", "id; echo $HOME"], user=user,
                    workdir="/app", env={}, timeout=60,
                )  # fmt: skip
                assert ours.stdout == theirs.stdout.decode(), user
            assert "groups=1500(alice),1600(team)" in (await env.exec("id", user="alice")).stdout
            with pytest.raises(EnvironmentExecError, match="does not exist"):
                await env.exec("true", user="mallory")
            no_group = await env.exec("true", user="alice:nogroup-here")
            assert no_group.exit_code == 126 and "unable to find group" in no_group.stderr

    asyncio.run(go())


def test_the_image_user_is_the_default_and_root_is_asked_for(make_task: TaskMaker) -> None:
    task = make_task("image-user")
    dockerfile = task / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "USER nobody\n")
    env = _env(task)

    async def go() -> None:
        async with _running(env):
            assert (await env.exec("id -un")).stdout == "nobody\n"
            assert (await env.exec("id -u", user=0)).stdout == "0\n"
            assert await env.default_owner() == "nobody"

    asyncio.run(go())


def test_a_cancelled_command_runs_on_until_the_processes_are_stopped(
    make_task: TaskMaker,
) -> None:
    """An agent's timeout cancels its command: the container must stay for the
    verifier, and the command must not run into it."""
    env = _env(make_task("cancel"))

    async def go() -> None:
        async with _running(env):
            long = asyncio.ensure_future(env.exec("sleep 300; echo late > /app/late"))
            await until(lambda: _runs(env, "sleep 300"), "the command's `sleep 300` runs")
            long.cancel()
            with pytest.raises(asyncio.CancelledError):
                await long
            assert env._shell is not None and env._shell.busy
            # meanwhile commands still run (through the Engine API)
            assert (await env.exec("echo meanwhile")).stdout == "meanwhile\n"
            await env.stop_processes()
            assert not env._shell.busy
            assert await _others(env) == 0
            late = await env.exec("test -e /app/late && echo late || echo none")
            assert late.stdout == "none\n"

    asyncio.run(go())


def test_timeouts_and_output_caps_hold(make_task: TaskMaker) -> None:
    env = _env(make_task("bounds"))

    async def go() -> None:
        async with _running(env):
            began = time.monotonic()
            slow = await env.exec("echo before; sleep 60", timeout=1)
            assert slow.timed_out and slow.stdout == "before\n"
            assert time.monotonic() - began < 10
            # the timed-out command's session is gone (its killed orphans may show as
            # zombies until the init reaps them, which it does as each command ends)
            await until(lambda: _none_other(env), "the timed-out command's processes reaped")
            flood = await env.exec("head -c 30000000 /dev/zero; echo done >&2")
            assert flood.exit_code == 0 and flood.stderr == "done\n"
            assert len(flood.stdout) < 30_000_000

    asyncio.run(go())


def test_a_container_removed_under_a_command_is_an_environment_error(
    make_task: TaskMaker,
) -> None:
    env = _env(make_task("removed"))

    async def go() -> None:
        async with _running(env):
            assert env.container is not None
            command = asyncio.ensure_future(env.exec("sleep 60"))
            await until(lambda: _runs(env, "sleep 60"), "the command's `sleep 60` runs")
            await asyncio.to_thread(subprocess.run, ["docker", "rm", "-f", env.container],
                                    capture_output=True)  # fmt: skip
            with pytest.raises(EnvironmentExecError, match="stopped"):
                await command
            with pytest.raises(EnvironmentExecError, match="stopped"):
                await env.exec("true")

    asyncio.run(go())
    assert _listed(env.trial_id) == []


_HOLDER = """
import asyncio, sys
from helios.environments.docker import DockerEnvironment
from helios.tasks.task import load_task

async def main():
    env = DockerEnvironment(load_task(sys.argv[1]).sandbox_spec(), trial_id=sys.argv[2],
                            run_id="shell")
    await env.build()
    await env.start()
    await env.exec("sleep 1000 >/dev/null 2>&1 &")
    print("ready", flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


def test_kill_9_of_helios_ends_and_removes_its_containers(make_task: TaskMaker) -> None:
    task = make_task("orphan")
    trial = uuid.uuid4().hex[:8]
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(task), trial],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "ready\n"
        assert len(_listed(trial)) == 1
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    # `--rm`: the daemon removes it as soon as its init exits on the stream's end (the
    # wait's 20 s are slack for a loaded daemon)
    wait_until(lambda: _listed(trial) == [], "the container ended with the Helios that started it")


def test_an_engine_that_cannot_run_the_server_falls_back_to_the_engine_api(
    make_task: TaskMaker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    not_runnable = tmp_path / "server"
    not_runnable.write_text("not a program\n")  # mode 644: the engine cannot exec it
    monkeypatch.setattr(_docker_shell, "static_server", lambda: not_runnable)
    monkeypatch.setattr(_docker_shell, "unusable", None)
    env = _env(make_task("fallback"))

    async def go() -> None:
        await env.build()
        await env.start()
        try:
            assert env._shell is None  # the Engine API path
            assert (await env.exec("echo through the api")).stdout == "through the api\n"
            await env.stop_processes()
        finally:
            await env.stop()

    with caplog.at_level("WARNING"):
        asyncio.run(go())
    assert _docker_shell.unusable is not None and "/.helios-shell" in _docker_shell.unusable
    assert "cannot be a container's init here" in caplog.text
    assert _listed(env.trial_id) == []
