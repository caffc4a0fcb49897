"""`--provider daytona` with the real SDK against the loopback Daytona
(`helios.testing.daytona_fake`, each sandbox a docker container): the provider
contract, a task batch, a create cancelled half-way, quota errors, an API that
cannot be reached, `helios cleanup` by label, and the key kept out of every output."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

import helios.environments.daytona.retry as _retry
from helios.environments.daytona import DaytonaEnvironment
from helios.environments.daytona.client import SDK_VERSION
from helios.environments.shell.safe_copy import DownloadMissing, UnsafeDownload
from helios.environments.spec import SandboxSpec
from helios.errors import EnvironmentStartError, EnvironmentUnavailable
from helios.tasks.runner import ParallelRunner
from helios.testing.daytona_fake import DaytonaFake

from .cli_inprocess import helios_inprocess
from .conftest import TaskMaker, helios_cmd
from .daytona_helpers import KEY, daytona
from .env_contract import check_contract
from .sandbox_helpers import until
from .waiting import wait_until

__all__ = ["daytona"]  # the fixture, used by name

IMAGE = "debian:bookworm-slim"


def _env(run_id: str = "dtn", **spec: object) -> DaytonaEnvironment:
    values: dict[str, object] = {"image": IMAGE, **spec}
    return DaytonaEnvironment(SandboxSpec(**values),  # type: ignore[arg-type]
                              trial_id=uuid.uuid4().hex[:8], run_id=run_id)  # fmt: skip


def test_the_sdk_is_the_pinned_version() -> None:
    from importlib.metadata import version

    assert version("daytona") == SDK_VERSION
    pyproject = (Path(__file__).parent.parent / "pyproject.toml").read_text()
    assert f'daytona = ["daytona=={SDK_VERSION}"]' in pyproject


def test_contract(daytona: DaytonaFake, tmp_path: Path) -> None:
    asyncio.run(check_contract(_env(), tmp_path))
    wait_until(lambda: not daytona.live() and not daytona.containers(), "the sandbox deleted")


def test_resources_network_env_and_labels_reach_daytona(daytona: DaytonaFake) -> None:
    env = _env("dtn-spec", cpus=1.5, memory_mb=1536, storage_mb=3000, network=False,
               env={"TASK_VAR": "v1"})  # fmt: skip

    async def go() -> None:
        await env.start()
        try:
            seen = await env.exec('echo "$TASK_VAR"')
            assert seen.stdout == "v1\n"
        finally:
            await env.stop()

    asyncio.run(go())
    (created,) = [r.body for r in daytona.received if r.path == "/api/sandbox" and r.body]
    assert (created["cpu"], created["memory"], created["disk"]) == (2, 2, 3)
    assert created["networkBlockAll"] is True
    assert created["labels"]["helios.run"] == "dtn-spec"
    assert created["labels"]["helios.instance"] == env.instance
    assert created["buildInfo"]["dockerfileContent"].strip() == f"FROM {IMAGE}"


def test_a_dockerfile_with_copied_files_is_built(daytona: DaytonaFake,
                                                 make_task: TaskMaker) -> None:  # fmt: skip
    from helios.tasks.task import load_task

    task = load_task(make_task("copying", files={"data.txt": "from the task\n"}))
    env = DaytonaEnvironment(task.sandbox_spec(), trial_id="t", run_id="dtn-build")

    async def go() -> None:
        await env.start()
        try:
            seen = await env.exec("cat /app/data.txt")
            assert (seen.stdout, seen.exit_code) == ("from the task\n", 0)
        finally:
            await env.stop()

    asyncio.run(go())
    (created,) = [r.body for r in daytona.received if r.path == "/api/sandbox" and r.body]
    assert created["buildInfo"]["contextHashes"]  # the copied file went as a context


def test_an_oracle_batch_passes(daytona: DaytonaFake, make_task: TaskMaker, tmp_path: Path) -> None:
    make_task("solved", solve="echo ok > /app/out.txt\n",
              test="grep -qx ok /app/out.txt && echo 1 > /logs/verifier/reward.txt "
              "|| echo 0 > /logs/verifier/reward.txt\n")  # fmt: skip
    make_task("failed", solve="true\n", test="echo 0 > /logs/verifier/reward.txt\n")
    runner = ParallelRunner(tmp_path / "tasks", agent="oracle", provider="daytona",
                            output_dir=tmp_path / "out", show_progress=False)  # fmt: skip
    batch = asyncio.run(runner.run())
    assert (batch.passed, batch.failed) == (1, 1), batch.results
    wait_until(lambda: not daytona.live(), "every sandbox deleted")
    # the key is in no file the run wrote (its run.json records the URL, not the key)
    assert runner.run_dir is not None
    for path in runner.run_dir.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    recorded = json.loads((runner.run_dir / "run.json").read_text())
    assert "DAYTONA_API_KEY" not in json.dumps(recorded)
    assert daytona.api_url in json.dumps(recorded)


def test_a_cancelled_create_leaves_no_sandbox(daytona: DaytonaFake) -> None:
    daytona.start_delay = 2.0
    env = _env("dtn-cancel")

    async def go() -> None:
        start = asyncio.ensure_future(env.start())

        async def accepted() -> bool:
            return daytona.creates > 0

        await until(accepted, "Daytona accepted the create")
        start.cancel()
        with pytest.raises(asyncio.CancelledError):
            await start

    asyncio.run(go())
    assert daytona.creates == 1
    # the create ran to its end, then what it made was deleted
    wait_until(lambda: not daytona.live() and not daytona.containers(), "no sandbox left",
               within=60)  # fmt: skip


def test_a_quota_error_waits_then_succeeds(daytona: DaytonaFake,
                                           monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setattr(_retry, "QUOTA_BASE_DELAY", 0.05)
    daytona.quota_failures = 3
    env = _env("dtn-quota")

    async def go() -> None:
        await env.start()
        try:
            assert (await env.exec("echo up")).stdout == "up\n"
        finally:
            await env.stop()

    asyncio.run(go())
    posts = [r for r in daytona.received if r.path == "/api/sandbox" and r.body]
    assert len(posts) == 4 and daytona.creates == 1


def test_a_refused_create_fails_at_once(daytona: DaytonaFake) -> None:
    """Not a quota: a 400 fails the trial with Daytona's message, no retry."""
    daytona.set_faults([400])

    async def go() -> None:
        with pytest.raises(EnvironmentStartError, match="injected 400"):
            await _env("dtn-bad").start()

    asyncio.run(go())


