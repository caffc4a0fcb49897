"""`helios compare`: runs with known flips (real batches, real tool-call runs, records
written with the real record classes), its bootstrap interval against a direct
computation, the gate, the formats, and hostile input."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from helios import toolcalls as russo
from helios.engine.jsonl import RecordStream
from helios.engine.store import run_metadata, write_json_atomic
from helios.results import compare_runs, load_run
from helios.results.runs import NotARun, TrialFacts
from helios.tasks.results import TrialResult
from helios.usage import Usage

from .cli_inprocess import helios_inprocess
from .conftest import _need, helios_cmd
from .waiting import wait_until

SOLVED = "echo done > /app/out.txt\n"
UNSOLVED = "true\n"
CHECK = (
    "if [ -f /app/out.txt ]; then echo 1 > /logs/verifier/reward.txt; "
    "else echo 0 > /logs/verifier/reward.txt; fi\n"
)


def _helios(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`helios compare` in this process (its exit codes and output as a subprocess gets
    them: tests/cli_inprocess.py); a batch in a process of its own. The terminal test
    below runs the console script in tmux."""
    if args[0] == "compare":
        return helios_inprocess(*args, cwd=cwd)
    return subprocess.run(helios_cmd(*args), capture_output=True, text=True, cwd=cwd, timeout=300)


def _write_task(root: Path, name: str, solve: str) -> None:
    task = root / name
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "solution").mkdir()
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    (task / "task.toml").write_text(
        'version = "1.0"\n[verifier]\ntimeout_sec = 60\n[agent]\ntimeout_sec = 60\n'
        "[environment]\ncpus = 1\nmemory_mb = 256\n"
    )
    (task / "instruction.md").write_text("Write /app/out.txt.\n")
    (task / "tests" / "test.sh").write_text("#!/bin/sh\n" + CHECK)
    (task / "solution" / "solve.sh").write_text("#!/bin/sh\n" + solve)


# -- real batches ------------------------------------------------------------------------
#: task -> does the oracle's solution work in run A, in run B (None: not in that run)
PLAN: dict[str, tuple[bool | None, bool | None]] = {
    "both-pass": (True, True),
    "regresses": (True, False),
    "gets-fixed": (False, True),
    "never-passes": (False, False),
    "only-in-a": (True, None),
    "only-in-b": (None, True),
}


