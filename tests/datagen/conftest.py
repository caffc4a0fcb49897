"""Fixtures for the generate door: the scripted model server, datasets, and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helios.testing.mock_llm import MockLLMServer

FIXTURES = Path(__file__).parent / "fixtures"
THINK = "Let me think about the next step."
ECHO = {"name": "terminal", "arguments": {"command": "echo ok"}}
TERMINAL_TURN = {"reasoning": THINK, "text": "working", "tool_calls": [ECHO]}

#: "Task" prompts reason and call terminal (as the Hermes reference run did); "Plain"
#: prompts never reason (discarded); "Broken" prompts match no scenario: the server
#: answers 400, so they fail.
SCRIPT: dict[str, Any] = {
    "scenarios": [
        {"match": "Task", "turns": [TERMINAL_TURN] * 4,
         "final": {"reasoning": THINK, "text": "done"}},
        {"match": "Plain", "turns": [{"text": "no thought",
                                      "tool_calls": [{"name": "terminal",
                                                      "arguments": {"command": "true"}}]}],
         "final": {"text": "plain answer"}},
    ]
}  # fmt: skip


def reference(name: str) -> Any:
    return json.loads((FIXTURES / f"hermes-{name}.json").read_text())


@pytest.fixture
def mock_server() -> Iterator[MockLLMServer]:
    with MockLLMServer(script=SCRIPT) as server:
        yield server


def write_dataset(path: Path, prompts: list[Any]) -> Path:
    """One line per item: a str is a prompt, a dict a whole row, "RAW:..." a raw line."""
    lines = []
    for item in prompts:
        if isinstance(item, str) and item.startswith("RAW:"):
            lines.append(item.removeprefix("RAW:"))
        else:
            lines.append(json.dumps(item if isinstance(item, dict) else {"prompt": item}))
    path.write_text("\n".join(lines) + "\n")
    return path


def cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("HELIOS_SEARXNG_URL", None)
    env["COLUMNS"] = "200"
    return env


def run_generate(
    cwd: Path, *args: str, timeout: float = 180, check: bool = False
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "helios", "generate", *args],
        cwd=cwd, env=cli_env(), capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    if check and result.returncode != 0:
        raise AssertionError(f"exit {result.returncode}\n{result.stdout}\n{result.stderr}")
    return result


def generate_inprocess(
    cwd: Path, *args: str, check: bool = False
) -> subprocess.CompletedProcess[str]:
    """`run_generate` without a new interpreter (tests/cli_inprocess.py): the same
    command, environment (no API keys, no SearXNG, 200 columns) and exit code, for
    tests that do not send the process a signal or watch what a fresh one imports."""
    from tests.cli_inprocess import helios_inprocess

    unset: dict[str, str | None] = {k: None for k in os.environ if k.endswith("_API_KEY")}
    env = {**unset, "HELIOS_SEARXNG_URL": None, "COLUMNS": "200"}
    result = helios_inprocess("generate", *args, cwd=cwd, env=env)
    if check and result.returncode != 0:
        raise AssertionError(f"exit {result.returncode}\n{result.stdout}\n{result.stderr}")
    return result


def hermes_args(server: MockLLMServer, dataset: Path, run: str, batch: int = 2) -> list[str]:
    """A Hermes command line, in Hermes's own spelling."""
    return [
        f"--dataset_file={dataset}", f"--batch_size={batch}", f"--run_name={run}",
        "--model=mock", f"--base_url={server.openai_base_url}", "--num_workers=4",
        "--distribution=terminal_only",
    ]  # fmt: skip


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
