"""Only the model's own answer makes a tombstone. A prompt cut short by its timeout
(or the endpoint, or the sandbox) is a failure that `--resume` runs again, and so
is one whose row is gone from its batch file or that an earlier version tombstoned
before the model ever answered."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from helios.testing.mock_llm import MockLLMServer
from tests.datagen.conftest import hermes_args, read_jsonl, run_generate, write_dataset

pytestmark = pytest.mark.usefixtures("need_bwrap")


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """A model endpoint that accepts connections and never answers (the kernel
    completes each handshake from the backlog; nothing ever reads the request)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def _with_url(args: list[str], url: str) -> list[str]:
    return [f"--base_url={url}" if a.startswith("--base_url=") else a for a in args]


def _indices(run: Path, name: str) -> list[int]:
    return sorted(int(r["prompt_index"]) for r in read_jsonl(run / name))


def test_timed_out_prompts_are_failures_that_resume_runs(
    tmp_path: Path, mock_server: MockLLMServer, silent_endpoint: str
) -> None:
    dataset = write_dataset(tmp_path / "p.jsonl", ["Task 1: go.", "Task 2: go."])
    args = hermes_args(mock_server, dataset, "t")
    first = run_generate(tmp_path, *_with_url(args, silent_endpoint), "--prompt_timeout=2")
    run = tmp_path / "data" / "t"
    # every prompt failed: nothing was generated, exit 2 with the first reason
    assert first.returncode == 2, first.stderr
    assert "every prompt failed (2)" in first.stderr and "AgentTimeout" in first.stderr
    assert read_jsonl(run / "tombstones.jsonl") == []
    failures = read_jsonl(run / "failures.jsonl")
    assert [(f["prompt_index"], f["error"]["type"]) for f in failures] == [
        (0, "AgentTimeout"), (1, "AgentTimeout")]  # fmt: skip
    stats = json.loads((run / "statistics.json").read_text())
    assert stats["discarded_prompts"] == 0 and stats["failed_prompts"] == 2

    resumed = run_generate(tmp_path, *args, "--resume", check=True)  # the endpoint works now
    assert "2 to run" in resumed.stdout
    assert _indices(run, "trajectories.jsonl") == [0, 1]
    assert read_jsonl(run / "failures.jsonl") == [] and read_jsonl(run / "tombstones.jsonl") == []


def test_resume_runs_again_what_an_earlier_version_tombstoned_unanswered(
    tmp_path: Path, mock_server: MockLLMServer, silent_endpoint: str
) -> None:
    dataset = write_dataset(tmp_path / "p.jsonl", ["Task 1: go.", "Plain 1"])
    args = hermes_args(mock_server, dataset, "old")
    lost = run_generate(tmp_path, *_with_url(args, silent_endpoint), "--prompt_timeout=2")
    assert lost.returncode == 2, lost.stderr  # every prompt failed
    run = tmp_path / "data" / "old"
    # What earlier versions recorded for a prompt whose time ran out before any answer.
    results = run / ".helios" / "results.jsonl"
    records = [json.loads(line) for line in results.read_text().splitlines()]
    for record in records:
        record.pop("error", None)  # (earlier versions wrote no error with it)
        record.update(status="discarded", reason="no_reasoning")
    results.write_text("".join(json.dumps(r) + "\n" for r in records))

    run_generate(tmp_path, *args, "--resume", check=True)
    assert _indices(run, "trajectories.jsonl") == [0]
    # "Plain" never reasons: now that the model answered, its tombstone is real.
    assert [(t["prompt_index"], t["reason"]) for t in read_jsonl(run / "tombstones.jsonl")] == [
        (1, "no_reasoning")]  # fmt: skip
    assert read_jsonl(run / "failures.jsonl") == []


def test_a_row_gone_from_its_batch_file_is_run_again(
    tmp_path: Path, mock_server: MockLLMServer
) -> None:
    dataset = write_dataset(tmp_path / "p.jsonl", ["Task 1: go.", "Task 2: go."])
    args = hermes_args(mock_server, dataset, "gone", batch=1)
    run_generate(tmp_path, *args, check=True)
    run = tmp_path / "data" / "gone"
    (run / "batch_1.jsonl").unlink()
    resumed = run_generate(tmp_path, *args, "--resume", check=True)
    assert "1 to run" in resumed.stdout
    assert _indices(run, "trajectories.jsonl") == [0, 1]
    assert read_jsonl(run / "tombstones.jsonl") == [] and read_jsonl(run / "failures.jsonl") == []
