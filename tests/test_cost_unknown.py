"""Cost is known or unknown, never a guessed zero (issue 21, points 2 and 3).

With no price for the model, every file records `cost_usd: null` with
`cost_unknown_reason`, and every line and panel says "unknown"; a known price of
zero stays 0.0. Price files may key a model as `provider/model`, and a key that no
model of the run uses is named in one warning line.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from helios import ParallelRunner
from helios import toolcalls as russo
from helios.datagen.display import final_table
from helios.datagen.statistics import totals
from helios.models.pricing import PriceTable
from helios.models.routing import ModelSpec
from helios.models.services import ModelServices
from helios.tasks.report import results_panel
from helios.testing.mock_llm import MockLLMServer
from helios.trajectories.atif import validate_trajectory
from helios.usage import Usage

SCRIPT = json.loads((Path(__file__).parent / "fixtures" / "scripted_examples.json").read_text())
MODEL = "openai-compatible/scripted"
REASON = f"no price for {MODEL}"


def _text(renderable: Any) -> str:
    console = Console(file=io.StringIO(), width=160, color_system=None)
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined,no-any-return]


# -- the sums ----------------------------------------------------------------------------
def test_a_sum_with_an_unknown_part_is_unknown() -> None:
    total = Usage(cost_usd=0.5, calls=1)
    total.add(Usage(cost_usd=None, cost_unknown_reason=REASON, calls=1))
    total.add(Usage(cost_usd=0.25, calls=1))
    assert (total.cost_usd, total.cost_unknown_reason, total.calls) == (None, REASON, 3)
    assert total.cost_text() == "cost unknown"
    free = Usage.sum([Usage(cost_usd=0.0, calls=1), Usage(cost_usd=0.0, calls=1)])
    assert (free.cost_usd, free.cost_unknown_reason, free.cost_text()) == (0.0, None, "$0.0000")


def test_a_sum_adds_every_count_and_reads_back_as_a_usage() -> None:
    """`add` writes the instance's fields directly: each count is summed, none is
    left out, and what it dumps validates back to the same usage."""
    counts = [name for name, info in Usage.model_fields.items() if info.annotation in (int, float)]
    one = Usage(**{name: 1 + i for i, name in enumerate(counts)}, cost_usd=0.5,
                reported_models={"m": ["m-1"]}, cache_saved_usd=0.25)  # fmt: skip
    total = Usage()
    total.add(one)
    total.add(one)
    for i, name in enumerate(counts):
        assert getattr(total, name) == 2 * (1 + i), name
    assert (total.cost_usd, total.cache_saved_usd, total.reported_models) == (
        1.0, 0.5, {"m": ["m-1"]})  # fmt: skip
    assert Usage.model_validate(total.model_dump()) == total


def test_the_live_line_says_unknown_not_zero() -> None:
    services = ModelServices(spec=ModelSpec("openai-compatible", "scripted", "openai", None))
    services.totals.add(Usage(output_tokens=10, cost_usd=None, cost_unknown_reason=REASON))
    line = services.live_line()
    assert "cost unknown" in line and "$" not in line


# -- price keys --------------------------------------------------------------------------
def test_price_keys_may_name_the_provider(tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({
        "openai-compatible/scripted": {"input": 1.0, "output": 2.0},
        "scripted": {"input": 9.0, "output": 9.0},
        "anthropic/claude-x": {"input": 4.0, "output": 4.0},
    }))  # fmt: skip
    table = PriceTable()
    table.extend_from_file(prices)
    million = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    # provider/model beats a bare name; a bare name still prices another provider's model
    assert table.cost(MODEL, million) == pytest.approx(3.0)
    assert table.cost("openrouter/scripted", million) == pytest.approx(18.0)
    # a key's parts are matched against the model's last parts (OpenRouter's own names)
    assert table.cost("openrouter/anthropic/claude-x-2", million) == pytest.approx(8.0)
    assert table.cost("openrouter/other/claude-x", million) is None
    # a model no file names is priced by genai-prices (a self-hosted one is not)
    assert table.match("anthropic/claude-sonnet-4-5") is None
    assert table.lookup("anthropic/claude-sonnet-4-5") is not None
    assert table.cost("openai-compatible/unknown", million) is None


def test_a_price_key_no_model_uses_is_named_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({
        "openai-compatible/scripted": {"input": 1.0, "output": 2.0},
        "openai-compatible/scriptd": {"input": 1.0, "output": 2.0},
    }))  # fmt: skip
    table = PriceTable.load(prices)
    with caplog.at_level(logging.WARNING, logger="helios.models.pricing"):
        table.warn_unmatched([MODEL])
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1, lines
    assert str(prices) in lines[0] and "'openai-compatible/scriptd'" in lines[0]
    assert MODEL in lines[0] and "\n" not in lines[0]


def test_a_price_entry_that_is_not_an_object_names_its_key(tmp_path: Path) -> None:
    from helios.errors import ConfigError

    prices = tmp_path / "prices.json"
    prices.write_text('{"m": [1, 2]}')
    with pytest.raises(ConfigError, match=r"prices\.json") as caught:
        PriceTable().extend_from_file(prices)
    assert caught.value.field == "m"


# -- the files of a task batch -----------------------------------------------------------
def _batch(tmp_path: Path, prices: Path | None) -> tuple[Any, Path]:
    task = tmp_path / "tasks" / "hello-file"
    import shutil

    shutil.copytree(Path(__file__).parents[1] / "examples" / "tasks" / "hello-file", task)
    with MockLLMServer(script=SCRIPT) as server:
        runner = ParallelRunner(
            [task], output_dir=str(tmp_path / "out"), provider="local", model=MODEL,
            base_url=server.openai_base_url, api_key="k", prices=prices, show_progress=False,
        )  # fmt: skip
        batch = asyncio.run(runner.run())
    assert batch.passed == 1
    assert batch.output_dir is not None
    return batch, batch.output_dir


@pytest.mark.usefixtures("need_bwrap")
def test_no_price_is_null_with_the_reason_in_every_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HELIOS_PRICES", raising=False)
    batch, run_dir = _batch(tmp_path, prices=None)
    summary = json.loads((run_dir / "batch_summary.json").read_text())
    assert summary["usage"]["calls"] > 0
    assert summary["usage"]["cost_usd"] is None
    assert summary["usage"]["cost_unknown_reason"] == REASON
    (result_file,) = run_dir.glob("*/result.json")
    usage = json.loads(result_file.read_text())["usage"]
    assert (usage["cost_usd"], usage["cost_unknown_reason"]) == (None, REASON)
    (trajectory_file,) = run_dir.glob("*/agent/trajectory.json")
    trajectory = json.loads(trajectory_file.read_text())
    assert validate_trajectory(trajectory) == []
    final = trajectory["final_metrics"]
    assert final["total_cost_usd"] is None and final["extra"]["cost_unknown_reason"] == REASON
    metrics = [s["metrics"] for s in trajectory["steps"] if "metrics" in s]
    assert metrics and all(m["cost_usd"] is None for m in metrics)
    assert all(m["extra"]["cost_unknown_reason"] == REASON for m in metrics)
    panel = _text(results_panel(batch))
    assert f"unknown: {REASON}" in panel and "$0.0000" not in panel
    assert not batch.priced


@pytest.mark.usefixtures("need_bwrap")
def test_a_known_zero_price_stays_zero(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HELIOS_PRICES", raising=False)
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({MODEL: {"input": 0, "output": 0}}))
    batch, run_dir = _batch(tmp_path, prices=prices)
    usage = json.loads((run_dir / "batch_summary.json").read_text())["usage"]
    assert (usage["cost_usd"], usage["cost_unknown_reason"]) == (0.0, None)
    (trajectory_file,) = run_dir.glob("*/agent/trajectory.json")
    trajectory = json.loads(trajectory_file.read_text())
    assert trajectory["final_metrics"]["total_cost_usd"] == 0.0
    assert "$0.0000" in _text(results_panel(batch))


# -- generate's statistics and the toolcalls report -----------------------------------------
def test_generate_statistics_record_unknown_cost() -> None:
    records = [
        {"status": "ok", "batch_num": 0, "tokens_in": 5, "tokens_out": 3, "cost_usd": 0.0},
        {"status": "ok", "batch_num": 0, "tokens_in": 5, "tokens_out": 3, "cost_usd": None,
         "cost_unknown_reason": "no price for openai-compatible/mock"},
    ]  # fmt: skip
    run = totals(records, failed_now=0)
    assert (run.cost_usd, run.cost_unknown_reason) == (None, "no price for openai-compatible/mock")
    shown = _text(final_table(run, merged=2, failures=0, tombstones=0))
    assert "cost unknown: no price for openai-compatible/mock" in shown and "$" not in shown
    known = totals(records[:1], failed_now=0)
    assert known.cost_usd == 0.0 and "$0.0000" in _text(
        final_table(known, merged=1, failures=0, tombstones=0)
    )


@pytest.mark.usefixtures("need_bwrap")
def test_generate_run_writes_null_cost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from helios.datagen import BatchRunner
    from tests.datagen.conftest import SCRIPT as GENERATE_SCRIPT
    from tests.datagen.conftest import write_dataset

    monkeypatch.delenv("HELIOS_PRICES", raising=False)
    dataset = write_dataset(tmp_path / "p.jsonl", ["Task 1: go."])
    with MockLLMServer(script=GENERATE_SCRIPT) as server:
        runner = BatchRunner(
            dataset_file=dataset, batch_size=1, run_name="r", distribution="terminal_only",
            base_url=server.openai_base_url, api_key="k", model="mock",
            output_dir=tmp_path / "data", console=Console(file=io.StringIO()),
        )  # fmt: skip
        result = runner.run()
    assert result.rows == 1
    usage = json.loads((result.run_dir / "statistics.json").read_text())["usage"]
    assert usage["cost_usd"] is None
    assert usage["cost_unknown_reason"] == "no price for openai-compatible/mock"


def test_toolcalls_summary_records_unknown_cost(tmp_path: Path) -> None:
    script = {"scenarios": [{"match": "*", "turns": [{"tool_calls": [
        {"name": "book_flight", "arguments": {"to_city": "LA"}}]}]}]}  # fmt: skip
    with MockLLMServer(script=script) as server:
        agent = russo.ModelAgent("openai-compatible/mock", [{"name": "book_flight"}],
                                 base_url=server.openai_base_url)  # fmt: skip
        batch = asyncio.run(russo.run_concurrent(
            "Book", None, agent, expect=[russo.tool_call("book_flight", to_city="LA")], runs=2,
            output_dir=str(tmp_path),
        ))  # fmt: skip
    assert batch.passed, batch.summary()
    assert batch.usage is not None and batch.usage.calls == 2
    (summary_file,) = tmp_path.glob("*/toolcalls_summary.json")
    usage = json.loads(summary_file.read_text())["usage"]
    assert usage["calls"] == 2 and usage["cost_usd"] is None
    assert usage["cost_unknown_reason"] == "no price for openai-compatible/mock"
