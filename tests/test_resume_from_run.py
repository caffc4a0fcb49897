"""`helios batch --resume RUN_DIR` and `helios run --resume RUN_DIR` alone: every
setting but the key comes from the run's run.json."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from helios.testing.mock_llm import MockLLMServer

from .conftest import helios_cmd

SCRIPT = Path(__file__).parent / "fixtures" / "scripted_examples.json"
KEY = "sk-resume-test-1a2b3c"
EXAMPLES = Path(__file__).parents[1] / "examples" / "tasks"

pytestmark = pytest.mark.usefixtures("need_bwrap")


@pytest.fixture
def scripted() -> Iterator[MockLLMServer]:
    with MockLLMServer(script=SCRIPT, require_key=KEY) as server:
        yield server


def _helios(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["OPENAI_COMPATIBLE_API_KEY"] = KEY  # the key: from the environment, never stored
    return subprocess.run(helios_cmd(*args), capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=300)  # fmt: skip


def _forget_last_trial(run_dir: Path) -> None:
    """As if the run had stopped before its last trial was recorded."""
    results = run_dir / "results.jsonl"
    results.write_text("".join(results.read_text().splitlines(keepends=True)[:-1]))


def _model_args(server: MockLLMServer) -> list[str]:
    return ["--provider", "local", "-m", "openai-compatible/scripted", "--base-url",
            server.openai_base_url, "--max-tokens", "1000", "--max-turns", "12"]  # fmt: skip


def test_batch_resumes_from_the_run_dir_alone(tmp_path: Path, scripted: MockLLMServer) -> None:
    tasks = tmp_path / "tasks"
    for name in ("csv-report", "hello-file"):
        shutil.copytree(EXAMPLES / name, tasks / name)
    first = _helios("batch", "tasks", *_model_args(scripted), "-n", "1", "-q", "-o", "out",
                    cwd=tmp_path)  # fmt: skip
    assert first.returncode == 0, first.stderr
    (run_dir,) = (tmp_path / "out").iterdir()
    stored = (run_dir / "run.json").read_text()
    assert KEY not in stored and json.loads(stored)["base_url"] == scripted.openai_base_url
    _forget_last_trial(run_dir)
    requests = int(scripted.stats["requests"])
    # from elsewhere, with nothing but the run folder and the endpoint named again (a
    # run folder never chooses where the key goes): same model, tasks, settings
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    url = ("--base-url", scripted.openai_base_url)
    again = _helios("batch", "--resume", str(run_dir), *url, cwd=elsewhere)
    assert again.returncode == 0, again.stderr
    assert (
        "(1 already done)" in again.stdout and "tool · openai-compatible/scripted" in again.stdout
    )
    assert "Endpoint" in again.stdout and scripted.openai_base_url in again.stdout
    assert int(scripted.stats["requests"]) > requests
    summary = json.loads((run_dir / "batch_summary.json").read_text())
    assert summary["passed"] == summary["total_trials"] == summary["total_tasks"] == 2
    # a setting given again that changes results is still refused
    other = _helios("batch", "--resume", str(run_dir), *url, "-k", "2", cwd=elsewhere)
    assert other.returncode == 2 and "n_attempts" in other.stderr


def test_run_resumes_from_the_run_dir_alone(tmp_path: Path, scripted: MockLLMServer) -> None:
    task = tmp_path / "csv-report"
    shutil.copytree(EXAMPLES / "csv-report", task)
    first = _helios("run", str(task), *_model_args(scripted), "-k", "2", "-o", "out", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    (run_dir,) = (tmp_path / "out").iterdir()
    _forget_last_trial(run_dir)
    again = _helios("run", "--resume", str(run_dir), "--base-url", scripted.openai_base_url,
                    cwd=tmp_path)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "Helios run" in again.stdout and "2 (1 already done)" in again.stdout
    assert "[Result] ✓ passed · reward 1 · total 1 · rows 1" in again.stdout
    summary = json.loads((run_dir / "batch_summary.json").read_text())
    assert summary["passed"] == summary["total_trials"] == 2 and summary["total_tasks"] == 1


def test_resume_of_another_kind_of_run_is_one_clear_line(tmp_path: Path) -> None:
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    (run_dir / "run.json").write_text('{"kind": "generate"}')
    result = _helios("batch", "--resume", str(run_dir), cwd=tmp_path)
    assert result.returncode == 2
    assert "a run of `helios generate`, not of `helios batch`" in result.stderr
    missing = _helios("batch", "--resume", str(tmp_path / "none"), cwd=tmp_path)
    assert missing.returncode == 2 and "not a Helios run folder" in missing.stderr


@pytest.mark.parametrize(
    ("recorded", "line"),
    [
        ('{"kind": "batch", "n_concurrent": "lots"}', "[n_concurrent]: expected int, got str"),
        ('{"kind": "batch", "n_attempts": 0}', "[n_attempts]: expected a positive number"),
        ('{"kind": "batch", "model": ["a"]}', "[model]: expected str, got list"),
        ('{"kind": "batch", "n_concurrent": true}', "[n_concurrent]: expected int, got bool"),
        ('{"kind": "batch", "executor": "cloud"}', "[executor]: expected one of local, ray"),
        ('{"kind": "batch", "ray_address": 6379}', "[ray_address]: expected str, got int"),
        ("{not json", "cannot read the run's settings"),
        ("[1, 2]", "not a run's settings (expected an object)"),
    ],
)
def test_a_hostile_run_json_is_one_clear_line(tmp_path: Path, recorded: str, line: str) -> None:
    """run.json is input: a hand-edited or hostile one names its file and field, never a
    traceback or an internal error."""
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(recorded)
    result = _helios("batch", "--resume", str(run_dir), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert f"{run_dir / 'run.json'}" in result.stderr and line in result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
