"""The docs' Python examples, run as a reader would paste them: in a folder holding the
example tasks, each as its own process with this tree's sources.

- docs/python-api.md: ParallelRunner over examples/tasks, the oracle, 3 attempts each;
- docs/view-compare.md: compare_runs over a folder of runs (two of the above);
- docs/getting-started.md: the job file, over the scripted server."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def python_blocks(page: str) -> list[str]:
    text = (DOCS / page).read_text("utf-8")
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.M | re.S)


def _run(code: str, cwd: Path) -> str:
    script = cwd / "example.py"
    script.write_text(code, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, str(script)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout


@pytest.mark.bwrap
@pytest.mark.slow
def test_the_python_api_example_then_the_comparison_of_its_runs(
    need_bwrap: None, tmp_path: Path
) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    batch = python_blocks("python-api.md")[0]
    assert 'ParallelRunner(discover_tasks("examples/tasks")' in batch
    for _ in range(2):
        out = _run(batch, tmp_path)
        assert "24/24 in " in out and "pass@3: 100.0%" in out
        assert out.count("hello-file 1.0") == 3  # on_complete, once per attempt
    # the comparison reads a folder of runs: the two batches above
    (tmp_path / "results").symlink_to(tmp_path / "output")
    (compare,) = [b for b in python_blocks("view-compare.md") if "compare_runs" in b]
    lines = _run(compare, tmp_path).splitlines()
    assert len(lines) == 1  # one pair: the second run against the first
    _, delta, low, high, regressions = lines[0].split(" ", 4)
    assert (float(delta), float(low), float(high), regressions) == (0.0, 0.0, 0.0, "[]")


def fenced_blocks(page: str, language: str) -> list[str]:
    text = (DOCS / page).read_text("utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```$", text, flags=re.M | re.S)


def test_the_job_file_example_runs_every_model_with_every_agent(
    need_bwrap: None, tmp_path: Path
) -> None:
    """docs/getting-started.md's job file, run as its page says (the scripted server,
    `--base-url` for every model): one run over 2 tasks × 2 models × 2 agents."""
    from helios.testing.mock_llm import MockLLMServer

    from .cli_inprocess import helios_inprocess

    (job,) = [block for block in fenced_blocks("getting-started.md", "yaml") if "agents:" in block]
    assert "helios batch --config job.yaml --base-url" in (DOCS / "getting-started.md").read_text()
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / "job.yaml").write_text(job, encoding="utf-8")
    with MockLLMServer(script=ROOT / "tests" / "fixtures" / "scripted_examples.json") as server:
        done = helios_inprocess(
            "batch", "--config", "job.yaml", "--base-url", server.openai_base_url, "-q",
            cwd=tmp_path, env={"OPENAI_COMPATIBLE_API_KEY": "sk-docs"},
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run_dir / "batch_summary.json").read_text())
    assert (summary["total_tasks"], summary["total_trials"], summary["passed"]) == (2, 8, 8)
    assert {k: v["trials"] for k, v in summary["by_model"].items()} == {
        "openai-compatible/scripted": 4, "openai-compatible/scripted-cold": 4,
    }  # fmt: skip
    assert {k: v["trials"] for k, v in summary["by_agent"].items()} == {"tool": 4, "oracle": 4}
