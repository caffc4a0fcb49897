"""`helios generate` when prompts fail (issue 28, point 8): every prompt failed is
not a result (exit 2, as a batch whose every trial errored), and the terminal says
why the first one failed, not only failures.jsonl."""

from __future__ import annotations

from pathlib import Path

import pytest

from helios.testing.mock_llm import MockLLMServer

from .conftest import hermes_args, read_jsonl, run_generate, write_dataset

pytestmark = pytest.mark.usefixtures("need_bwrap")


def test_every_prompt_failed_exits_2_with_the_first_reason(
    tmp_path: Path, mock_server: MockLLMServer
) -> None:
    dataset = write_dataset(tmp_path / "p.jsonl", ["Broken 1: go.", "Broken 2: go."])
    done = run_generate(tmp_path, *hermes_args(mock_server, dataset, "allfail"))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "every prompt failed (2)" in done.stderr
    assert "no scenario matches" in done.stderr, done.stderr  # the reason, on the terminal
    assert "Traceback" not in done.stderr
    failures = read_jsonl(tmp_path / "data" / "allfail" / "failures.jsonl")
    assert len(failures) == 2


def test_some_prompts_failed_exits_0_and_names_the_first_reason(
    tmp_path: Path, mock_server: MockLLMServer
) -> None:
    dataset = write_dataset(tmp_path / "p.jsonl", ["Task 1: go.", "Broken 2: go."])
    done = run_generate(tmp_path, *hermes_args(mock_server, dataset, "somefail"))
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "1 prompt(s) failed" in done.stderr and "no scenario matches" in done.stderr