def test_a_transient_error_is_retried(daytona: DaytonaFake) -> None:
    daytona.set_faults([503, 502])
    env = _env("dtn-transient")

    async def go() -> None:
        await env.start()
        await env.stop()

    asyncio.run(go())
    assert daytona.creates == 1


def test_an_unreachable_api_is_one_clear_line(
    daytona: DaytonaFake, closed_port: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    make_task: TaskMaker,
) -> None:  # fmt: skip
    url = f"http://127.0.0.1:{closed_port}/api"
    monkeypatch.setenv("DAYTONA_API_URL", url)

    async def go() -> None:
        with pytest.raises(EnvironmentUnavailable) as caught:
            await DaytonaEnvironment.preflight()
        message = str(caught.value)
        assert message.count("\n") == 0 and url in message and "DAYTONA_API_URL" in message

    asyncio.run(go())
    make_task("unreachable")
    done = helios_inprocess("batch", str(tmp_path / "tasks"), "--provider", "daytona",
                            "--agent", "oracle", "-o", "out", cwd=tmp_path)  # fmt: skip
    assert done.returncode != 0
    assert f"Daytona API not reachable at {url}" in done.stderr + done.stdout
    assert "Traceback" not in done.stderr and KEY not in done.stderr + done.stdout


def test_no_key_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DAYTONA_API_KEY", raising=False)
    with pytest.raises(EnvironmentUnavailable, match="DAYTONA_API_KEY is not set"):
        asyncio.run(DaytonaEnvironment.preflight())


def _started(run_id: str) -> DaytonaEnvironment:
    """A sandbox left running, as a killed batch leaves it (its client closed)."""
    env = _env(run_id)

    async def go() -> None:
        await env.start()
        await env._client.close()

    asyncio.run(go())
    return env


def test_cleanup_removes_helios_sandboxes_by_label(daytona: DaytonaFake, tmp_path: Path) -> None:
    left = _started("dtn-left")
    other = _started("dtn-other")
    # in-process (tests/cli_inprocess.py); the two below set DOCKER_HOST, which the fake
    # (in this process) also reads to remove its containers: processes of their own
    done = helios_inprocess("cleanup", "--run", "dtn-left", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "1 Daytona sandbox(es)" in " ".join(done.stdout.split())
    live = {b.id for b in daytona.live() if not b.state.startswith("destr")}
    assert left.sandbox_id not in live and other.sandbox_id in live
    # a live owner (this process) keeps its sandboxes from a plain cleanup; --force takes them.
    # Daytona's alone: --force would also take every live container and local sandbox on
    # this machine, those of the tests running beside this one (pytest-xdist)
    only_daytona = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock",
                    "HELIOS_SANDBOX_DIR": str(tmp_path / "no-sandboxes")}  # fmt: skip
    (tmp_path / "no-sandboxes").mkdir()
    subprocess.run(helios_cmd("cleanup"), capture_output=True, timeout=120, env=only_daytona,
                   check=True)  # fmt: skip
    assert other.sandbox_id in {b.id for b in daytona.live() if not b.state.startswith("destr")}
    subprocess.run(helios_cmd("cleanup", "--force"), capture_output=True, timeout=120,
                   env=only_daytona, check=True)  # fmt: skip
    wait_until(lambda: not daytona.live() and not daytona.containers(), "every sandbox deleted")


