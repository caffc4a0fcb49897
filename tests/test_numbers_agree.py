"""The numbers a user reads agree wherever they are shown (issue 28, points 4, 6, 7
and 10): one pass rate, where an invalid task counts as failed; a typed error before
the verifier's last line; an unknown cost that is never $0.0000 (fresh, resumed,
-q, every trial errored); one "out tok/s" for the live line and the panel;
batch_summary.json's task and trial counts; `-q` names the run folder and the Python
API's `quiet=True` prints nothing."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from helios import ParallelRunner
from helios.testing.mock_llm import MockLLMServer

from .cli_inprocess import helios_inprocess
from .conftest import TaskMaker

EXAMPLES = Path(__file__).parents[1] / "examples" / "tasks"
SCRIPT = json.loads((Path(__file__).parent / "fixtures" / "scripted_examples.json").read_text())
#: a script that answers no conversation: every model call is a 400
NOTHING_MATCHES = {"scenarios": [{"match": "zz-never-zz", "turns": [{"text": "no"}]}]}
MODEL = "openai-compatible/scripted"
RATE = re.compile(r"([\d,]+) out tok/s(?! per call)")

pytestmark = pytest.mark.usefixtures("need_bwrap")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    """`helios ARGS` in-process (tests/cli_inprocess.py): what each command prints and
    its exit code, without an interpreter's start (about a second of CPU) per call."""
    return helios_inprocess(*args, cwd=Path.cwd())


def _summary(out: Path) -> dict[str, Any]:
    (run_dir,) = out.iterdir()
    return json.loads((run_dir / "batch_summary.json").read_text())  # type: ignore[no-any-return]


@pytest.fixture
def no_prices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HELIOS_PRICES", raising=False)


def test_an_invalid_task_counts_as_failed_in_the_one_pass_rate(make_task: TaskMaker,
                                                               tmp_path: Path) -> None:  # fmt: skip
    make_task("good")
    bad = make_task("bad")
    (bad / "task.toml").write_text("version = [\n")
    out = tmp_path / "out"
    done = _run("batch", str(tmp_path / "tasks"), "--provider", "local", "--agent", "oracle",
                "--fail-under", "0.9", "-o", str(out))  # fmt: skip
    assert done.returncode == 1, done.stderr
    summary = _summary(out)
    # the panel, the summary and --fail-under: one figure
    assert summary["pass_rate"] == 0.5 and summary["raw_pass_rate"] == 1.0
    assert "(50.0%)" in done.stdout and "100.0%" not in done.stdout
    assert "pass rate 50.0%" in done.stderr
    # tasks are tasks, trials are trials; pass@k is null with one attempt
    assert (summary["total_tasks"], summary["total_trials"], summary["invalid"]) == (2, 1, 1)
    assert "pass_at_k" in summary and summary["pass_at_k"] is None


