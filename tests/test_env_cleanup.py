"""Sandboxes belong to their run (issue 9): container names never collide, Helios
never removes a container that is not its own, and `cleanup` spares batches
whose process is alive unless forced. Teardown errors do not change a reward."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from helios import ParallelRunner
from helios.environments.docker import DockerEnvironment
from helios.environments.docker.cleanup import Container
from helios.environments.local import LocalEnvironment
from helios.environments.local.cleanup import sandbox_processes
from helios.environments.local.root import OWNER_FILE, mounts_under, read_owner, sandbox_base
from helios.environments.shell.owner import Owner, current_owner
from helios.environments.spec import SandboxSpec
from helios.errors import EnvironmentExecError, EnvironmentStartError

from .conftest import TaskMaker, helios_cmd
from .sandbox_helpers import until

DEAD = Owner(current_owner().host, 2**22 + 12345, 1)
SPEC = SandboxSpec(image="debian:bookworm-slim")


def _docker(*args: str) -> str:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=120)
    return done.stdout.strip()


def _container(name: str, run: str, owner: Owner | None) -> str:
    labels = ["--label", "helios.managed=true", "--label", f"helios.run={run}"]
    if owner is not None:
        labels += ["--label", f"helios.owner={owner.label()}"]
    return _docker("run", "-d", "--name", name, *labels, "--network", "none",
                   "debian:bookworm-slim", "sleep", "infinity")  # fmt: skip


def _exists(container: str) -> bool:
    return bool(_docker("ps", "-aq", "--filter", f"id={container}"))


def test_owner_labels_round_trip_and_tell_dead_from_alive() -> None:
    me = current_owner()
    assert Owner.parse(me.label()) == me and me.alive()
    assert not DEAD.alive()
    assert not Owner(me.host, me.pid, me.start + 1).alive()  # a reused pid is not the owner
    assert Owner("another-host", 1, 1).alive()  # cannot be checked from here: kept


def test_removable_containers() -> None:
    live, dead = Container("a", "r1", current_owner(), "i"), Container("b", "r2", DEAD, "j")
    legacy = Container("c", "r3", None, "")
    assert [c.removable(None, False) for c in (live, dead, legacy)] == [False, True, True]
    assert live.removable(None, True) and live.removable("r1", False)
    assert not dead.removable("r1", False)


@pytest.mark.usefixtures("need_docker")
def test_container_names_never_collide() -> None:
    a = DockerEnvironment(SPEC, trial_id="t1", run_id="0123456789abcdef")
    b = DockerEnvironment(SPEC, trial_id="t1", run_id="0123456789abcdef")
    assert a.container_name != b.container_name
    assert "0123456789abcdef" in a.container_name


@pytest.mark.usefixtures("need_docker")
def test_a_failed_start_never_removes_another_runs_container() -> None:
    env = DockerEnvironment(SPEC, trial_id=uuid.uuid4().hex[:8], run_id="mine")
    foreign = _container(env.container_name, "someone-else", current_owner())
    try:
        with pytest.raises(EnvironmentStartError):
            asyncio.run(env.start())  # the name is taken
        asyncio.run(env.stop())
        assert _exists(foreign)
    finally:
        _docker("rm", "-f", foreign)


@pytest.mark.usefixtures("need_docker")
def test_cleanup_without_a_run_spares_live_owners() -> None:
    tag = uuid.uuid4().hex[:8]
    live = _container(f"cleanup-live-{tag}", f"live-{tag}", current_owner())
    dead = _container(f"cleanup-dead-{tag}", f"dead-{tag}", DEAD)
    try:
        removed = asyncio.run(DockerEnvironment.cleanup_run(None))
        assert dead in removed and not _exists(dead)
        assert live not in removed and _exists(live)
        assert asyncio.run(DockerEnvironment.cleanup_run(f"live-{tag}")) == [live]
        assert not _exists(live)
    finally:
        _docker("rm", "-f", live, dead)


@pytest.mark.usefixtures("need_bwrap")
def test_local_cleanup_spares_live_owners_and_kills_orphans() -> None:
    live = LocalEnvironment(SandboxSpec(), trial_id="live", run_id=f"live-{uuid.uuid4().hex}")
    dead = LocalEnvironment(SandboxSpec(), trial_id="dead", run_id=f"dead-{uuid.uuid4().hex}")

    async def go() -> None:
        await live.start()
        await dead.start()
        holder = dead._holder
        assert holder is not None
        running = asyncio.create_task(dead.exec("sleep 60"))

        async def its_bwrap_runs() -> bool:
            return holder in sandbox_processes().values()

        await until(its_bwrap_runs, "the dead owner's command runs in its bwrap")
        # its owner dies (kill -9): the folder says so
        owner = json.loads((holder / OWNER_FILE).read_text())
        (holder / OWNER_FILE).write_text(json.dumps({**owner, "owner": DEAD.label()}))
        removed = await LocalEnvironment.cleanup_run(None)
        assert str(holder) in removed and not holder.exists()
        assert mounts_under(holder) == []
        result = await asyncio.wait_for(running, 10)  # its process was killed
        assert result.exit_code != 0
        assert live._holder is not None and live._holder.exists()
        assert await LocalEnvironment.cleanup_run(live.run_id) == [str(live._holder)]
        await live.stop()
        await dead.stop()

    asyncio.run(go())


def _wait(predicate: object, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError("timed out")


@pytest.mark.parametrize("provider", ["local", "docker"])
def test_helios_cleanup_spares_a_running_batch(
    provider: str, make_task: TaskMaker, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    request.getfixturevalue("need_docker" if provider == "docker" else "need_bwrap")
    for i in range(2):
        # long enough for `helios cleanup` to start and end on a loaded machine (at 5 s,
        # the trials had ended on their own before it did)
        make_task(f"slow-{i}", solve="sleep 15; touch /app/ok\n",
                  test="if test -e /app/ok; then echo 1; else echo 0; fi > "
                       "/logs/verifier/reward.txt\n")  # fmt: skip
    out = tmp_path / "out"
    batch = subprocess.Popen(
        helios_cmd("batch", str(tmp_path / "tasks"), "--provider", provider, "--agent", "oracle",
                   "-n", "2", "-q", "-o", str(out)),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    _wait(lambda: list(out.glob("batch_*/run.json")))
    run_id = json.loads(next(out.glob("batch_*/run.json")).read_text())["run_id"]

    def sandboxes() -> int:
        if provider == "docker":
            return len(_docker("ps", "-q", "--filter", f"label=helios.run={run_id}").split())
        return sum(read_owner(h)[1] == run_id for h in sandbox_base().glob("helios-sandbox-*"))

    _wait(lambda: sandboxes() == 2)
    cleanup = subprocess.run(helios_cmd("cleanup"), capture_output=True, text=True, timeout=120)
    assert cleanup.returncode == 0, cleanup.stderr
    assert sandboxes() == 2
    _, stderr = batch.communicate(timeout=120)
    assert batch.returncode == 0, stderr
    summary = json.loads(next(out.glob("batch_*/batch_summary.json")).read_text())
    assert summary["passed"] == 2, summary


@pytest.mark.usefixtures("need_bwrap")
def test_a_teardown_error_after_a_pass_keeps_the_reward(
    make_task: TaskMaker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_stop = LocalEnvironment.stop

    async def failing_stop(self: LocalEnvironment) -> None:
        await real_stop(self)
        if self.trial_id != "probe":  # the preflight's own sandbox stops fine
            raise EnvironmentExecError("the sandbox folder could not be removed")

    monkeypatch.setattr(LocalEnvironment, "stop", failing_stop)
    make_task("passes")
    runner = ParallelRunner(tmp_path / "tasks", agent="oracle", provider="local",
                            output_dir=tmp_path / "out", show_progress=False)  # fmt: skip
    batch = asyncio.run(runner.run())
    assert runner.run_dir is not None
    (record,) = map(json.loads, (runner.run_dir / "results.jsonl").read_text().splitlines())
    assert (record["status"], record["reward"], record["error"]) == ("passed", 1.0, None)
    assert record["teardown_error"]["message"] == "the sandbox folder could not be removed"
    assert batch.passed == 1
