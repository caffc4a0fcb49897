"""What the output says, and that it says which figure is which: `quiet=True` in Python
prints nothing, `-q` the aggregate line and the run folder; "out tok/s" is output
tokens per wall second everywhere (the per-call speed is named apart); after an
interrupt the panel's tokens are the recorded trials' and the stopped trials' tokens
are stated beside them."""

from __future__ import annotations

import asyncio
import io
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console

from helios import ParallelRunner, discover_tasks
from helios.tasks.report import final_panels
from helios.tasks.summary import BatchResult
from helios.tasks.summary import stopped_usage as _stopped_usage
from helios.usage import Usage

from .conftest import helios_cmd


def _text(renderables: list[Any], width: int = 160) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None)
    for renderable in renderables:
        console.print(renderable)
    assert isinstance(console.file, io.StringIO)
    return console.file.getvalue()


@pytest.mark.usefixtures("need_bwrap")
def test_quiet_in_python_prints_nothing(examples_copy: Path, tmp_path: Path) -> None:
    console = Console(file=io.StringIO(), width=200)
    runner = ParallelRunner(
        discover_tasks(examples_copy), agent="oracle", provider="local", n_concurrent=4,
        output_dir=tmp_path / "out", quiet=True, console=console,
    )  # fmt: skip
    batch = asyncio.run(runner.run())
    assert isinstance(console.file, io.StringIO)
    assert batch.passed == batch.total_tasks > 0
    assert console.file.getvalue() == ""


@pytest.mark.usefixtures("need_bwrap")
def test_dash_q_prints_the_aggregate_line_and_the_run_folder(examples_copy: Path,
                                                             tmp_path: Path) -> None:  # fmt: skip
    result = subprocess.run(
        helios_cmd("batch", str(examples_copy), "--provider", "local", "--agent", "nop", "-q",
                   "-n", "4", "-o", str(tmp_path / "out")),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    line, output = result.stdout.splitlines()
    assert line.startswith("8/8 Passed: 0 | Failed: 8"), result.stdout
    (run_dir,) = (tmp_path / "out").iterdir()
    assert output == f"Output: {run_dir}"


def _batch(**fields: Any) -> BatchResult:
    usage = Usage(input_tokens=1_000, cache_read_tokens=500, output_tokens=2_000, calls=10,
                  model_seconds=4.0)  # fmt: skip
    base: dict[str, Any] = dict(
        total_tasks=2, passed=2, failed=0, errored=0, mean_reward=1.0, duration=10.0,
        n_attempts=1, n_unique_tasks=2, pass_at_k_table={}, results=[], usage=usage,
    )  # fmt: skip
    return BatchResult(**(base | fields))


def test_the_panel_names_each_tokens_per_second() -> None:
    shown = _text(final_panels(_batch()))
    # prompt tokens as the live line counts them (cache reads in), and per wall second
    assert "1,500 (500 cached) in · 2,000 out · 200 out tok/s" in shown
    assert "10 (0 retries) · 500 out tok/s per call" in shown
    assert "recorded" not in shown and "Stopped trials" not in shown


def test_after_an_interrupt_the_panel_says_which_tokens_it_counts() -> None:
    stopped = Usage(input_tokens=300, output_tokens=700, calls=3)
    shown = _text(final_panels(_batch(interrupted=True, stopped_usage=stopped)))
    assert "2,000 out · 200 out tok/s (of the recorded trials)" in shown
    assert "Stopped trials  300 in · 700 out tokens, counted live but not recorded" in shown


def test_the_stopped_trials_usage_is_the_live_count_less_the_recorded() -> None:
    live = Usage(input_tokens=1_300, output_tokens=2_700, calls=13)
    services: Any = SimpleNamespace(totals=live)
    recorded: Any = [SimpleNamespace(usage=Usage(input_tokens=1_000, output_tokens=2_000,
                                                  calls=10))]  # fmt: skip
    stopped = _stopped_usage(services, recorded)
    assert stopped is not None
    assert (stopped.input_tokens, stopped.output_tokens, stopped.calls) == (300, 700, 3)
    assert _stopped_usage(None, recorded) is None


def test_generate_names_its_figures_as_batch_does() -> None:
    from helios.datagen.display import GenerateProgress, final_table
    from helios.datagen.statistics import RunTotals

    run = RunTotals(tools={}, turns=4, turns_with_reasoning=2, rows=2, discarded=0, failed=0,
                    tokens_in=1_000, tokens_out=3_000, cost_usd=0.0, batches=1)  # fmt: skip
    shown = _text([final_table(run, merged=2, failures=0, tombstones=0, seconds=10.0)])
    assert "1,000 in / 3,000 out · 300 out tok/s" in shown and "interrupt" not in shown
    stopped = _text(
        [final_table(run, merged=2, failures=0, tombstones=0, seconds=10.0, interrupted=True)]
    )
    assert "of the recorded prompts" in stopped and "the interrupt stopped" in stopped
    services: Any = SimpleNamespace(totals=Usage(output_tokens=50))
    live = GenerateProgress(Console(file=io.StringIO()), quiet=True, services=services)
    assert " out tok/s · " in live.money_line()
