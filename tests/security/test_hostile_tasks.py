"""The hostile-task suite (issue 8): each task goes through the real task door with
the oracle agent, on the local provider, on docker, and on daytona (against the
loopback Daytona, its sandboxes docker containers); one batch per provider.

Every forged reward is 0, every escape is refused, every limit holds, and the
host is untouched (its files, its /tmp, no sandbox, container or process left).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from helios.environments.local.cleanup import sandbox_processes
from helios.environments.local.root import read_owner, sandbox_base
from helios.testing.daytona_fake import DaytonaFake, local_object_storage

from ..conftest import _need
from ..waiting import wait_until
from .hostile import HOST_REWARD, KEY_CANARY, Context, catalogue
from .hostile_batch import BatchOutcome, run_hostile_batch

#: docker twice: its containers' init is Helios's shell server, or (`docker-api`, as
#: for a remote daemon) the image's `sh` waiting on a `sleep`, with each command a
#: request to the Engine API
PROVIDERS = ("local", "docker", "docker-api", "daytona")
#: which providers each hostile task is meant for (a placeholder context: only the names count)
_NOWHERE = Path("/nonexistent")
_MEANT_FOR = {h.name: h.providers for h in catalogue(Context(_NOWHERE, _NOWHERE, _NOWHERE, 0))}


def cases(*names: str) -> list[Any]:
    """(provider, name) for each provider a hostile task is meant for: a local-only attack
    (the host's loader, its /etc, the tmpfs root) is no test case on docker, not a skip."""
    return [
        pytest.param(provider, name, id=f"{provider}-{name}")
        for name in names
        for provider in PROVIDERS
        if _engine(provider) in _MEANT_FOR[name]
    ]


def _engine(provider: str) -> str:
    return "docker" if provider.startswith("docker") else provider


@pytest.fixture(scope="module")
def batches() -> dict[str, BatchOutcome]:
    """One hostile batch per provider for the whole module, run when first asked for."""
    return {}


@pytest.fixture
def outcome(
    request: pytest.FixtureRequest,
    batches: dict[str, BatchOutcome],
    tmp_path_factory: pytest.TempPathFactory,
    docker_available: bool,
    bwrap_available: bool,
) -> BatchOutcome:
    provider: str = request.param
    if _engine(provider) in ("docker", "daytona"):
        _need("HELIOS_REQUIRE_DOCKER", docker_available, "a Docker engine")
    else:
        _need("HELIOS_REQUIRE_BWRAP", bwrap_available, "bubblewrap")
    if provider not in batches:
        root = tmp_path_factory.mktemp(f"hostile-{provider}")
        with pytest.MonkeyPatch.context() as patch:
            if provider == "docker-api":
                patch.setenv("HELIOS_DOCKER_SHELL", "0")
            if provider == "daytona":
                batches[provider] = _daytona_batch(root, patch)
            else:
                batches[provider] = run_hostile_batch(root, _engine(provider))
    return batches[provider]


def _daytona_batch(root: Path, patch: pytest.MonkeyPatch) -> BatchOutcome:
    with DaytonaFake() as fake, local_object_storage(fake):
        patch.setenv("DAYTONA_API_KEY", fake.api_key)
        patch.setenv("DAYTONA_API_URL", fake.api_url)
        outcome = run_hostile_batch(root, "daytona")
        # deletes go on after the batch (Daytona answers at once): wait for them
        wait_until(lambda: not [b for b in fake.live() if b.state != "destroying"],
                   "every sandbox deleted")  # fmt: skip
        outcome.sandboxes_left = [b.id for b in fake.live() if b.state != "destroying"]
    return outcome


#: a check made on both providers' batches
on_both = pytest.mark.parametrize("outcome", PROVIDERS, indirect=True)  # every provider


def _record(outcome: BatchOutcome, name: str) -> dict[str, object]:
    if name not in outcome.hostiles:  # a tool it needs (gcc) is missing on this host
        _need("HELIOS_REQUIRE_BWRAP", False, f"the tools {name} needs")
    assert name in outcome.records, f"{name} has no result: {sorted(outcome.records)}"
    return outcome.records[name]


#: forging task → the error its honest result carries (None: a clean reward 0)
FORGERS = {
    "rewriter": None,
    "ldso-swap": None,
    "usercustomize": None,
    "preseeded-reward": "RewardFileMissing",
    "limit-lowering": None,
    "precreated-tests": None,
    "linked-tests": "RewardFileMissing",
    "key-read": None,
    "host-secret-read": None,
    "network": None,
    "sidecar-rewriter": "RewardFileMissing",
}


@pytest.mark.parametrize(("outcome", "name"), cases(*sorted(FORGERS)), indirect=["outcome"])
def test_forged_reward_is_zero(outcome: BatchOutcome, name: str) -> None:
    record = _record(outcome, name)
    assert record["reward"] == 0.0, record
    assert record["status"] == "failed", record
    error = record["error"]
    assert (error["type"] if isinstance(error, dict) else None) == FORGERS[name], record


@pytest.mark.parametrize(("outcome", "name"), cases("sidecar-rewriter"), indirect=["outcome"])
def test_the_sidecar_s_rewriter_was_live(outcome: BatchOutcome, name: str) -> None:
    # the attack ran (its loop wrote the shared reward): its zero is the reset's doing
    record = _record(outcome, name)
    said = (outcome.run_dir / str(record["folder"]) / "agent" / "oracle.txt").read_text()
    assert "helper: started" in said, said


@pytest.mark.parametrize(("outcome", "name"), cases("sidecar-mounted-logs"),
                         indirect=["outcome"])  # fmt: skip
def test_a_compose_mount_over_main_s_logs_is_refused(outcome: BatchOutcome, name: str) -> None:
    record = _record(outcome, name)
    assert record["status"] == "error" and not record["reward"], record
    error = record["error"]
    assert isinstance(error, dict) and "mounts /logs/verifier" in str(error["message"]), error


@pytest.mark.parametrize(
    ("outcome", "name"), cases("payload-symlink", "artifact-symlink"), indirect=["outcome"]
)
def test_links_out_of_the_sandbox_reach_no_host_file(outcome: BatchOutcome, name: str) -> None:
    record = _record(outcome, name)
    assert record["reward"] == 0.0, record
    trial = outcome.run_dir / str(record["folder"])
    for path in trial.rglob("*"):
        assert not path.is_symlink(), path
        if path.is_file():
            assert HOST_REWARD not in path.read_text(errors="replace"), path
    assert HOST_REWARD not in (outcome.run_dir / "results.jsonl").read_text()


@on_both
@pytest.mark.parametrize(
    ("name", "reason"),
    [("workdir-traversal", "WORKDIR"), ("environment-symlink", "symlink leaves the task folder")],
)
def test_hostile_task_folders_are_invalid_with_one_line(
    outcome: BatchOutcome, name: str, reason: str
) -> None:
    bad = [b for b in outcome.runner.invalid if Path(b.path).name == name]
    assert len(bad) == 1, outcome.runner.invalid
    assert reason in bad[0].error and "\n" not in bad[0].error
    assert name not in outcome.records
    assert not outcome.ctx.traversal_dir.exists()


@pytest.mark.parametrize(("outcome", "name"), cases("fork-bomb", "memory-hog"),
                         indirect=["outcome"])  # fmt: skip
def test_limits_hold(outcome: BatchOutcome, name: str) -> None:
    limit = {"fork-bomb": 100, "memory-hog": 0}[name]
    record = _record(outcome, name)
    assert record["reward"] == 0.0, record
    oracle = outcome.run_dir / str(record["folder"]) / "agent" / "oracle.txt"
    if name == "fork-bomb":
        forked = int(oracle.read_text().split("--- stdout\n")[1].split()[0])
        assert 10 < forked < limit, forked


@pytest.mark.parametrize(("outcome", "name"), cases("disk-filler"), indirect=["outcome"])
def test_disk_is_bounded(outcome: BatchOutcome, name: str) -> None:
    record = _record(outcome, name)
    assert record["reward"] == 0.0, record
    oracle = outcome.run_dir / str(record["folder"]) / "agent" / "oracle.txt"
    used_mb = int(oracle.read_text().split("--- stdout\n")[1].split()[0])
    assert 10 < used_mb <= 64, used_mb


@on_both
def test_no_connection_left_the_sandbox(outcome: BatchOutcome) -> None:
    _record(outcome, "network")
    assert outcome.ctx.connections == []


@on_both
def test_no_key_in_any_output(outcome: BatchOutcome) -> None:
    _record(outcome, "key-read")
    for path in outcome.run_dir.rglob("*"):
        if path.is_file():
            assert KEY_CANARY not in path.read_text(errors="replace"), path


@on_both
def test_host_untouched(outcome: BatchOutcome) -> None:
    ctx: Context = outcome.ctx
    assert sorted(p.name for p in ctx.host_dir.iterdir()) == ["reward.txt", "secret.txt"]
    assert (ctx.host_dir / "reward.txt").read_text() == HOST_REWARD + "\n"
    assert (ctx.host_dir / "secret.txt").read_text() == "host-only secret\n"
    assert not ctx.traversal_dir.exists()
    run_id = json.loads((outcome.run_dir / "run.json").read_text())["run_id"]
    holders = [h for h in sandbox_base().glob("helios-sandbox-*") if read_owner(h)[1] == run_id]
    assert holders == []
    assert [h for h in sandbox_processes().values() if not h.exists()] == []
    assert outcome.sandboxes_left == []
    if outcome.runner.provider in ("docker", "daytona"):
        # containers, and a compose project's networks and volumes
        for kind in (["ps", "-a"], ["network", "ls"], ["volume", "ls"]):
            left = subprocess.run(
                ["docker", *kind, "-q", "--filter", f"label=helios.run={run_id}"],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            assert left.stdout.split() == [], kind
