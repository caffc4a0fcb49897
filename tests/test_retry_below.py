"""`--retry-failed-below R` (issue 33), the engine's part: a resume reruns the scored
units whose newest reward is below R as new attempts beside the old ones, and the
counts take the newest (`engine.retries`). Driven through a toy door with no sandbox,
so every test here is in the fast tier."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helios.engine import ConcurrencyConfig
from helios.engine.retries import retry_id
from helios.errors import ConfigError
from helios.view.records import RecordIndex

from .cli_inprocess import helios_inprocess
from .retry_door import ITEMS, Item, ScoreDoor, drive
from .waiting import wait_until

ROOT = Path(__file__).resolve().parents[1]


def _invoke(folder: Path, door: ScoreDoor, below: float | None = None,
            units: list[Item] = ITEMS) -> dict[str, dict[str, Any]]:  # fmt: skip
    return asyncio.run(drive(folder, door, below, units))


def _lines(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (folder / "results.jsonl").read_text().splitlines()]


def test_a_resume_reruns_exactly_the_low_ones_beside_the_old(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    rewards: dict[str, list[float | None]] = {"a": [1.0], "b": [0.0, 1.0], "c": [0.5, 1.0],
                                              "d": [None, 1.0]}  # fmt: skip
    first = _invoke(folder, ScoreDoor(folder, rewards))
    assert first["b"]["reward"] == 0.0 and first["d"]["status"] == "error"

    door = ScoreDoor(folder, rewards)
    counted = _invoke(folder, door, below=0.5)
    # b only: c is not below 0.5, and an error is --retry-errors' (no reward was measured)
    assert door.ran == [("b", 1)]
    assert counted["b"]["reward"] == 1.0 and counted["b"]["trial_id"] == retry_id(
        ITEMS[1].trial_id, 1)
    lines = _lines(folder)
    # b's first line is kept (the first run's lines come in the order its units ended)
    kept = [line for line in lines[:4] if line["name"] == "b"]
    assert len(lines) == 5 and len(kept) == 1 and kept[0]["reward"] == 0.0
    assert {k: lines[-1][k] for k in ("retry_of", "retry", "retry_round", "folder")} == {
        "retry_of": ITEMS[1].trial_id, "retry": 1, "retry_round": 1, "folder": "b__retry1"}
    assert json.loads((folder / "b" / "result.json").read_text())["reward"] == 0.0  # not over
    assert json.loads((folder / "run.json").read_text())["retry_round"] == {
        "round": 1, "below": 0.5, "finished": True}

    # the same R again, everything at or above it: nothing runs, nothing is recorded
    door = ScoreDoor(folder, rewards)
    again = _invoke(folder, door, below=0.5)
    assert door.ran == [] and len(_lines(folder)) == 5
    assert {n: r["reward"] for n, r in again.items()} == {"a": 1.0, "b": 1.0, "c": 0.5, "d": 0.0}
    # a higher R reruns c; --retry-errors stays the way to rerun d
    door = ScoreDoor(folder, rewards)
    _invoke(folder, door, below=0.75)
    assert door.ran == [("c", 1)]


#: one invocation of the retry round in a process of its own, its unit c hanging
KILLED = """
import asyncio, sys
from pathlib import Path
from tests.retry_door import ITEMS, ScoreDoor, drive
folder = Path(sys.argv[1])
door = ScoreDoor(folder, {n: [0.0] for n in "abc"}, hang=frozenset({("c", 1)}))
asyncio.run(drive(folder, door, 0.5, ITEMS[:3]))
"""


def test_a_round_killed_with_9_resumes_without_paying_twice(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    rewards: dict[str, list[float | None]] = {name: [0.0] for name in "abc"}
    _invoke(folder, ScoreDoor(folder, rewards), units=ITEMS[:3])
    process = subprocess.Popen([sys.executable, "-c", KILLED, str(folder)], cwd=ROOT)
    try:
        wait_until(lambda: process.poll() is None and len(_lines(folder)) == 5,
                   "a's and b's retries recorded, c's hanging")  # fmt: skip
    finally:
        process.kill()  # SIGKILL: nothing runs after it, the kernel drops the lock
        process.wait(timeout=30)
    # and a torn last line, as a kill mid-append leaves
    with (folder / "results.jsonl").open("a") as handle:
        handle.write('{"trial_id": "' + retry_id(ITEMS[2].trial_id, 1) + '", "rew')
    assert json.loads((folder / "run.json").read_text())["retry_round"]["finished"] is False

    door = ScoreDoor(folder, rewards)
    counted = _invoke(folder, door, below=0.5, units=ITEMS[:3])
    assert door.ran == [("c", 1)]  # a and b were retried in this round already
    lines = _lines(folder)
    ids = [line["trial_id"] for line in lines]
    assert len(ids) == len(set(ids)) == 6  # nothing twice, the torn line gone
    assert {n: r["trial_id"] for n, r in counted.items()} == {
        unit.name: retry_id(unit.trial_id, 1) for unit in ITEMS[:3]}
    # the round is finished: the next resume with R starts round 2 (still below R)
    door = ScoreDoor(folder, rewards)
    _invoke(folder, door, below=0.5, units=ITEMS[:3])
    assert sorted(door.ran) == [("a", 2), ("b", 2), ("c", 2)]


def test_hostile_lines_are_quarantined_or_ignored(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    rewards: dict[str, list[float | None]] = {"a": [0.0, 1.0], "b": [1.0]}
    _invoke(folder, ScoreDoor(folder, rewards), units=ITEMS[:2])
    slot = ITEMS[0].trial_id
    forged = [  # each claims to replace a's 0.0 with a pass
        {"trial_id": "f" * 16, "name": "a", "status": "passed", "reward": 1.0,
         "retry_of": slot, "retry": 7},  # marks that do not hash to its id
        {"trial_id": retry_id(slot, 1), "name": "a", "status": "passed", "reward": "1",
         "retry_of": slot, "retry": True},  # a retry number that is no number
    ]  # fmt: skip
    with (folder / "results.jsonl").open("a") as handle:
        handle.write("not json at all\n")
        for record in forged:
            handle.write(json.dumps(record) + "\n")
    door = ScoreDoor(folder, rewards)
    counted = _invoke(folder, door, below=0.5, units=ITEMS[:2])
    assert door.ran == [("a", 1)] and counted["a"]["reward"] == 1.0
    quarantined = (folder / "results.quarantine.jsonl").read_text()
    assert "not json at all" in quarantined
    lines = _lines(folder)
    assert [line["trial_id"] for line in lines][-1] == retry_id(slot, 1)
    assert lines[-1]["retry_of"] == slot and lines[-1]["retry"] == 1


def test_the_view_counts_the_newest_attempt_and_shows_every_row(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    rewards: dict[str, list[float | None]] = {"a": [0.0, 0.0, 1.0], "b": [1.0], "c": [None, 0.0]}
    _invoke(folder, ScoreDoor(folder, rewards), units=ITEMS[:3])
    for _ in range(2):
        _invoke(folder, ScoreDoor(folder, rewards), below=0.5, units=ITEMS[:3])
    index = RecordIndex(folder / "results.jsonl")
    index.refresh()
    assert len(index.rows) == 5  # a, b, c, a's retry 1, a's retry 2
    totals = index.totals.as_dict()
    assert totals["trials"] == 3 and totals["statuses"] == {"passed": 2, "error": 1}
    a_rows = [(row.retry, row.superseded) for row in index.rows if row.slot == ITEMS[0].trial_id]
    assert a_rows == [(0, True), (1, True), (2, False)]


def test_a_threshold_is_a_finite_number(tmp_path: Path) -> None:
    for bad in ("abc", float("nan"), float("inf"), True):
        with pytest.raises(ConfigError, match="--retry-failed-below"):
            ConcurrencyConfig(retry_below=bad)
    assert ConcurrencyConfig(retry_below="0.25").retry_below == 0.25
    from helios.tasks.settings import TaskBatchSettings

    with pytest.raises(ConfigError, match="needs --resume"):  # the Python API's, as the CLI's
        TaskBatchSettings(retry_failed_below=0.5)
    assert TaskBatchSettings(retry_failed_below=1, resume=tmp_path).retry_failed_below == 1.0
    lone = helios_inprocess("batch", str(tmp_path), "--retry-failed-below", "0.5", cwd=tmp_path)
    assert lone.returncode == 2 and "needs --resume" in lone.stderr
    assert len(lone.stderr.strip().splitlines()) == 1
    nan = helios_inprocess("run", str(tmp_path), "--resume", str(tmp_path),
                           "--retry-failed-below", "nan", cwd=tmp_path)  # fmt: skip
    assert nan.returncode == 2 and "finite" in nan.stderr, nan.stderr