@pytest.fixture(scope="module")
def batches(tmp_path_factory: pytest.TempPathFactory, bwrap_available: bool) -> Path:
    """results/a/batch_*/ and results/b/batch_*/: two real batches of the oracle, two
    attempts per task, whose tasks' solutions differ as PLAN says."""
    _need("HELIOS_REQUIRE_BWRAP", bwrap_available, "bubblewrap")
    root = tmp_path_factory.mktemp("compare")
    for side, index in (("a", 0), ("b", 1)):
        for name, outcomes in PLAN.items():
            works = outcomes[index]
            if works is not None:
                _write_task(root / f"tasks-{side}", name, SOLVED if works else UNSOLVED)
        result = _helios(
            "batch", str(root / f"tasks-{side}"), "--provider", "local", "--agent", "oracle",
            "-n", "4", "-k", "2", "-q", "-o", f"results/{side}", cwd=root,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
    return root


def _run_dir(root: Path, side: str) -> Path:
    (found,) = (root / "results" / side).iterdir()
    return found


def test_real_batches_pair_tasks_and_find_the_flips(batches: Path) -> None:
    a, b = _run_dir(batches, "a"), _run_dir(batches, "b")
    result = _helios("compare", str(a), str(b), "--format", "json", cwd=batches)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    (comparison,) = report["comparisons"]
    assert comparison["regressions"] == ["regresses"]
    assert comparison["fixes"] == ["gets-fixed"]
    assert comparison["only_in_a"] == ["only-in-a"] and comparison["only_in_b"] == ["only-in-b"]
    assert "did not run the same tasks" in comparison["note"]
    assert comparison["shared_tasks"] == 4
    # 2 of 4 shared tasks pass in each run: no change overall, and an interval around 0
    assert comparison["pass_rate_a"] == comparison["pass_rate_b"] == 0.5
    assert comparison["pass_rate_delta"] == 0.0
    assert comparison["ci"]["low"] < 0 < comparison["ci"]["high"]
    assert not comparison["significantly_worse"]
    rows = {row["task"]: row for row in comparison["tasks"]}
    assert rows["regresses"]["a"]["passed"] == 2 and rows["regresses"]["b"]["passed"] == 0
    assert rows["regresses"]["reward_delta"] == -1.0 and rows["gets-fixed"]["reward_delta"] == 1.0
    assert rows["both-pass"]["change"] == "same" and rows["only-in-b"]["change"] == "only_b"
    assert rows["regresses"]["a"]["pass_at_k"] == {"pass@1": 1.0, "pass@2": 1.0}
    assert comparison["pass_at_k_a"] == {"pass@1": 0.5, "pass@2": 0.5}
    # durations come from the trials: real, positive, and B - A per task
    both = rows["both-pass"]
    assert both["a"]["mean_duration"] > 0 and both["b"]["mean_duration"] > 0
    assert both["duration_delta"] == pytest.approx(
        both["b"]["mean_duration"] - both["a"]["mean_duration"]
    )
    assert both["cost_delta_usd"] == 0.0  # the oracle calls no model: cost $0 each
    (run_a, run_b) = report["runs"]
    assert (run_a["tasks"], run_a["trials"], run_a["passed"]) == (5, 10, 6)
    assert run_a["agent"] == "oracle" and run_a["finished"] and run_a["wall_seconds"] > 0
    assert run_b["pass_rate"] == 0.6


def test_real_batches_in_the_terminal(batches: Path) -> None:
    a, b = _run_dir(batches, "a"), _run_dir(batches, "b")
    result = _helios("compare", str(a), str(b), "--tasks", cwd=batches)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "1 task passed less often in B than in A" in out  # two attempts each
    assert "1 task passed more often in B than in A" in out
    assert re.search(r"regresses\s+2/2 → 0/2", out) and re.search(r"gets-fixed\s+0/2 → 2/2", out)
    assert "no significant difference" in out and "note: the runs did not run the same" in out
    assert "only_a" in out and "only_b" in out  # the per-task table


def test_the_docs_comparing_models_flow_needs_no_script(tmp_path: Path, need_bwrap: None) -> None:
    """The docs' "Comparing Models": the same tasks run three times into results/<name>/,
    then `python compare_results.py results/`, a script the user had to write. Here
    the agents stand in for the three models (no provider is called in tests)."""
    for name in ("hello", "world", "again"):
        _write_task(tmp_path / "tasks" / "benchmark", name, SOLVED)
    runs = {"claude-sonnet": "oracle", "openai": "nop", "gemini": "oracle"}
    for folder, agent in runs.items():
        batch = _helios(
            "batch", "tasks/benchmark/", "-n", "4", "--provider", "local", "--agent", agent,
            "-q", "-o", f"results/{folder}/", cwd=tmp_path,
        )  # fmt: skip
        assert batch.returncode in (0, 1), batch.stderr
    result = _helios("compare", "results/", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    # every run found, the first (sorted) the baseline, each other one against it
    assert re.search(r"A  results/claude-sonnet/batch_\S+  oracle  \(baseline\)", result.stdout)
    assert "B against A" in result.stdout and "C against A" in result.stdout
    assert "3 tasks passed in A, failed in C" in result.stdout  # nop against the oracle
    report = json.loads(_helios("compare", "results/", "-f", "json", cwd=tmp_path).stdout)
    labels = [run["label"] for run in report["runs"]]
    assert [Path(label).parent for label in labels] == [
        Path("results", name) for name in ("claude-sonnet", "gemini", "openai")
    ]
    deltas = {Path(c["b"]).parent.name: c["pass_rate_delta"] for c in report["comparisons"]}
    assert deltas == {"gemini": 0.0, "openai": -1.0}
    gate = _helios("compare", "results/", "--fail-if-worse", cwd=tmp_path)
    assert gate.returncode == 1 and "worse:" in gate.stderr and "openai" in gate.stderr


# -- tool-call runs ------------------------------------------------------------------------
class TextSynthesizer:
    async def synthesize(self, text: str) -> russo.Audio:
        return russo.Audio(data=b"\x00" * 480, format="pcm", transcript=text)


BOOK = russo.tool_call("book_flight", to_city="LA")


def _toolcalls_run(output: Path, books: set[str]) -> Path:
    @russo.agent
    async def agent(audio: russo.Audio) -> russo.AgentResponse:
        return russo.AgentResponse(tool_calls=[BOOK] if audio.transcript in books else [])

    asyncio.run(russo.run_concurrent(
        ["fly to LA", "LA please", "get me to LA"], TextSynthesizer(), agent, None, [BOOK],
        runs=2, output_dir=output, show_progress=False,
    ))  # fmt: skip
    (run_dir,) = output.iterdir()
    return run_dir


def test_toolcalls_runs_compare_prompt_by_prompt(tmp_path: Path) -> None:
    a = _toolcalls_run(tmp_path / "a", {"fly to LA", "LA please"})
    b = _toolcalls_run(tmp_path / "b", {"fly to LA", "get me to LA"})
    report = compare_runs([load_run(a), load_run(b)])
    (comparison,) = report.comparisons
    assert comparison.regressions == ["LA please"] and comparison.fixes == ["get me to LA"]
    assert report.runs[0].door == "toolcalls" and report.runs[0].trials == 6
    assert report.runs[0].pass_rate == pytest.approx(4 / 6)
    rows = {row.task: row for row in comparison.tasks}
    assert rows["LA please"].a is not None and rows["LA please"].a.mean_reward == 1.0  # match
    result = _helios("compare", str(a), str(b), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "LA please" in result.stdout


# -- runs written with the real record classes -------------------------------------------
def write_run(
    run_dir: Path,
    outcomes: dict[str, Sequence[bool]],
    *,
    cost: float | None = 0.01,
    duration: float = 2.0,
    model: str = "scripted",
) -> Path:
    """A finished batch folder: run.json, a TrialResult line per attempt, a summary."""
    run_dir.mkdir(parents=True)
    write_json_atomic(run_dir / "run.json", run_metadata("batch", agent="tool", model=model))
    stream = RecordStream(run_dir / "results.jsonl")
    for index, (task, passes) in enumerate(outcomes.items()):
        for attempt, passed in enumerate(passes, start=1):
            trial = TrialResult(
                trial_id=f"{index:04d}-{attempt}", task_name=task, task_path=f"/t/{index:04d}",
                attempt=attempt, agent="tool", model=model, provider="local",
                status="passed" if passed else "failed", reward=1.0 if passed else 0.0,
                duration=duration, usage=Usage(cost_usd=cost), started_at="t", finished_at="t",
                folder=f"{index:03d}_{task}",
            )  # fmt: skip
            stream.append(trial.model_dump(mode="json"))
    stream.close()
    write_json_atomic(run_dir / "batch_summary.json", {"duration_seconds": 12.5})
    return run_dir


def _random_outcomes(seed: int, tasks: int, p: float) -> dict[str, list[bool]]:
    rng = random.Random(seed)
    return {f"task-{i:03d}": [rng.random() < p] for i in range(tasks)}


def _direct_interval(
    a: dict[str, list[bool]], b: dict[str, list[bool]], seed: int, resamples: int
) -> tuple[float, float]:
    """The paired bootstrap written out: resample the shared tasks with replacement,
    take the mean of B's pass rate minus A's, sort, read the 2.5% and 97.5% points."""
    shared = [task for task in a if task in b]
    differences = [sum(b[t]) / len(b[t]) - sum(a[t]) / len(a[t]) for t in shared]
    rng = random.Random(seed)
    means = []
    for _ in range(resamples):
        sample = rng.choices(differences, k=len(differences))
        means.append(sum(sample) / len(sample))
    means.sort()
    return means[int(0.025 * resamples)], means[min(resamples - 1, int(0.975 * resamples))]


def test_the_interval_is_the_paired_bootstrap_computed_directly(tmp_path: Path) -> None:
    outcomes_a = _random_outcomes(1, 60, 0.7)
    outcomes_b = _random_outcomes(2, 60, 0.5)
    a = write_run(tmp_path / "a", outcomes_a)
    b = write_run(tmp_path / "b", outcomes_b)
    expected = _direct_interval(outcomes_a, outcomes_b, seed=7, resamples=500)
    (comparison,) = compare_runs([load_run(a), load_run(b)], seed=7, resamples=500).comparisons
    assert (comparison.ci.low, comparison.ci.high) == expected
    assert expected[0] < comparison.pass_rate_delta < expected[1]
    result = _helios("compare", str(a), str(b), "-f", "json", "--seed", "7", "--resamples",
                     "500", cwd=tmp_path)  # fmt: skip
    ci = json.loads(result.stdout)["comparisons"][0]["ci"]
    assert (ci["low"], ci["high"]) == expected and (ci["seed"], ci["resamples"]) == (7, 500)
    # the same seed gives the same interval; another seed another one
    again = compare_runs([load_run(a), load_run(b)], seed=7, resamples=500).comparisons[0]
    other = compare_runs([load_run(a), load_run(b)], seed=8, resamples=500).comparisons[0]
    assert again.ci == comparison.ci and other.ci != comparison.ci


def test_deltas_of_cost_duration_and_reward(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", {"x": [True, True], "y": [False, True]}, cost=0.02, duration=3)
    b = write_run(tmp_path / "b", {"x": [True, False], "y": [True, True]}, cost=0.05, duration=1)
    (c,) = compare_runs([load_run(a), load_run(b)]).comparisons
    assert (c.regressions, c.fixes) == (["x"], ["y"])
    assert c.cost_a_usd == pytest.approx(0.08) and c.cost_delta_usd == pytest.approx(0.12)
    assert c.duration_delta == pytest.approx(-8.0)
    rows = {row.task: row for row in c.tasks}
    assert rows["x"].reward_delta == -0.5 and rows["y"].reward_delta == 0.5
    assert rows["x"].cost_delta_usd == pytest.approx(0.03)
    assert c.pass_at_k_a == {"pass@1": 0.75, "pass@2": 1.0}
    unknown = write_run(tmp_path / "u", {"x": [True, True], "y": [True, True]}, cost=None)
    (priced,) = compare_runs([load_run(a), load_run(unknown)]).comparisons
    assert priced.cost_b_usd is None and priced.cost_delta_usd is None


def test_more_runs_each_against_the_first(tmp_path: Path) -> None:
    runs = [write_run(tmp_path / n, {"x": [n != "b"], "y": [True]}) for n in ("a", "b", "c")]
    report = compare_runs([load_run(r) for r in runs])
    assert [(c.a, c.b) for c in report.comparisons] == [
        (str(runs[0]), str(runs[1])), (str(runs[0]), str(runs[2]))
    ]  # fmt: skip
    assert [c.regressions for c in report.comparisons] == [["x"], []]


def test_fail_if_worse_exits_1_on_a_clearly_worse_run_and_0_on_an_equal_one(
    tmp_path: Path,
) -> None:
    good = write_run(tmp_path / "good", {f"t{i}": [True] for i in range(20)})
    same = write_run(tmp_path / "same", {f"t{i}": [True] for i in range(20)})
    bad = write_run(tmp_path / "bad", {f"t{i}": [i < 4] for i in range(20)})
    worse = _helios("compare", str(good), str(bad), "--fail-if-worse", cwd=tmp_path)
    assert worse.returncode == 1
    assert "worse:" in worse.stderr and "-80.0 pp" in worse.stderr
    assert "significantly worse" in worse.stdout
    equal = _helios("compare", str(good), str(same), "--fail-if-worse", cwd=tmp_path)
    assert equal.returncode == 0, equal.stderr
    assert "no significant difference" in equal.stdout
    ungated = _helios("compare", str(good), str(bad), cwd=tmp_path)
    assert ungated.returncode == 0
    better = _helios("compare", str(bad), str(good), "--fail-if-worse", cwd=tmp_path)
    assert better.returncode == 0 and "significantly better" in better.stdout


# -- formats ---------------------------------------------------------------------------------
HOSTILE = ["[red]x[/red]", "<script>alert(1)</script>", "a|b", "[link](javascript:alert(1))",
           "esc\x1b[2Jname"]  # fmt: skip


@pytest.fixture
def hostile_runs(tmp_path: Path) -> tuple[Path, Path]:
    names = [*HOSTILE, "plain"]
    a = write_run(tmp_path / "a", {name: [True] for name in names}, model="[bold]m[/bold]")
    b = write_run(tmp_path / "b", {name: [name == "plain"] for name in names})
    return a, b


def test_each_format_parses(tmp_path: Path, hostile_runs: tuple[Path, Path]) -> None:
    a, b = hostile_runs
    as_json = _helios("compare", str(a), str(b), "-f", "json", cwd=tmp_path)
    assert as_json.returncode == 0, as_json.stderr
    report = json.loads(as_json.stdout)
    assert sorted(report["comparisons"][0]["regressions"]) == sorted(HOSTILE)
    assert report["runs"][0]["model"] == "[bold]m[/bold]"

    as_csv = _helios("compare", str(a), str(b), "-f", "csv", cwd=tmp_path)
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert len(rows) == len(HOSTILE) + 1
    assert {row["task"] for row in rows} == {*map(visible_name, HOSTILE), "plain"}
    by_task = {row["task"]: row for row in rows}
    assert by_task["a|b"]["change"] == "regressed" and by_task["a|b"]["reward_delta"] == "-1"
    assert by_task["plain"]["b_pass_rate"] == "1"

    as_markdown = _helios("compare", str(a), str(b), "-f", "markdown", "--tasks",
                          cwd=tmp_path)  # fmt: skip
    text = as_markdown.stdout
    # no bracket, angle bracket or pipe of a name is left unescaped: no markup, no
    # link, no HTML once rendered (escaped backslashes are dropped first)
    unescaped = re.sub(r"\\.", "", text.replace("\\\\", ""))
    assert not re.search(r"[<>\[\]]", unescaped), unescaped
    tables = _markdown_tables(text)
    assert len(tables) == 4  # runs, the comparison, the regressions, the tasks
    for table in tables:
        widths = {len(row) for row in table}
        assert len(widths) == 1, table  # every row has the header's number of cells
    regressions = {_unescape(row[0]) for row in tables[2][2:]}
    assert regressions == {visible_name(name) for name in HOSTILE}
    assert "\x1b" not in text + as_csv.stdout


def visible_name(name: str) -> str:
    return name.replace("\x1b", "\\x1b")


def _markdown_tables(text: str) -> list[list[list[str]]]:
    tables: list[list[list[str]]] = []
    current: list[list[str]] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            current.append(_cells(line))
        elif current:
            tables.append(current)
            current = []
    return tables


def _cells(line: str) -> list[str]:
    """A Markdown table row's cells: split at pipes that are not escaped."""
    inner = line.strip()[1:-1]
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", inner)]


def _unescape(cell: str) -> str:
    return re.sub(r"\\(.)", r"\1", cell)


def test_hostile_names_print_literally_in_the_terminal(
    tmp_path: Path, hostile_runs: tuple[Path, Path]
) -> None:
    a, b = hostile_runs
    result = _helios("compare", str(a), str(b), "--tasks", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for name in ("[red]x[/red]", "<script>alert(1)</script>", "[link](javascript:alert(1))",
                 "[bold]m[/bold]", "esc\\x1b[2Jname"):  # fmt: skip
        assert name in out, name
    assert "\x1b" not in out


# -- bad input -------------------------------------------------------------------------------
def test_a_damaged_line_is_named_and_the_rest_counts(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", {"x": [True], "y": [True], "z": [True]})
    b = write_run(tmp_path / "b", {"x": [False], "y": [True], "z": [True]})
    results = b / "results.jsonl"
    lines = results.read_text().splitlines(keepends=True)
    broken = json.loads(lines[1])  # y's record
    del broken["status"]
    lines[1:2] = ["{not json\n", json.dumps(broken) + "\n"]
    lines.append('{"trial_id": "being-written", "task_')  # a batch still appending
    results.write_text("".join(lines))
    before = results.read_bytes()
    result = _helios("compare", str(a), str(b), "-f", "json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"{results}:2: not JSON" in result.stderr
    assert f"{results}:3: Object missing required field `status`; skipped" in result.stderr
    assert f"{results}:5: an unfinished last line" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 3 and "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    assert report["runs"][1]["tasks"] == 2  # x and z; y's line was the damaged record
    assert report["comparisons"][0]["regressions"] == ["x"]
    assert report["comparisons"][0]["only_in_a"] == ["y"]
    assert len(report["runs"][1]["problems"]) == 3
    # read-only: the folder is left as it was (no quarantine, no rewrite)
    assert results.read_bytes() == before
    assert not (b / "results.quarantine.jsonl").exists()


def _one_line_exit_2(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    for needle in needles:
        assert needle in result.stderr, result.stderr


def test_paths_that_are_no_run_folder_exit_2_with_one_line(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", {"x": [True]})
    _one_line_exit_2(_helios("compare", str(run), str(tmp_path / "nope"), cwd=tmp_path),
                     "nope: no such folder")  # fmt: skip
    (tmp_path / "empty").mkdir()
    _one_line_exit_2(_helios("compare", str(run), str(tmp_path / "empty"), cwd=tmp_path),
                     "empty is not a Helios run folder")  # fmt: skip
    task = tmp_path / "tasks"
    _write_task(task, "hello", SOLVED)
    _one_line_exit_2(_helios("compare", str(run), str(task / "hello"), cwd=tmp_path),
                     "hello is not a Helios run folder")  # fmt: skip
    _one_line_exit_2(_helios("compare", str(run), str(run / "run.json"), cwd=tmp_path),
                     "not a folder")  # fmt: skip
    generate = tmp_path / "gen"
    write_json_atomic(generate / ".helios" / "run.json", run_metadata("generate"))
    _one_line_exit_2(_helios("compare", str(run), str(generate), cwd=tmp_path),
                     "`helios generate` run")  # fmt: skip
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "run.json").write_text("[1, 2")
    _one_line_exit_2(_helios("compare", str(run), str(tmp_path / "bad"), cwd=tmp_path),
                     "bad/run.json")  # fmt: skip
    unreadable = tmp_path / "unreadable"
    write_json_atomic(unreadable / "run.json", run_metadata("batch"))
    (unreadable / "results.jsonl").mkdir()
    _one_line_exit_2(_helios("compare", str(run), str(unreadable), cwd=tmp_path),
                     "unreadable/results.jsonl: Is a directory")  # fmt: skip
    _one_line_exit_2(_helios("compare", str(run), cwd=tmp_path), "two runs or more")
    _one_line_exit_2(_helios("compare", str(run), str(run), "-f", "yaml", cwd=tmp_path),
                     "--format yaml")  # fmt: skip


def test_the_facts_read_are_the_record_class_fields() -> None:
    """The reader decodes a few fields of a TrialResult line by name: they must be the
    record class's own, or a rename there would make every line "damaged" here."""
    for name in TrialFacts.__struct_fields__:
        assert name in TrialResult.model_fields, name
    assert "cost_usd" in Usage.model_fields


def _trial(task_path: str, passed: bool, attempt: int = 1) -> dict[str, Any]:
    return TrialResult(
        trial_id=f"{task_path}-{attempt}", task_name=Path(task_path).name, task_path=task_path,
        attempt=attempt, agent="oracle", provider="local",
        status="passed" if passed else "failed", reward=float(passed), started_at="t",
        finished_at="t", folder=Path(task_path).name,
    ).model_dump(mode="json")  # fmt: skip


def test_two_tasks_of_one_name_are_told_apart_by_their_path(tmp_path: Path) -> None:
    runs = []
    for name, outcomes in (("a", (True, True, True)), ("b", (True, False, True))):
        run = tmp_path / name
        write_json_atomic(run / "run.json", run_metadata("batch"))
        stream = RecordStream(run / "results.jsonl")
        for task_path, passed in zip(("/t/a/hello", "/t/b/hello", "/t/c/solo"), outcomes,
                                     strict=True):  # fmt: skip
            stream.append(_trial(task_path, passed))
        stream.close()
        runs.append(load_run(run))
    assert list(runs[0].tasks) == ["a/hello", "b/hello", "solo"]
    (comparison,) = compare_runs(runs).comparisons
    assert comparison.regressions == ["b/hello"] and comparison.shared_tasks == 3


def test_a_batch_with_only_its_summary_is_read_from_it(tmp_path: Path) -> None:
    """A batch folder without results.jsonl (copied without it, or an old Helios's):
    the summary's rows are the trials."""
    a = write_run(tmp_path / "a", {"x": [True], "y": [True]})
    b = tmp_path / "b"
    write_json_atomic(b / "run.json", run_metadata("batch", agent="tool", model=None))
    rows = [{"name": "x", "status": "passed", "reward": 1.0, "duration": 1.0, "attempt": 1},
            {"name": "y", "status": "failed", "reward": 0.0, "duration": 1.0, "attempt": 1},
            {"name": 3, "status": "passed"}]  # fmt: skip
    write_json_atomic(b / "batch_summary.json", {"tasks": rows, "duration_seconds": 3.0})
    run = load_run(b)
    assert list(run.tasks) == ["x", "y"] and run.wall_seconds == 3.0
    assert run.problems == [f"{b / 'batch_summary.json'}: tasks[2]: not a trial row "
                            "(name or status); skipped"]  # fmt: skip
    (comparison,) = compare_runs([load_run(a), run]).comparisons
    assert comparison.regressions == ["y"]


def test_load_run_refuses_with_one_line(tmp_path: Path) -> None:
    with pytest.raises(NotARun, match="no such folder"):
        load_run(tmp_path / "missing")


def test_report_round_trips_as_json(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", {"x": [True]})
    b = write_run(tmp_path / "b", {"x": [False], "w": [True]})
    report = compare_runs([load_run(a), load_run(b)])
    data: dict[str, Any] = json.loads(report.to_json())
    assert data == report.to_dict()
    assert data["comparisons"][0]["only_in_b"] == ["w"]
    assert data["runs"][0]["wall_seconds"] == 12.5 and data["runs"][0]["finished"] is True


# -- the terminal at 80 columns ----------------------------------------------------------------
def test_the_tables_read_at_80_columns_in_a_real_terminal(tmp_path: Path) -> None:
    """In tmux at 80 columns: long run paths and models stay in the legend above the
    tables, so no column header or figure is cut."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux not installed")
    outcomes = {f"task-{i}": [True, i % 3 != 0, True] for i in range(6)}
    deep = tmp_path / "results" / ("a-very-long-folder-name-" * 3) / "batch_20261126_101500"
    a = write_run(deep, outcomes, model="anthropic/claude-sonnet-4-5-with-a-long-name")
    changed = {"task-0": [True, True, True], "task-1": [True, False, False]}  # fixed, regressed
    b = write_run(tmp_path / "b", outcomes | changed)
    done = tmp_path / "done"
    session = f"helios-{uuid.uuid4().hex[:8]}"
    env = ["env", "-u", "COLUMNS", "-u", "LINES"]
    if "PYTHONPATH" in os.environ:  # a tmux server started earlier has another env
        env.append(f"PYTHONPATH={os.environ['PYTHONPATH']}")
    command = shlex.join([*env, *helios_cmd("compare", str(a), str(b), "--tasks")])
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "80", "-y", "60",
         f"{command}; touch {done}; sleep 60"],
        check=True,
    )  # fmt: skip
    try:
        wait_until(done.exists, "helios compare's end", within=60)
        screen = subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", session, "-S", "-200"],
            capture_output=True, text=True,
        ).stdout  # fmt: skip
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    lines = screen.splitlines()
    header = next(line for line in lines if line.lstrip().startswith("run "))
    assert header.split() == ["run", "tasks", "pass", "rate", "pass@3", "mean", "reward",
                              "cost", "time"]  # fmt: skip
    (row_a,) = [line for line in lines if line.startswith(" A ") and "6×3" in line]
    assert row_a.split()[1:4] == ["6×3", "88.9%", "100.0%"]
    assert "B against A · 6 tasks paired" in screen
    assert re.search(r"pass rate\s+88\.9%\s+83\.3%\s+-5\.6 pp", screen)
    assert "1 task passed less often in B than in A" in screen
    assert re.search(r"task-0\s+fixed\s+2/3\s+3/3", screen)
    assert re.search(r"task-1\s+regressed\s+3/3\s+1/3", screen)
    assert all(len(line) <= 80 for line in lines)