def test_total_tasks_counts_tasks_with_attempts(make_task: TaskMaker, tmp_path: Path) -> None:
    make_task("one")
    make_task("two")
    out = tmp_path / "out"
    done = _run("batch", str(tmp_path / "tasks"), "--provider", "local", "--agent", "oracle",
                "-k", "3", "-q", "-o", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = _summary(out)
    assert (summary["total_tasks"], summary["total_trials"], summary["passed"]) == (2, 6, 6)
    assert summary["pass_at_k"]["pass@3"] == 1.0
    # -q: the aggregate line, then the run folder
    (run_dir,) = out.iterdir()
    assert done.stdout.strip().splitlines()[-1] == f"Output: {run_dir}"


def test_a_typed_error_comes_before_the_verifiers_last_line(make_task: TaskMaker,
                                                            tmp_path: Path) -> None:  # fmt: skip
    make_task("rename-logs", test="echo 'PASS: everything fine'\n")  # and no reward
    out = tmp_path / "out"
    done = _run("batch", str(tmp_path / "tasks"), "--provider", "local", "--agent", "oracle",
                "-o", str(out))  # fmt: skip
    (line,) = [row for row in done.stdout.splitlines() if row.startswith("✗ rename-logs")]
    assert "RewardFileMissing" in line, line
    assert line.index("RewardFileMissing") < line.index("PASS: everything fine"), line
    (task,) = _summary(out)["tasks"]
    assert task["reason"].startswith("RewardFileMissing"), task


def _copy_hello(tmp_path: Path) -> Path:
    tasks = tmp_path / "tasks"
    shutil.copytree(EXAMPLES / "hello-file", tasks / "hello-file")
    return tasks


@pytest.mark.usefixtures("no_prices")
def test_an_unpriced_run_whose_every_trial_errored_has_an_unknown_cost(tmp_path: Path) -> None:
    tasks = _copy_hello(tmp_path)
    out = tmp_path / "out"
    with MockLLMServer(script=NOTHING_MATCHES) as server:
        model = ("-m", MODEL, "--base-url", server.openai_base_url, "--api-key", "k")
        done = _run("batch", str(tasks), "--provider", "local", "--agent", "tool", *model,
                    "-o", str(out))  # fmt: skip
        assert done.returncode == 2, done.stderr
        shown = done.stdout + done.stderr
        assert "$0.0000" not in shown and "cost unknown" in shown, shown
        assert _summary(out)["usage"]["cost_usd"] is None
        (run_dir,) = out.iterdir()
        record = json.loads((run_dir / "results.jsonl").read_text().splitlines()[0])
        assert record["usage"]["cost_usd"] is None
        # the finished run resumed with -q: nothing runs, the line still says unknown
        again = _run("batch", "--resume", str(run_dir), "-q", *model)
        shown = again.stdout + again.stderr
        assert "$0.0000" not in shown and "cost unknown" in shown, shown
        assert f"Output: {run_dir}" in again.stdout


@pytest.mark.usefixtures("no_prices")
def test_the_live_line_and_the_panel_say_one_out_tok_s(tmp_path: Path) -> None:
    """Fresh, and after a resume that re-runs an errored trial (the panel once divided
    every recorded trial's tokens, earlier invocations' too, by the run's whole time)."""
    tasks = _copy_hello(tmp_path)
    make_other = tasks / "no-scenario"
    shutil.copytree(tasks / "hello-file", make_other)
    (make_other / "instruction.md").write_text("Nothing in the script answers this.\n")
    out = tmp_path / "out"
    with MockLLMServer(script=SCRIPT, latency_ms=50) as server:
        model = ("-m", MODEL, "--base-url", server.openai_base_url, "--api-key", "k")
        runs = [_run("batch", str(tasks), "--provider", "local", "--agent", "tool", *model,
                     "-o", str(out))]  # fmt: skip
        (run_dir,) = out.iterdir()
        runs.append(_run("batch", "--resume", str(run_dir), "--retry-errors", *model))
    for done in runs:
        assert done.returncode == 0, done.stderr
        rates = RATE.findall(done.stdout)
        # the last live line (printed as the display closes) and the panel's Tokens row
        assert len(rates) == 2 and rates[0] == rates[1], done.stdout


def test_quiet_in_python_prints_nothing(make_task: TaskMaker, tmp_path: Path,
                                        capfd: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    make_task("good")
    bad = make_task("bad")
    (bad / "task.toml").write_text("version = [\n")
    runner = ParallelRunner([tmp_path / "tasks" / "good", bad], provider="local",
                            agent="oracle", output_dir=tmp_path / "out", quiet=True)  # fmt: skip
    batch = asyncio.run(runner.run())
    assert batch.passed == 1
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == "", captured


def test_tasks_check_shows_its_progress(make_task: TaskMaker, tmp_path: Path) -> None:
    """Each of its two runs (oracle, then nop) has its live aggregate line and names
    its run folder, which the viewer labels "tasks check" (tests/test_view_numbers.py)."""
    check = "test -f /app/done && echo 1 > /logs/verifier/reward.txt"
    make_task("one", test=f"{check} || echo 0 > /logs/verifier/reward.txt\n",
              solve="touch /app/done\n")  # fmt: skip
    out = tmp_path / "check"
    done = _run("tasks", "check", str(tmp_path / "tasks"), "--provider", "local", "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    for agent, counts in (("oracle", "1/1 Passed: 1 | Failed: 0"),
                          ("nop", "1/1 Passed: 0 | Failed: 1")):  # fmt: skip
        at = lines.index(f"checking with {agent}:")
        assert lines[at + 1].startswith(counts), lines
        assert lines[at + 2].startswith(f"Output: {out}/check_{agent}"), lines
    kinds = {json.loads(p.read_text())["kind"] for p in out.glob("*/run.json")}
    assert kinds == {"check_oracle", "check_nop"}


def test_quiet_generate_in_python_prints_nothing(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from helios.datagen import BatchRunner
    from tests.datagen.conftest import SCRIPT as GENERATE_SCRIPT
    from tests.datagen.conftest import write_dataset

    dataset = write_dataset(tmp_path / "p.jsonl", ["Task 1: go.", "Plain 2: go."])
    with MockLLMServer(script=GENERATE_SCRIPT) as server:
        runner = BatchRunner(
            dataset_file=dataset, batch_size=1, run_name="r", distribution="terminal_only",
            base_url=server.openai_base_url, api_key="k", model="mock",
            output_dir=tmp_path / "data", quiet=True,
        )  # fmt: skip
        result = runner.run()
    assert result.rows == 1
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == "", captured


def test_quiet_generate_on_the_cli_names_its_run_folder(tmp_path: Path) -> None:
    """`-q` is the live line, then `Output: DIR`, as for batch and toolcalls."""
    from tests.datagen.conftest import SCRIPT as GENERATE_SCRIPT
    from tests.datagen.conftest import write_dataset

    dataset = write_dataset(tmp_path / "p.jsonl", ["Task 1: go.", "Plain 2: go."])
    with MockLLMServer(script=GENERATE_SCRIPT) as server:
        done = _run("generate", f"--dataset_file={dataset}", "--batch_size=1", "--run_name=r",
                    "--distribution=terminal_only", f"--base_url={server.openai_base_url}",
                    "--api_key=k", "--model=mock", f"--output_dir={tmp_path / 'data'}",
                    "-q")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == f"Output: {tmp_path / 'data' / 'r'}", done.stdout
    assert "Prompts" not in done.stdout  # no final table under -q


def test_generate_and_toolcalls_name_a_damaged_results_line_on_resume(tmp_path: Path) -> None:
    """As batch does: a line of the results that cannot be read is moved to the
    quarantine file, and one line names the file and the line."""
    from tests.datagen.conftest import SCRIPT as GENERATE_SCRIPT
    from tests.datagen.conftest import write_dataset

    dataset = write_dataset(tmp_path / "p.jsonl", ["Task 1: go.", "Plain 2: go."])
    config = tmp_path / "tc.yaml"
    with MockLLMServer(script=GENERATE_SCRIPT) as server:
        generate = ("generate", f"--dataset_file={dataset}", "--batch_size=1", "--run_name=r",
                    "--distribution=terminal_only", f"--base_url={server.openai_base_url}",
                    "--api_key=k", "--model=mock", f"--output_dir={tmp_path / 'data'}")  # fmt: skip
        config.write_text(
            "synthesizer: null\n"
            "agent: {name: model, params: {model: openai-compatible/scripted, "
            f"base_url: '{server.openai_base_url}', api_key: k}}}}\n"
            "tests:\n  - {id: t, prompt: hi, expect: []}\n"
        )
        toolcalls = ("toolcalls", "--config", str(config), "-o", str(tmp_path / "tc"))
        for first in (generate, toolcalls):
            done = _run(*first)
            assert done.returncode in (0, 1), done.stdout + done.stderr
        (run_tc,) = (tmp_path / "tc").iterdir()
        runs = {"generate": tmp_path / "data" / "r" / ".helios", "toolcalls": run_tc}
        for results in (path / "results.jsonl" for path in runs.values()):
            lines = results.read_bytes().splitlines(keepends=True)
            results.write_bytes(b"".join([lines[0], b'{"trial_id": "x", "torn\n', *lines[1:]]))
        again = {"generate": _run(*generate, "--resume"),
                 "toolcalls": _run(*toolcalls[:3], "--resume", str(run_tc))}  # fmt: skip
    for kind, done in again.items():
        out = " ".join((done.stdout + done.stderr).split())
        assert f"{runs[kind] / 'results.jsonl'}:2:" in out, (kind, out)
        assert "results.quarantine.jsonl" in out, (kind, out)
        assert (runs[kind] / "results.quarantine.jsonl").exists()
