"""After kill -9 no cleanup runs, so the run's sandboxes' folders stay on disk (their
tmpfs roots die with their mount namespaces, or stay mounted where they are in the
host's). A resume removes them before it starts anything, on the engine's
one path, whichever door runs it (`BatchService.run`)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from helios.environments.local.cleanup import remove_holder, sandbox_processes
from helios.environments.local.root import SANDBOX_PREFIX, mounts_under, read_owner
from helios.testing.mock_llm import MockLLMServer
from tests.conftest import TaskMaker, helios_cmd
from tests.datagen.conftest import SCRIPT, cli_env, hermes_args, read_jsonl, write_dataset

pytestmark = pytest.mark.usefixtures("need_bwrap")
T = TypeVar("T")


@pytest.fixture
def base() -> Iterator[Path]:
    """The sandboxes' folder of this test alone (HELIOS_SANDBOX_DIR): others' runs on
    the machine never count. In /tmp, which the sandbox user may traverse."""
    folder = Path(tempfile.mkdtemp(prefix="helios-sweep-", dir="/tmp"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        for holder in folder.iterdir():
            asyncio.run(remove_holder(holder))
        shutil.rmtree(folder, ignore_errors=True)


def _wait(
    what: str, probe: Callable[[], T | None], proc: subprocess.Popen[bytes], timeout: float = 90.0
) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        assert proc.poll() is None, f"helios exited ({proc.returncode}) before {what}"
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


#: the mount table of this process's mount namespace
OWN_MOUNTS = Path("/proc/self/mountinfo")


def _mounted_sandboxes(base: Path, run_id: str, table: Path = OWN_MOUNTS) -> list[Path]:
    """The run's sandbox folders that are up: a sandbox process runs in them, or their
    root is mounted (as `table` lists mounts: a root in the host's namespace)."""
    live = set(sandbox_processes().values())
    return [h for h in base.glob(f"{SANDBOX_PREFIX}*") if read_owner(h)[1] == run_id
            and (h in live or mounts_under(h / "root", table))]  # fmt: skip


def _run_id(run_file: Path) -> str | None:
    try:
        return str(json.loads(run_file.read_text())["run_id"])
    except (OSError, ValueError, KeyError):
        return None


def _kill_when_sandboxes_are_up(
    proc: subprocess.Popen[bytes], base: Path, run_file: Callable[[], Path | None], count: int
) -> list[Path]:
    try:
        run_id = _wait("run.json", lambda: _run_id(f) if (f := run_file()) else None, proc)
        left = _wait(
            f"{count} sandboxes",
            lambda: found if len(found := _mounted_sandboxes(base, run_id)) >= count else None,
            proc,
        )
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert all(h.is_dir() for h in left)  # kill -9: nothing cleaned up
    return left


def _assert_gone(left: list[Path], base: Path, table: Path = OWN_MOUNTS) -> None:
    assert [h for h in left if h.exists()] == []
    assert mounts_under(base, table) == []
    assert [pid for pid, holder in sandbox_processes().items() if holder in left] == []


def test_generate_resume_removes_the_sandboxes_a_killed_run_left(
    tmp_path: Path, base: Path
) -> None:
    env = {**cli_env(), "HELIOS_SANDBOX_DIR": str(base)}
    dataset = write_dataset(tmp_path / "p.jsonl", [f"Task {i}: go." for i in range(4)])
    # The model takes 10 minutes to answer: every prompt's sandbox is up and waiting.
    with MockLLMServer(script=SCRIPT, latency_ms=600_000) as server:
        command = helios_cmd("generate", *hermes_args(server, dataset, "k"), "--concurrency=4")
        proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)  # fmt: skip
        run_file = tmp_path / "data" / "k" / ".helios" / "run.json"
        left = _kill_when_sandboxes_are_up(proc, base, lambda: run_file, 4)

        server.set_faults(latency_ms=0)
        resumed = subprocess.run([*command, "--resume"], cwd=tmp_path, env=env,
                                 capture_output=True, text=True, timeout=300)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    _assert_gone(left, base)
    assert len(read_jsonl(tmp_path / "data" / "k" / "trajectories.jsonl")) == 4


def test_batch_resume_removes_the_sandboxes_a_killed_run_left(
    make_task: TaskMaker, tmp_path: Path, base: Path
) -> None:
    env = {**os.environ, "HELIOS_SANDBOX_DIR": str(base)}
    tasks = [make_task(f"t{i}", solve="sleep 600\n") for i in range(2)]
    out = tmp_path / "out"
    # One process (--workers 1): forked workers would clean up after their parent died.
    command = helios_cmd("batch", str(tmp_path / "tasks"), "--provider", "local", "--agent",
                         "oracle", "-n", "2", "--workers", "1", "-q", "-o", str(out))  # fmt: skip
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    left = _kill_when_sandboxes_are_up(
        proc, base, lambda: next(out.glob("batch_*/run.json"), None), 2
    )
    (run_dir,) = out.iterdir()
    for task in tasks:  # the solution no longer waits: the resumed trials finish at once
        (task / "solution" / "solve.sh").write_text("#!/bin/sh\ntrue\n")
    resumed = subprocess.run([*command, "--resume", str(run_dir)], env=env,
                             capture_output=True, text=True, timeout=300)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    _assert_gone(left, base)
    assert json.loads((run_dir / "batch_summary.json").read_text())["passed"] == 2