def test_a_docker_cleanup_elsewhere_leaves_the_fakes_containers(daytona: DaytonaFake) -> None:
    """The fake's sandboxes are docker containers owned by the fake's process: another
    test's `helios cleanup` (docker's orphans) must not take them mid-trial (it did when
    they had no owner, as an older Helios's leftovers)."""
    from helios.environments.docker.cleanup import managed_containers

    env = _env("dtn-owned")

    async def go() -> None:
        await env.start()
        try:
            short = set(daytona.containers())
            mine = [c for c in await managed_containers() if c.id[:12] in short]
            assert mine and len(mine) == len(short)
            assert not any(c.removable(None, force=False) for c in mine)
            assert all(c.removable(None, force=True) for c in mine)  # --force takes them
        finally:
            await env.stop()

    asyncio.run(go())


def test_cleanup_without_keys_says_nothing_of_daytona(tmp_path: Path) -> None:
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("DAYTONA_")}
    done = helios_inprocess("cleanup", "--run", "no-such-run", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert "daytona" not in (done.stdout + done.stderr).lower()


def test_downloads_are_checked_on_the_host(daytona: DaytonaFake, tmp_path: Path) -> None:
    """The other providers' checks: a link is skipped (never followed), a tree past
    the bound is refused before it is archived, a missing path says so."""
    env = _env("dtn-down")

    async def go() -> None:
        await env.start()
        try:
            made = await env.exec(
                "mkdir -p /out/sub && echo A > /out/a.txt && ln -s /etc/passwd /out/link && "
                "mkfifo /out/fifo && truncate -s 1500M /big/huge 2>/dev/null || "
                "{ mkdir -p /big && truncate -s 1500M /big/huge; }", cwd="/",
            )  # fmt: skip
            assert made.ok, made
            skipped = await env.download("/out", tmp_path / "out")
            assert (tmp_path / "out" / "a.txt").read_text() == "A\n"
            assert not (tmp_path / "out" / "link").exists()
            assert any("link" in s for s in skipped) and any("fifo" in s for s in skipped)
            with pytest.raises(UnsafeDownload, match="larger than"):
                await env.download("/big", tmp_path / "big")
            assert not (tmp_path / "big").exists()
            with pytest.raises(DownloadMissing):
                await env.download("/nowhere", tmp_path / "nowhere")
            # nothing staged is left in the sandbox
            left = await env.exec("ls -a /tmp | grep -c -e -upload- -e -download- || true",
                                  cwd="/")  # fmt: skip
            assert left.stdout.strip() == "0"
        finally:
            await env.stop()

    asyncio.run(go())


def test_a_wrong_key_is_one_clear_line(daytona: DaytonaFake,
                                       monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setenv("DAYTONA_API_KEY", "not-the-key-at-all")
    with pytest.raises(EnvironmentUnavailable) as caught:
        asyncio.run(DaytonaEnvironment.preflight())
    assert str(caught.value) == (
        f"Daytona refused the key at {daytona.api_url} (401): check DAYTONA_API_KEY"
    )
    assert "not-the-key-at-all" not in str(caught.value)


def test_the_fakes_answers_are_what_the_sdks_models_take(daytona: DaytonaFake) -> None:
    """The fake's shapes, validated by the SDK's own generated models (strict types):
    a field renamed or retyped on either side fails here, not only deep in a trial."""
    from daytona_api_client_async import ListSandboxesResponse, Sandbox, SandboxListItem
    from daytona_toolbox_api_client_async import ExecuteResponse

    from helios.testing.daytona_fake import FakeSandbox

    box = FakeSandbox(id="s1", name="s1", user="root", env={"A": "1"}, labels={"l": "v"},
                      cpu=1, memory=1, disk=3, network_block_all=True, target="us",
                      build={"dockerfileContent": f"FROM {IMAGE}\n"})  # fmt: skip
    shape = daytona._dto(box)
    sandbox = Sandbox.from_dict(shape)
    assert sandbox is not None and sandbox.network_block_all and sandbox.state == "creating"
    assert SandboxListItem.from_dict(shape) is not None
    listed = ListSandboxesResponse.from_dict({"items": [shape], "nextCursor": None})
    assert listed is not None and listed.items[0].labels == {"l": "v"}
    answer = ExecuteResponse.from_dict({"exitCode": 3, "result": "out"})
    assert answer is not None and (answer.exit_code, answer.result) == (3, "out")
    with pytest.raises(ValueError):  # the models are strict: a missing field is refused
        Sandbox.from_dict({k: v for k, v in shape.items() if k != "toolboxProxyUrl"})


def test_a_cancel_during_a_quota_wait_stops_at_once(
    daytona: DaytonaFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between tries nothing is being made: Ctrl-C does not wait out the back-off."""
    monkeypatch.setattr(_retry, "QUOTA_BASE_DELAY", 120.0)
    daytona.quota_failures = 1
    env = _env("dtn-quota-cancel")

    async def go() -> float:
        start = asyncio.ensure_future(env.start())

        async def refused() -> bool:
            return any(r.path == "/api/sandbox" and r.body for r in daytona.received)

        await until(refused, "the quota error")
        cancelled = asyncio.get_running_loop().time()
        start.cancel()
        with pytest.raises(asyncio.CancelledError):
            await start
        return asyncio.get_running_loop().time() - cancelled

    assert asyncio.run(go()) < 10  # not the minute of back-off
    assert daytona.creates == 0 and not daytona.live()


def test_a_cancel_while_a_refused_create_is_in_flight_does_not_back_off(
    daytona: DaytonaFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C lands while the create's request is on its way (the API answers late);
    the answer is a quota error: the create is not tried again after the back-off,
    the cancel ends as soon as the answer is in (CI once waited 53 s for it)."""
    monkeypatch.setattr(_retry, "QUOTA_BASE_DELAY", 120.0)
    daytona.quota_failures = 1
    daytona.latency = 1.0  # every answer, the create's included, comes a second late
    env = _env("dtn-quota-in-flight")

    async def go() -> float:
        start = asyncio.ensure_future(env.start())

        async def sent() -> bool:
            return any(r.path == "/api/sandbox" and r.body for r in daytona.received)

        await until(sent, "the create's request")
        cancelled = asyncio.get_running_loop().time()
        start.cancel()
        with pytest.raises(asyncio.CancelledError):
            await start
        return asyncio.get_running_loop().time() - cancelled

    assert asyncio.run(go()) < 20  # a few late answers, not two minutes of back-off
    creates = [r for r in daytona.received if r.path == "/api/sandbox" and r.body]
    assert len(creates) == 1 and daytona.creates == 0 and not daytona.live()


def test_the_working_directory_is_the_images(daytona: DaytonaFake) -> None:
    """A ready image's WORKDIR, which no Dockerfile text gives: Daytona reads it
    from the image (`get_work_dir`), as Harbor's Daytona runs there."""
    tag = "helios-test-daytona-workdir:1"
    built = subprocess.run(["docker", "build", "-q", "-t", tag, "-"], capture_output=True,
                           input=f"FROM {IMAGE}\nWORKDIR /srv/inside\n".encode(),
                           timeout=300)  # fmt: skip
    assert built.returncode == 0, built.stderr
    env = _env("dtn-workdir", image=tag, workdir_from_image=True)

    async def go() -> str:
        await env.start()
        try:
            return (await env.exec("pwd")).stdout.strip()
        finally:
            await env.stop()

    assert (asyncio.run(go()), env.workdir) == ("/srv/inside", "/srv/inside")
    assert any(r.path.endswith("/work-dir") for r in daytona.received)


def test_a_task_whose_image_has_an_entrypoint_is_refused_in_one_line() -> None:
    from helios.tasks.features import unsupported
    from helios.tasks.task import load_task

    fixtures = Path(__file__).parent / "fixtures" / "harbor_meaning"
    (found,) = unsupported(load_task(fixtures / "hello-healthcheck"), DaytonaEnvironment)
    assert str(found) == (
        "unsupported: environment/Dockerfile ENTRYPOINT (the daytona provider does not run an "
        "image's ENTRYPOINT (its daemon is the sandbox's first process); docker runs it, as "
        "Harbor does)"
    )
    assert unsupported(load_task(fixtures / "no-entrypoint"), DaytonaEnvironment) == []
