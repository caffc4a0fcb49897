"""The live line's tokens count while a trial runs in a worker process (issue 28,
point 10): a worker sends its totals after each model call, not only with the
trial's result, so an agent of many slow turns (the computer agent's) does not
show `0 in/0 out` until its trial ends."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import pytest

from helios import ParallelRunner
from helios.testing.mock_llm import MockLLMServer

from .conftest import EXAMPLES
from .test_tool_agent import FAST_RETRIES, KEY, SCRIPT

#: each model reply waits this long: a trial's three turns take three times as long
LATENCY_MS = 1500


@pytest.mark.bwrap
@pytest.mark.usefixtures("need_bwrap")
def test_the_live_tokens_of_trials_in_workers_count_before_they_end(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    shutil.copytree(EXAMPLES / "hello-file", tasks / "hello-file")
    seen: dict[str, int] = {}

    async def main(server: MockLLMServer) -> None:
        runner = ParallelRunner(
            tasks, model="openai-compatible/scripted", base_url=server.openai_base_url,
            api_key=KEY, output_dir=tmp_path / "out", show_progress=False, provider="local",
            n_concurrent=2, n_attempts=2, retry_policy=FAST_RETRIES, workers=2,
        )  # fmt: skip
        batch = asyncio.create_task(runner.run())
        ends = time.monotonic() + 120
        while not batch.done() and time.monotonic() < ends:
            services = runner.services
            if services is not None and services.totals.output_tokens > 0:
                seen["out"] = services.totals.output_tokens
                seen["calls"] = services.totals.calls
                results = list((tmp_path / "out").rglob("results.jsonl"))
                seen["recorded"] = sum(len(p.read_text().splitlines()) for p in results)
                break
            await asyncio.sleep(0.05)
        result = await batch
        assert result.passed == 2

    with MockLLMServer(script=SCRIPT, require_key=KEY, latency_ms=LATENCY_MS) as server:
        asyncio.run(main(server))
    assert seen, "the live totals stayed at 0 tokens until the trial ended"
    assert seen["recorded"] == 0  # seen while the trial still ran
    assert 1 <= seen["calls"] < 6  # after a first model call, before the last ones
