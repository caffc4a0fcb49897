"""Failing endpoints are errors, fast: an unreachable URL, malformed Retry-After,
and retries counted even when the calls fail."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from helios import ParallelRunner
from helios.models.retry import RetryPolicy
from helios.models.sdk_errors import retry_after_seconds
from helios.testing.mock_llm import MockLLMServer

from .conftest import TaskMaker, helios_cmd

pytestmark = pytest.mark.usefixtures("need_bwrap")
SOLVE = {
    "scenarios": [
        {"match": "*", "turns": [
            {"tool_calls": [{"name": "bash", "arguments": {"command": "touch /app/ok"}}]},
            {"tool_calls": [{"name": "submit", "arguments": {}}]},
        ]},
    ]
}  # fmt: skip
PASS_IF_OK = "if test -e /app/ok; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"
FAST = RetryPolicy(max_attempts=8, base_delay=0.05, max_delay=0.2)


@pytest.mark.parametrize(
    ("header", "expected"),
    [("1, 1", None), ("soon", None), ("nan", None), ("inf", None), ("-3", 0.0), ("2.5", 2.5),
     ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0)],
)  # fmt: skip
def test_retry_after_values_that_do_not_parse_count_as_absent(
    header: str, expected: float | None
) -> None:
    assert retry_after_seconds({"retry-after": header}) == expected


def test_an_unreachable_endpoint_is_an_error_fast_and_stops_the_batch(
    make_task: TaskMaker, tmp_path: Path, closed_port: int
) -> None:
    for i in range(8):
        make_task(f"t{i}", test=PASS_IF_OK, agent_timeout=300)
    tasks, out = tmp_path / "tasks", tmp_path / "out"
    url = f"http://127.0.0.1:{closed_port}/v1"
    args = ["batch", str(tasks), "--provider", "local", "-m", "openai-compatible/x",
            "--base-url", url, "-n", "2", "-o", str(out)]  # fmt: skip
    started = time.monotonic()
    result = subprocess.run(helios_cmd(*args), capture_output=True, text=True, timeout=120)
    assert time.monotonic() - started < 60  # far below the 300 s agent timeout
    assert result.returncode == 2, result.stderr
    assert f"cannot connect to {url.removesuffix('/v1')}: connection refused" in result.stderr
    assert "--retry-errors" in result.stderr
    (run_dir,) = out.iterdir()
    summary = json.loads((run_dir / "batch_summary.json").read_text())
    assert summary["errored"] >= 3 and summary["not_run"] >= 1  # it stopped starting trials
    errors = [t["error"] for t in summary["tasks"]]
    assert all(e.startswith("ConnectionError: ") for e in errors), errors
    assert all(r["usage"]["retries"] >= 2 for r in map(json.loads, (run_dir / "results.jsonl")
               .read_text().splitlines()))  # fmt: skip

    # The endpoint comes back: --resume --retry-errors finishes the batch.
    with MockLLMServer(script=SOLVE) as server:
        args[args.index(url)] = server.openai_base_url
        resumed = subprocess.run(
            helios_cmd(*args, "--resume", str(run_dir), "--retry-errors", "--force"),
            capture_output=True, text=True, timeout=180,
        )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads((run_dir / "batch_summary.json").read_text())
    assert summary["passed"] == 8 and summary["not_run"] == 0


def test_a_duplicated_retry_after_header_is_retried(make_task: TaskMaker, tmp_path: Path) -> None:
    for i in range(4):
        make_task(f"t{i}", test=PASS_IF_OK)
    with MockLLMServer(
        script=SOLVE, fail_sequence=[429] * 6, retry_after_headers=("0", "0"), seed=1
    ) as server:
        batch = _run(server, tmp_path)
    assert batch.passed == 4 and batch.errored == 0
    assert batch.usage.retries == 6


def _run(server: MockLLMServer, tmp_path: Path, **kwargs: Any) -> Any:
    runner = ParallelRunner(
        tmp_path / "tasks", model="openai-compatible/x", base_url=server.openai_base_url,
        provider="local", output_dir=tmp_path / "out", show_progress=False, retry_policy=FAST,
        **kwargs,
    )  # fmt: skip
    return asyncio.run(runner.run())
