"""The Docker provider's calls through the Engine API (`docker.api`): one client per
event loop, closed with its last container; the daemon's refusals, silence and
absence as environment errors; output and downloads bounded."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import aiodocker
import aiohttp
import pytest

import helios.environments.docker.api as _docker_api
from helios._proc import OUTPUT_CAP
from helios.environments.docker import DockerEnvironment
from helios.environments.shell.safe_copy import Bounds, UnsafeDownload
from helios.errors import EnvironmentExecError, EnvironmentUnavailable
from helios.tasks.task import load_task

from .conftest import TaskMaker
from .sandbox_helpers import container_commands, until


@pytest.fixture(autouse=True)
def _through_the_api(monkeypatch: pytest.MonkeyPatch) -> None:
    """These are the Engine API path's tests: no shell server as the init
    (tests/test_docker_shell.py has the server's)."""
    monkeypatch.setenv("HELIOS_DOCKER_SHELL", "0")


def _env(task_dir: Path) -> DockerEnvironment:
    spec = load_task(task_dir).sandbox_spec()
    return DockerEnvironment(spec, trial_id=uuid.uuid4().hex[:8], run_id="api")


@contextlib.asynccontextmanager
async def _running(env: DockerEnvironment) -> AsyncIterator[DockerEnvironment]:
    """The container built and started, and stopped whatever the body does."""
    await env.build()
    await env.start()
    try:
        yield env
    finally:
        await env.stop()


@pytest.mark.usefixtures("need_docker")
def test_containers_of_a_loop_share_one_client_closed_with_the_last(
    make_task: TaskMaker,
) -> None:
    task = make_task("shared")
    first, second = _env(task), _env(task)

    async def go() -> aiodocker.Docker:
        await first.build()
        await asyncio.gather(first.start(), second.start())
        assert first._engine is second._engine
        client = first._engine
        await first.stop()
        assert not client.session.closed  # the second container still uses it
        assert (await second.exec("echo still")).stdout == "still\n"
        await second.stop()
        assert asyncio.get_running_loop() not in _docker_api._clients
        return client

    assert asyncio.run(go()).session.closed


@pytest.mark.usefixtures("need_docker")
def test_the_daemon_s_refusals_are_environment_errors(make_task: TaskMaker) -> None:
    env = _env(make_task("refusals"))

    async def go() -> None:
        async with _running(env):
            with pytest.raises(EnvironmentExecError, match="does not exist"):
                await env.exec("true", user="no-such-user")
            assert env.container is not None
            subprocess.run(["docker", "rm", "-f", env.container], capture_output=True, check=True)
            with pytest.raises(EnvironmentExecError, match="No such container"):
                await env.exec("true")
            with pytest.raises(EnvironmentExecError, match="upload to /x failed"):
                await env.upload(Path(__file__), "/x")

    asyncio.run(go())


@pytest.mark.usefixtures("need_docker")
def test_output_is_capped_and_a_large_download_refused(
    make_task: TaskMaker, tmp_path: Path
) -> None:
    env = _env(make_task("bounds"))

    async def go() -> None:
        async with _running(env):
            flood = await env.exec(f"head -c {OUTPUT_CAP + (1 << 20)} /dev/zero; echo done >&2")
            assert flood.exit_code == 0 and flood.stderr == "done\n"
            assert OUTPUT_CAP <= len(flood.stdout) < OUTPUT_CAP + 1024
            # past the bound and the tar's allowance: refused while streaming, nothing kept
            # larger than every buffer between the daemon and us: the daemon is
            # still streaming (holding the container's lock) when we refuse
            await env.exec("head -c 12000000 /dev/urandom > /big")
            assert env.container is not None
            with pytest.raises(UnsafeDownload, match="larger than 1000 bytes"):
                await _docker_api.download(env._engine, env.container, "/big", tmp_path / "big",
                                           Bounds(max_bytes=1000, max_entries=10))  # fmt: skip
            assert not (tmp_path / "big").exists()
            # the client goes on, and the daemon too: the refused stream was closed
            quick = await asyncio.wait_for(env.exec("echo next"), timeout=30)
            assert quick.stdout == "next\n"

    asyncio.run(go())


def test_a_silent_or_absent_engine_is_an_environment_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    async def silent() -> None:
        with pytest.raises(EnvironmentExecError, match=r"did not answer within 0\.1s"):
            await _docker_api.control("kill", asyncio.sleep(30), timeout=0.1)

    asyncio.run(silent())
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-daemon.sock'}")

    async def absent() -> None:
        client = _docker_api.acquire()
        try:
            with pytest.raises(EnvironmentExecError, match="docker top: Cannot connect"):
                await _docker_api.control("top", _docker_api.process_count(client, "x"))
        finally:
            await _docker_api.release(client)

    asyncio.run(absent())


@pytest.mark.usefixtures("need_docker")
def test_a_command_is_not_held_back_by_a_hundred_long_ones(make_task: TaskMaker) -> None:
    """Each running exec holds a connection to the daemon: with aiohttp's default cap
    of 100 per client, the 101st trial's commands would wait for another's to end."""
    env = _env(make_task("many"))

    async def go() -> str:
        async with _running(env):
            long = [asyncio.create_task(env.exec("sleep 600")) for _ in range(101)]

            async def all_running() -> bool:
                assert env.container is not None
                return (await container_commands(env.container)).count("sleep 600") == 101

            try:
                await until(all_running, "the 101 long commands run at once", within=90)
                quick = await asyncio.wait_for(env.exec("echo through"), timeout=90)
                return quick.stdout
            finally:
                for task in long:
                    task.cancel()
                await asyncio.gather(*long, return_exceptions=True)

    assert asyncio.run(go()) == "through\n"


def _dead_client(tmp_path: Path) -> aiodocker.Docker:
    connector = aiohttp.UnixConnector(str(tmp_path / "no-daemon.sock"), limit=0)
    return aiodocker.Docker(url="unix://localhost", connector=connector)


@pytest.mark.usefixtures("need_docker")
def test_a_container_is_removed_by_the_cli_when_the_api_fails(
    make_task: TaskMaker, tmp_path: Path
) -> None:
    env = _env(make_task("fallback"))

    async def go() -> None:
        await env.build()
        await env.start()
        real, env._client = env._engine, _dead_client(tmp_path)
        try:
            await env.stop()
        finally:
            await _docker_api.release(real)

    asyncio.run(go())
    mine = f"label=helios.trial={env.trial_id}"
    listed = subprocess.run(["docker", "ps", "-aq", "--filter", mine],
                            capture_output=True, text=True, check=True)  # fmt: skip
    assert listed.stdout.split() == []


@pytest.mark.usefixtures("need_docker")
def test_preflight_names_an_unreachable_engine_api(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(_docker_api, "_new_client", lambda: _dead_client(tmp_path))
    with pytest.raises(EnvironmentUnavailable, match="Docker Engine API not reachable"):
        asyncio.run(DockerEnvironment.preflight())
