"""`helios generate --max_cost` (issue 33): 100 prompts against the scripted server stop
near the cap with exit 3, and `--resume` with a higher cap finishes the run, no prompt
lost or run twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helios.testing.mock_llm import MockLLMServer
from tests.datagen.conftest import read_jsonl, run_generate, write_dataset

pytestmark = pytest.mark.usefixtures("need_bwrap")  # a prompt's sandbox is bubblewrap's

#: one reply, no tool call: a prompt is one paid model call
SCRIPT = {"scenarios": [{"match": "*", "turns": [{"reasoning": "easy", "text": "done"}]}]}
PRICES = {"openai-compatible/mock": {"input": 2.0, "output": 10.0}}


def test_generate_stops_at_its_cost_cap_and_resumes_to_the_end(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "p.jsonl", [f"Question {i}?" for i in range(100)])
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    with MockLLMServer(script=SCRIPT) as server:
        args = [f"--dataset_file={dataset}", "--batch_size=25", "--run_name=r", "--model=mock",
                f"--base_url={server.openai_base_url}", "--num_workers=4",
                "--distribution=terminal_only", f"--prices={prices}",
                "--output_dir=data"]  # fmt: skip
        probe = run_generate(tmp_path, *args[:2], "--run_name=probe", *args[3:],
                             "--max_samples=1", check=True)  # fmt: skip
        assert probe.returncode == 0
        one = read_jsonl(tmp_path / "data" / "probe" / ".helios" / "results.jsonl")[0]["cost_usd"]
        cap = 50.5 * one
        first = run_generate(tmp_path, *args, f"--max_cost={cap}")
        assert first.returncode == 3, first.stderr
        assert "stopped by a budget" in first.stderr and "--max-cost" in first.stderr
        store = tmp_path / "data" / "r" / ".helios"
        records = read_jsonl(store / "results.jsonl")
        spent = sum(r["spend"]["cost_usd"] for r in records)
        assert abs(spent - cap) <= 1.5 * one and 30 <= len(records) < 100
        stats = json.loads((tmp_path / "data" / "r" / "statistics.json").read_text())
        assert stats["budget"]["stopped_by"] == "max_cost"

        rest = run_generate(tmp_path, *args, "--resume", f"--max_cost={cap * 10}")
        assert rest.returncode == 0, rest.stderr
    records = read_jsonl(store / "results.jsonl")
    keys = [r["prompt_key"] for r in records]
    assert len(keys) == len(set(keys)) == 100
    stats = json.loads((tmp_path / "data" / "r" / "statistics.json").read_text())
    assert stats["budget"]["stopped_by"] is None
    total = sum(r["spend"]["cost_usd"] for r in records)
    assert abs(stats["budget"]["spent"]["cost_usd"] - total) < 1e-6
