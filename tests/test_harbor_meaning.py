"""Harbor's meaning of a task's image on docker: its ENTRYPOINT runs (as a service
of Helios's init, with `[environment.env]`), and its working directory is the
built image's. The task folders are tests/fixtures/harbor_meaning (see its README)."""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import uuid
from pathlib import Path

import pytest

from helios.environments.docker import DockerEnvironment
from helios.environments.docker.image_config import ENTRYPOINT_SERVICE, ImageConfig
from helios.errors import EnvironmentUnhealthy
from helios.tasks.task import load_task

from .harbor_tasks import records_of, run_tasks

FIXTURES = Path(__file__).parent / "fixtures" / "harbor_meaning"


def test_image_config_reads_docker_and_gives_harbors_command() -> None:
    config = ImageConfig.parse(
        '{"User":"app","WorkingDir":"/srv/x y","Entrypoint":["/start.sh","--flag"],'
        '"Cmd":["serve"],"Env":["A=1"]}'
    )
    assert (config.user, config.workdir, config.cmd) == ("app", "/srv/x y", ("serve",))
    # Harbor's main service: the ENTRYPOINT with `sh -c "sleep infinity"`, not the CMD
    assert config.entrypoint_command() == (
        "cd -- '/srv/x y' && exec /start.sh --flag sh -c 'sleep infinity'"
    )
    assert ImageConfig.parse('{"Cmd":["bash"]}').entrypoint_command() is None
    assert ImageConfig.parse("null") == ImageConfig()


def test_without_an_image_the_dockerfile_text_gives_the_workdir() -> None:
    """No image on local: the WORKDIR the Dockerfile's text gives (`tasks.dockerfile`,
    ARG and ENV expanded), else /app; docker reads the built image's."""
    spec = load_task(FIXTURES / "hello-healthcheck").sandbox_spec()
    assert spec.workdir == "/app" and spec.workdir_from_image and spec.image_entrypoint
    assert load_task(FIXTURES / "workdir-from-image").workdir == "/srv/project/src"


@pytest.mark.usefixtures("need_bwrap")
def test_local_runs_the_workdir_case_from_the_dockerfiles_text(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "workdir-from-image", tmp_path / "tasks" / "workdir-from-image")
    (record,) = records_of(run_tasks(tmp_path / "tasks", tmp_path / "out", "local")).values()
    assert record["reward"] == 1.0, record["error"]


@pytest.mark.usefixtures("need_docker")
def test_harbors_entrypoint_and_workdir_cases_give_harbors_rewards(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    for name in ("hello-healthcheck", "workdir-from-image", "no-entrypoint"):
        shutil.copytree(FIXTURES / name, tasks / name)
    records = records_of(run_tasks(tasks, tmp_path / "out", "docker", n_attempts=1))
    for name in ("hello-healthcheck", "workdir-from-image", "no-entrypoint"):
        assert records[name]["reward"] == 1.0, (name, records[name]["error"])
    nop_tasks = tmp_path / "nop"
    shutil.copytree(FIXTURES / "environment-env-single", nop_tasks / "environment-env-single")
    (record,) = records_of(run_tasks(nop_tasks, tmp_path / "out-nop", "docker",
                                     agent="nop")).values()  # fmt: skip
    assert record["reward"] == 1.0, record["error"]


@pytest.mark.usefixtures("need_docker")
@pytest.mark.parametrize("path", ["shell", "engine-api"])
def test_the_entrypoint_outlives_the_agents_processes(
    tmp_path: Path, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A service of the init, on both paths (the shell server's, and the Engine API's
    of a remote daemon): the stop of the agent's processes (before the verifier)
    spares it, and it saw the task's variables and Harbor's command."""
    if path == "engine-api":
        monkeypatch.setenv("HELIOS_DOCKER_SHELL", "0")
    shutil.copytree(FIXTURES / "environment-env-single", tmp_path / "env")
    env = DockerEnvironment(load_task(tmp_path / "env").sandbox_spec(),
                            trial_id=uuid.uuid4().hex[:8], run_id="pytest")  # fmt: skip

    async def go() -> None:
        await env.build()
        await env.start()
        try:
            assert env.workdir == "/app"
            assert await env.service_running(ENTRYPOINT_SERVICE)
            await env.exec("sleep 600 >/dev/null 2>&1 &")
            await env.stop_processes()
            assert await env.service_running(ENTRYPOINT_SERVICE)
            left = await env.exec("cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
            assert "sleep 600" not in left.stdout and "sleep infinity" in left.stdout
            seen = await env.exec("for _ in $(seq 100); do [ -e /tmp/entrypoint.txt ] && break; "
                                  "sleep 0.1; done; cat /tmp/entrypoint.txt")  # fmt: skip
            assert seen.stdout.strip() == "hello from task.toml|image-env|sh -c sleep infinity|/app"
        finally:
            await env.stop()

    asyncio.run(go())


@pytest.mark.usefixtures("need_docker")
@pytest.mark.parametrize(("path", "status"), [("shell", "3"), ("shell", "0"), ("engine-api", "3")])
def test_an_entrypoint_that_exits_is_an_infrastructure_error(
    tmp_path: Path, path: str, status: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Harbor's container stops when its ENTRYPOINT exits, with any status: the
    start fails (not tried again), naming the ENTRYPOINT and quoting its last lines."""
    if path == "engine-api":
        monkeypatch.setenv("HELIOS_DOCKER_SHELL", "0")
    shutil.copytree(FIXTURES / "entrypoint-exits", tmp_path / "task")
    spec = load_task(tmp_path / "task").sandbox_spec()
    spec = dataclasses.replace(spec, env={**spec.env, "EXIT_WITH": status})
    env = DockerEnvironment(spec, trial_id=uuid.uuid4().hex[:8], run_id="pytest")

    async def go() -> str:
        await env.build()
        try:
            with pytest.raises(EnvironmentUnhealthy) as caught:
                await env.start()
            return str(caught.value)
        finally:
            await env.stop()

    said = asyncio.run(go())
    assert "ENTRYPOINT (/entrypoint.sh sh -c 'sleep infinity') exited before the agent" in said
    assert "starting the block server / cannot read /etc/blocklist.conf" in said
