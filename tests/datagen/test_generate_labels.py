"""`helios generate --name --tag`: kept in the run's run.json; the folder stays --run_name."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helios.testing.mock_llm import MockLLMServer
from tests.cli_inprocess import helios_inprocess
from tests.datagen.conftest import hermes_args, write_dataset

pytestmark = pytest.mark.usefixtures("need_bwrap")


def test_generate_keeps_name_and_tags(tmp_path: Path, mock_server: MockLLMServer) -> None:
    dataset = write_dataset(tmp_path / "prompts.jsonl", ["Task 0: run a command, then finish."])
    args = [*hermes_args(mock_server, dataset, "labelled"), "--name", "gen <i>1</i>",
            "--tag", "split=train"]  # fmt: skip
    keys = {name: None for name in os.environ if name.endswith("_API_KEY")}
    result = helios_inprocess("generate", *args, cwd=tmp_path, env=keys)
    assert result.returncode == 0, result.stdout + result.stderr
    meta = json.loads((tmp_path / "data" / "labelled" / ".helios" / "run.json").read_text())
    assert meta["name"] == "gen <i>1</i>" and meta["tags"] == {"split": "train"}
