from __future__ import annotations

import asyncio
import subprocess
import uuid
from pathlib import Path

import pytest

import helios.environments.docker.environment as docker_mod
from helios.environments.docker import DockerEnvironment
from helios.tasks.task import load_task

from .conftest import TaskMaker
from .env_contract import check_contract
from .sandbox_helpers import container_commands, until

pytestmark = pytest.mark.usefixtures("need_docker")


def _env(task_dir: Path, run_id: str = "pytest") -> DockerEnvironment:
    return DockerEnvironment(
        load_task(task_dir).sandbox_spec(), trial_id=uuid.uuid4().hex[:8], run_id=run_id
    )


def _containers(label: str) -> list[str]:
    out = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label={label}"], capture_output=True, text=True
    )
    return out.stdout.split()


def test_contract(make_task: TaskMaker, tmp_path: Path) -> None:
    env = _env(make_task("contract"))

    async def go() -> None:
        await env.build()
        await check_contract(env, tmp_path)

    asyncio.run(go())
    assert _containers(f"helios.trial={env.trial_id}") == []


def test_concurrent_trials_build_once(
    make_task: TaskMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # unique content → a new image hash, so a real build is needed
    task_dir = make_task("buildonce", files={f"f{uuid.uuid4().hex}.txt": "x"})
    builds: list[str] = []
    real_build = docker_mod.ImageBuilds._build

    async def counting(self: docker_mod.ImageBuilds, tag: str, ctx: Path, timeout: float) -> None:
        builds.append(tag)
        await real_build(self, tag, ctx, timeout)

    monkeypatch.setattr(docker_mod.ImageBuilds, "_build", counting)
    envs = [_env(task_dir) for _ in range(5)]

    async def go() -> None:
        await asyncio.gather(*(e.build() for e in envs))

    asyncio.run(go())
    assert len(builds) == 1
    subprocess.run(["docker", "rmi", "-f", envs[0].image], capture_output=True)


def test_limits_labels_and_no_network(make_task: TaskMaker) -> None:
    # said: a task that leaves its network unset gets the public one (Harbor's)
    env = _env(make_task("limits", toml_extra='network_mode = "no-network"\n'),
               run_id="limits-run")  # fmt: skip

    async def go() -> None:
        await env.build()
        await env.start()
        try:
            assert env.container is not None
            info = subprocess.run(
                [
                    "docker",
                    "inspect",
                    "-f",
                    "{{.HostConfig.NetworkMode}} {{.HostConfig.Memory}} {{.HostConfig.NanoCpus}} "
                    '{{index .Config.Labels "helios.managed"}}',
                    env.container,
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            assert info.stdout.split() == ["none", str(256 * 1024 * 1024), "1000000000", "true"]
            assert _containers("helios.run=limits-run") != []
        finally:
            await env.stop()

    asyncio.run(go())
    assert _containers("helios.run=limits-run") == []


def test_stop_removes_container_when_cancelled(make_task: TaskMaker) -> None:
    env = _env(make_task("cancel"), run_id="cancel-run")

    async def trial() -> None:
        await env.build()
        await env.start()
        try:
            await env.exec("sleep 60")
        finally:
            await env.stop()

    async def go() -> None:
        task = asyncio.create_task(trial())

        async def in_its_command() -> bool:
            return env.container is not None and "sleep 60" in await container_commands(
                env.container
            )

        await until(in_its_command, "the trial's `sleep 60` runs in its container", within=120)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    assert _containers("helios.run=cancel-run") == []
