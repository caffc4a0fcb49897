"""The model front of the CLI as a user runs it: keys, scripted servers, tokens and cost."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import helios_cmd, mock_llm_cmd

KEY = "sk-cli-test-9f8e7d6c5b4a"
SCRIPT = Path(__file__).parent / "fixtures" / "scripted_examples.json"


def _env_without_keys() -> dict[str, str]:
    env = dict(os.environ)
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY", "GEMINI_API_KEY"):
        env.pop(name, None)
    return env


@pytest.fixture
def mock_server(tmp_path: Path) -> Iterator[str]:
    """The scripted server as its own process, as a user would start it."""
    port_file = tmp_path / "port"
    proc = subprocess.Popen(
        mock_llm_cmd(SCRIPT, port_file, KEY),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while not port_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port_file.read_text().strip()}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_no_key_stops_at_once_with_one_line(tmp_path: Path) -> None:
    started = time.monotonic()
    result = subprocess.run(
        helios_cmd(
            "batch", str(Path(__file__).parents[1] / "examples/tasks"), "-o", str(tmp_path / "out")
        ),
        capture_output=True,
        text=True,
        env=_env_without_keys(),
        timeout=60,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "ANTHROPIC_API_KEY" in lines[0] and "-m" in lines[0] and "--agent oracle" in lines[0]
    assert not (tmp_path / "out").exists()
    assert time.monotonic() - started < 30


@pytest.mark.usefixtures("need_bwrap")
def test_tokens_cost_and_no_key_anywhere(
    examples_copy: Path, tmp_path: Path, mock_server: str
) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text('{"scripted": {"input": 3.0, "output": 15.0}}')
    env = _env_without_keys()
    env["OPENAI_COMPATIBLE_API_KEY"] = KEY
    result = subprocess.run(
        helios_cmd(
            "batch",
            str(examples_copy),
            "-m",
            "openai-compatible/scripted",
            "--base-url",
            f"{mock_server}/v1",
            "--provider",
            "local",
            "-n",
            "4",
            "--prices",
            str(prices),
            "-o",
            str(tmp_path / "out"),
        ),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    (run_dir,) = (tmp_path / "out").iterdir()
    summary = json.loads((run_dir / "batch_summary.json").read_text())
    assert summary["passed"] == summary["total_tasks"]
    usage = summary["usage"]
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    expected = (usage["input_tokens"] * 3.0 + usage["output_tokens"] * 15.0) / 1e6
    assert usage["cost_usd"] == pytest.approx(expected)
    # the panel shows the same figures the summary holds
    assert "Tokens" in result.stdout and f"{usage['input_tokens']:,} in" in result.stdout
    assert f"Cost         ${expected:.4f}" in result.stdout
    first = json.loads(next(run_dir.glob("*/result.json")).read_text())
    assert first["usage"]["output_tokens"] > 0 and first["usage"]["cost_usd"] > 0
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path
    assert KEY not in result.stdout + result.stderr


def test_anthropic_key_flag_never_reaches_output(
    examples_copy: Path, tmp_path: Path, mock_server: str, need_bwrap: None
) -> None:
    result = subprocess.run(
        helios_cmd(
            "run",
            str(examples_copy / "hello-file"),
            "-m",
            "anthropic/claude-scripted",
            "--base-url",
            mock_server,
            "--api-key",
            KEY,
            "--provider",
            "local",
            "-o",
            str(tmp_path / "out"),
        ),
        capture_output=True,
        text=True,
        env=_env_without_keys(),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path
    config = json.loads(next((tmp_path / "out").glob("*/*/config.json")).read_text())
    assert config["model"] == "anthropic/claude-scripted"
