"""`from helios.datagen import BatchRunner`: Hermes's constructor arguments and `run()`."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from helios.datagen import BatchRunner
from helios.errors import ConfigError, InputError
from helios.testing.mock_llm import MockLLMServer
from tests.datagen.conftest import read_jsonl, write_dataset

pytestmark = pytest.mark.usefixtures("need_bwrap")


def test_hermes_constructor_and_run(tmp_path: Path, mock_server: MockLLMServer) -> None:
    dataset = write_dataset(tmp_path / "p.jsonl", ["Task 1: go.", "Task 2: go.", "Task 3: go."])
    prefill = [{"role": "user", "content": "PRIMING: a Task"},
               {"role": "assistant", "content": "ok"}]  # fmt: skip
    runner = BatchRunner(
        dataset_file=str(dataset), batch_size=2, run_name="api", distribution="terminal_only",
        max_iterations=6, base_url=mock_server.openai_base_url, api_key="k", model="mock",
        num_workers=2, ephemeral_system_prompt="FRAMING", providers_order=["a", "b"],
        reasoning_config={"effort": "high", "enabled": True}, prefill_messages=prefill,
        max_samples=2, output_dir=tmp_path / "out", console=Console(file=io.StringIO()),
    )  # fmt: skip
    result = runner.run(resume=False)
    assert (result.rows, result.discarded, result.failed) == (2, 0, 0)
    assert result.run_dir == tmp_path / "out" / "api"
    rows = read_jsonl(result.run_dir / "trajectories.jsonl")
    # The scripted server counts the prefill's assistant message as a turn already taken.
    assert [r["api_calls"] for r in rows] == [4, 4]
    text = json.dumps(rows)
    assert "PRIMING" not in text and "FRAMING" not in text
    body = mock_server.requests[0].body
    roles = [m["role"] for m in body["messages"]]
    assert roles[:4] == ["system", "user", "assistant", "user"]  # prefill before the prompt
    assert body["reasoning_effort"] == "high"  # not OpenRouter: the standard parameter
    assert "provider" not in body  # OpenRouter's preferences go only to OpenRouter


def test_hermes_constructor_rejects_what_hermes_rejects(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "p.jsonl", ["Task 1: go."])
    with pytest.raises(ConfigError, match="unknown distribution"):
        BatchRunner(dataset_file=dataset, batch_size=1, run_name="x", distribution="nope")
    with pytest.raises(InputError, match="not found"):
        BatchRunner(dataset_file=tmp_path / "none.jsonl", batch_size=1, run_name="x")
