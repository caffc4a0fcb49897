"""Resume, tombstones, failures, kill -9 at random instants, two processes at once.

The runs that no signal ends are made in-process (`generate_inprocess`); the killed,
interrupted and overlapping ones are processes of their own."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helios.environments.registry import provider_class
from helios.testing.mock_llm import MockLLMServer
from tests.datagen.conftest import (
    SCRIPT,
    cli_env,
    generate_inprocess,
    hermes_args,
    read_jsonl,
    run_generate,
    write_dataset,
)

pytestmark = pytest.mark.usefixtures("need_bwrap")


def _requests(server: MockLLMServer) -> int:
    return int(server.stats["requests"])


def _indices(run: Path, name: str) -> list[int]:
    return sorted(int(r["prompt_index"]) for r in read_jsonl(run / name))


def test_resume_runs_only_what_is_missing_into_new_batch_files(
    tmp_path: Path, mock_server: MockLLMServer
) -> None:
    dataset = write_dataset(tmp_path / "p.jsonl", [f"Task {i}: go." for i in range(6)])
    args = hermes_args(mock_server, dataset, "r", batch=2)
    generate_inprocess(tmp_path, *args, "--max_samples=3", check=True)
    run = tmp_path / "data" / "r"
    before = {p.name: p.read_bytes() for p in run.glob("batch_*.jsonl")}
    assert sorted(before) == ["batch_0.jsonl", "batch_1.jsonl"]
    requests = _requests(mock_server)

    again = generate_inprocess(tmp_path, *args)
    assert again.returncode == 2 and "--resume" in again.stderr  # never mixes runs silently

    result = generate_inprocess(tmp_path, *args, "--resume", check=True)
    assert "3 already done" in result.stdout
    assert _requests(mock_server) - requests == 3 * 5  # only the 3 new prompts ran
    for name, data in before.items():
        assert (run / name).read_bytes() == data  # nothing appended to an old batch file
    assert sorted(p.name for p in run.glob("batch_*.jsonl")) == [
        "batch_0.jsonl", "batch_1.jsonl", "batch_2.jsonl", "batch_3.jsonl"]  # fmt: skip
    assert _indices(run, "trajectories.jsonl") == [0, 1, 2, 3, 4, 5]
    checkpoint = json.loads((run / "checkpoint.json").read_text())
    assert checkpoint["completed_prompts"] == [0, 1, 2, 3, 4, 5]

    requests = _requests(mock_server)
    generate_inprocess(tmp_path, *args, "--resume", check=True)
    assert _requests(mock_server) == requests  # everything done: nothing runs
    assert _indices(run, "trajectories.jsonl") == [0, 1, 2, 3, 4, 5]


def test_resume_matches_by_content_not_by_index(tmp_path: Path, mock_server: MockLLMServer) -> None:
    dataset = write_dataset(tmp_path / "p.jsonl", ["Task a: go.", "Task b: go."])
    args = hermes_args(mock_server, dataset, "r")
    generate_inprocess(tmp_path, *args, check=True)
    requests = _requests(mock_server)
    # The dataset changed: a new prompt now sits at index 0, an index that was done.
    write_dataset(dataset, ["Task new: go.", "Task a: go.", "Task b: go.", "Task a: go."])
    generate_inprocess(tmp_path, *args, "--resume", check=True)
    assert _requests(mock_server) - requests == 2 * 5  # the new prompt and the duplicate
    rows = read_jsonl(tmp_path / "data/r/trajectories.jsonl")
    humans = sorted(r["conversations"][1]["value"] for r in rows)
    assert humans == ["Task a: go.", "Task a: go.", "Task b: go.", "Task new: go."]


def test_no_reasoning_leaves_a_tombstone_that_resume_skips(
    tmp_path: Path, mock_server: MockLLMServer
) -> None:
    dataset = write_dataset(tmp_path / "p.jsonl", ["Task 1: go.", "Plain 1", "Task 2: go.",
                                                   "Plain 2"])  # fmt: skip
    args = hermes_args(mock_server, dataset, "t")
    generate_inprocess(tmp_path, *args, check=True)
    run = tmp_path / "data" / "t"
    assert _indices(run, "trajectories.jsonl") == [0, 2]
    tombstones = read_jsonl(run / "tombstones.jsonl")
    assert [(t["prompt_index"], t["reason"], t["prompt"]) for t in tombstones] == [
        (1, "no_reasoning", "Plain 1"), (3, "no_reasoning", "Plain 2")]  # fmt: skip
    stats = json.loads((run / "statistics.json").read_text())
    assert stats["discarded_prompts"] == 2 and stats["discarded_no_reasoning"] == 2
    checkpoint = json.loads((run / "checkpoint.json").read_text())
    assert checkpoint["completed_prompts"] == [0, 1, 2, 3]
    assert sum(b["discarded_no_reasoning"] for b in checkpoint["batch_stats"].values()) == 2
    requests = _requests(mock_server)
    generate_inprocess(tmp_path, *args, "--resume", check=True)
    assert _requests(mock_server) == requests

    generate_inprocess(tmp_path, *hermes_args(mock_server, dataset, "keep"), "--keep_no_reasoning",
                       check=True)  # fmt: skip
    kept = read_jsonl(tmp_path / "data/keep/trajectories.jsonl")
    plain = next(r for r in kept if r["prompt_index"] == 1)
    assert plain["conversations"][2]["value"].startswith("<think>\n</think>\nno thought\n")


def test_failed_prompts_are_recorded_and_retried_on_resume(
    tmp_path: Path, mock_server: MockLLMServer
) -> None:
    dataset = write_dataset(tmp_path / "p.jsonl", ["Task 1: go.", "Broken 1", "Broken 2"])
    args = hermes_args(mock_server, dataset, "f")
    result = generate_inprocess(tmp_path, *args, check=True)
    assert "2 prompt(s) failed" in result.stderr
    run = tmp_path / "data" / "f"
    failures = read_jsonl(run / "failures.jsonl")
    assert [f["prompt_index"] for f in failures] == [1, 2]
    assert failures[0]["prompt"] == "Broken 1" and failures[0]["error"]["type"]
    assert "no scenario matches" in failures[0]["error"]["message"]
    assert json.loads((run / "statistics.json").read_text())["failed_prompts"] == 2

    mock_server.set_script({"scenarios": [*SCRIPT["scenarios"], {"match": "*", "turns": [],
                            "final": {"reasoning": "fixed", "text": "ok now"}}]})  # fmt: skip
    generate_inprocess(tmp_path, *args, "--resume", check=True)
    assert read_jsonl(run / "failures.jsonl") == []
    assert _indices(run, "trajectories.jsonl") == [0, 1, 2]


def _settle(run: Path) -> None:
    """Remove the sandboxes a killed run left behind (what `helios cleanup` does)."""
    meta = json.loads((run / ".helios" / "run.json").read_text())
    asyncio.run(provider_class("local").cleanup_run(meta["run_id"]))


def _done(run: Path) -> int:
    """How many result lines the run has (0 before it has any file)."""
    results = run / ".helios" / "results.jsonl"
    return results.read_bytes().count(b"\n") if results.exists() else 0


def test_kill_9_at_random_instants_then_resume_is_exactly_once(
    tmp_path: Path, mock_server: MockLLMServer
) -> None:
    mock_server.set_faults(latency_ms=80)
    prompts = [f"Task {i}: go." for i in range(26)] + ["Plain a", "Plain b", "Broken a"]
    random.Random(7).shuffle(prompts)
    dataset = write_dataset(tmp_path / "p.jsonl", prompts)
    args = hermes_args(mock_server, dataset, "k", batch=3)
    command = [sys.executable, "-m", "helios", "generate", *args, "--resume", "--concurrency=4"]
    rng = random.Random(int(os.environ.get("HELIOS_KILL_SEED", "11")))
    run = tmp_path / "data" / "k"
    mid_run_kills = 0
    for _ in range(5):
        before = _done(run)
        proc = subprocess.Popen(command, cwd=tmp_path, env=cli_env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)  # fmt: skip
        # the kill lands at a random instant of the run's work, not of its start (a start
        # takes seconds on a loaded machine: CI saw every kill land before any prompt ended)
        deadline = time.monotonic() + 60
        while _done(run) <= before and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 2.0))
        if proc.poll() is not None:
            break
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        if (run / ".helios" / "run.json").exists():
            _settle(run)
            done = len(read_jsonl(run / ".helios" / "results.jsonl"))
            mid_run_kills += 0 < done < len(prompts)
    assert mid_run_kills >= 1  # at least one kill landed while prompts were in flight
    generate_inprocess(tmp_path, *args, "--resume", check=True)
    merged = _indices(run, "trajectories.jsonl")
    tombstoned = _indices(run, "tombstones.jsonl")
    failed = _indices(run, "failures.jsonl")
    everything = sorted(merged + tombstoned + failed)
    assert everything == list(range(len(prompts)))  # each prompt exactly once
    by_text = {p: i for i, p in enumerate(prompts)}
    assert tombstoned == sorted(by_text[p] for p in ("Plain a", "Plain b"))
    assert failed == [by_text["Broken a"]]
    rows = read_jsonl(run / "trajectories.jsonl")
    assert all(r["conversations"][1]["value"] == prompts[r["prompt_index"]] for r in rows)
    stats = json.loads((run / "statistics.json").read_text())
    in_batches = sum(len(read_jsonl(p)) for p in run.glob("batch_*.jsonl"))
    assert in_batches == len(merged) + stats["orphan_rows_skipped"]


def test_two_processes_on_one_run_folder(tmp_path: Path, mock_server: MockLLMServer) -> None:
    # Slow answers keep the first one running while the second starts (a 300 ms latency
    # let the first finish before the second's interpreter had started, at times).
    mock_server.set_faults(latency_ms=4000)
    dataset = write_dataset(tmp_path / "p.jsonl", [f"Task {i}: go." for i in range(4)])
    args = hermes_args(mock_server, dataset, "two")
    first = subprocess.Popen([sys.executable, "-m", "helios", "generate", *args], cwd=tmp_path,
                             env=cli_env(), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while not (tmp_path / "data/two/.helios/run.json").exists():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        second = run_generate(tmp_path, *args, "--resume")
        assert first.poll() is None  # the two overlapped
        assert second.returncode == 2
        assert "being written by pid" in second.stderr or "in use" in second.stderr
    finally:
        mock_server.set_faults(latency_ms=0)
        assert first.wait(timeout=120) == 0
    assert _indices(tmp_path / "data/two", "trajectories.jsonl") == [0, 1, 2, 3]


def test_resume_adopts_the_rows_of_a_run_hermes_started(
    tmp_path: Path, mock_server: MockLLMServer
) -> None:
    run = tmp_path / "data" / "h"
    run.mkdir(parents=True)
    hermes_row = json.loads((Path(__file__).parent / "fixtures/hermes-row.json").read_text())
    (run / "batch_0.jsonl").write_text(json.dumps(hermes_row) + "\n" + '{"torn": ')
    prompt = hermes_row["conversations"][1]["value"]
    dataset = write_dataset(tmp_path / "p.jsonl", [prompt, "Task new: go."])
    args = hermes_args(mock_server, dataset, "h")
    assert generate_inprocess(tmp_path, *args).returncode == 2  # an existing run needs --resume
    result = generate_inprocess(tmp_path, *args, "--resume", check=True)
    assert "adopted 1 rows" in result.stdout
    assert _requests(mock_server) == 5  # only the new prompt ran
    rows = read_jsonl(run / "trajectories.jsonl")
    assert [r["conversations"][1]["value"] for r in rows] == [prompt, "Task new: go."]
    assert rows[0] == hermes_row  # Hermes's row, untouched
    assert (run / "batch_0.jsonl").read_text() == json.dumps(hermes_row) + "\n"  # torn tail cut
    assert json.loads((run / "checkpoint.json").read_text())["completed_prompts"] == [0, 1]


def test_ctrl_c_exits_130_with_consistent_files(tmp_path: Path, mock_server: MockLLMServer) -> None:
    mock_server.set_faults(latency_ms=200)
    dataset = write_dataset(tmp_path / "p.jsonl", [f"Task {i}: go." for i in range(12)])
    args = hermes_args(mock_server, dataset, "c")
    proc = subprocess.Popen([sys.executable, "-m", "helios", "generate", *args,
                             "--concurrency=2"], cwd=tmp_path, env=cli_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    results = tmp_path / "data/c/.helios/results.jsonl"
    deadline = time.monotonic() + 60
    while len(read_jsonl(results)) < 2:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "--resume" in err and "Traceback" not in err
    run = tmp_path / "data" / "c"
    done = len(read_jsonl(run / "trajectories.jsonl"))
    assert 2 <= done < 12
    assert json.loads((run / "statistics.json").read_text())["trajectories_written"] == done
    generate_inprocess(tmp_path, *args, "--resume", check=True)
    assert _indices(run, "trajectories.jsonl") == list(range(12))
