"""A full output disk stops the batch cleanly (exit 2) and leaves a store that a
resume finishes exactly once. Uses a 1 MiB tmpfs, so it needs root (CI is root)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import TaskMaker, helios_cmd

N_TASKS = 12
BIG_LOG = "head -c 300000 /dev/zero | tr '\\0' x > /logs/verifier/big.log\n"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        if os.environ.get("HELIOS_REQUIRE_ROOT_TESTS") == "1":
            pytest.fail("this test mounts a tmpfs and needs root")
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.usefixtures("need_bwrap")
def test_a_full_disk_stops_cleanly_and_resume_finishes(
    make_task: TaskMaker, tmp_path: Path, small_disk: Path
) -> None:
    for i in range(N_TASKS):
        make_task(f"t{i:02d}", test=BIG_LOG + "echo 1 > /logs/verifier/reward.txt\n")
    command = ["batch", str(tmp_path / "tasks"), "--provider", "local", "--agent", "oracle",
               "-n", "2", "-q", "-o", str(small_disk)]  # fmt: skip
    full = subprocess.run(helios_cmd(*command), capture_output=True, text=True, timeout=300)
    assert full.returncode == 2, full.stdout + full.stderr
    assert "Traceback" not in full.stderr and "full" in full.stderr.lower()
    (run_dir,) = small_disk.iterdir()
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    done = [json.loads(line) for line in lines]  # every line is whole
    assert len(done) < N_TASKS

    # Give the run room and resume it: each trial ends up recorded once.
    roomy = tmp_path / "roomy" / run_dir.name
    shutil.copytree(run_dir, roomy, symlinks=True)
    resumed = subprocess.run(
        helios_cmd(*command[:-1], str(roomy.parent), "--resume", str(roomy), "--retry-errors"),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    records: dict[str, str] = {}
    for line in (roomy / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        records[record["trial_id"]] = record["status"]
    assert len(records) == N_TASKS and set(records.values()) == {"passed"}
    summary = json.loads((roomy / "batch_summary.json").read_text())
    assert summary["passed"] == N_TASKS and summary["not_run"] == 0
