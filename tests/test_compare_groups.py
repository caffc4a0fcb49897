"""`helios compare --by model|agent|tag:KEY`, `--baseline` and `--tag KEY=VALUE`: one
run of two models compared model by model, runs grouped and selected by tag, and the
runs' names and tags shown, hostile ones escaped or left out with one line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from helios.engine.store import run_metadata, write_json_atomic

from .cli_inprocess import helios_inprocess
from .multi_model_run import write_multi_model_run
from .test_compare import write_run

#: per task: does model alpha pass it, does model beta (two attempts each)
ALPHA = {"both": [True, True], "regresses": [True, True], "fixed": [False, False],
         "never": [False, False]}  # fmt: skip
BETA = {"both": [True, True], "regresses": [False, False], "fixed": [True, True],
        "never": [False, True]}  # fmt: skip


def _compare(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return helios_inprocess("compare", *args, cwd=cwd)


@pytest.fixture
def two_models(tmp_path: Path) -> Path:
    """One run: models alpha and beta, each with the tool agent; beta with oracle too."""
    return write_multi_model_run(tmp_path / "jobs" / "batch_x", {
        ("openai/alpha", "tool"): ALPHA, ("openai/beta", "tool"): BETA,
        ("openai/beta", "oracle"): {name: [True] for name in ALPHA},
    }, name="models × agents", tags={"suite": "smoke"})  # fmt: skip


def test_by_model_compares_within_one_run(tmp_path: Path, two_models: Path) -> None:
    result = _compare(str(two_models), "--by", "model", "--format", "json", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert [run["label"] for run in report["runs"]] == ["model=openai/alpha", "model=openai/beta"]
    assert [run["model"] for run in report["runs"]] == ["openai/alpha", "openai/beta"]
    alpha, beta = report["runs"]
    assert (alpha["trials"], alpha["passed"]) == (8, 4)
    assert (beta["trials"], beta["passed"]) == (12, 9)  # the oracle's 4 trials are beta's too
    assert alpha["wall_seconds"] is None  # a group's time is not the run's
    (comparison,) = report["comparisons"]
    assert comparison["regressions"] == ["regresses"] and comparison["fixes"] == ["fixed", "never"]
    assert comparison["shared_tasks"] == 4 and comparison["note"] is None


def test_by_agent_and_the_baseline(tmp_path: Path, two_models: Path) -> None:
    result = _compare(str(two_models), "--by", "agent", "--baseline", "tool", "--format", "json",
                      cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [run["label"] for run in report["runs"]] == ["agent=tool", "agent=oracle"]
    assert report["runs"][1]["pass_rate"] == 1.0 and report["runs"][1]["model"] == "openai/beta"
    (comparison,) = report["comparisons"]
    # tool: alpha and beta together; the oracle passes all
    assert comparison["fixes"] == ["fixed", "never", "regresses"]
    assert comparison["regressions"] == []
    # the text: each group, then the flips between them, as between two runs
    text = _compare(str(two_models), "--by", "model", "--baseline", "openai/beta", cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    out = text.stdout
    assert out.index("model=openai/beta") < out.index("model=openai/alpha")
    assert "(baseline)" in out and "regresses" in out and "fixed" in out
    bad = _compare(str(two_models), "--by", "model", "--baseline", "gpt-9", cwd=tmp_path)
    assert bad.returncode == 2
    assert "no model has it (found: openai/alpha, openai/beta)" in bad.stderr


def test_one_model_or_a_bad_by_exits_2_in_one_line(tmp_path: Path) -> None:
    run = write_run(tmp_path / "one", {"t": [True]}, model="solo")
    for args, needle in (
        (("--by", "model"), "needs two values or more; the runs given have one (model=solo)"),
        (("--by", "colour"), "--by colour: use model, agent or tag:KEY"),
        (("--by", "tag:"), "use model, agent or tag:KEY"),
        (("--baseline", "x"), "--baseline needs --by"),
        (("--tag", "nokey"), "a tag is key=value"),
    ):
        result = _compare(str(run), *args, cwd=tmp_path)
        assert result.returncode == 2, (args, result.stdout)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], (args, result.stderr)


def _tagged(root: Path, name: str, tags: object, passes: list[bool]) -> Path:
    outcomes = {f"task-{i}": [ok] for i, ok in enumerate(passes)}
    run = write_run(root / name, outcomes)
    meta = json.loads((run / "run.json").read_text())
    meta["tags"] = tags
    write_json_atomic(run / "run.json", meta)
    return run


def test_by_tag_groups_runs_and_tag_selects_them(tmp_path: Path) -> None:
    root = tmp_path / "results"
    _tagged(root, "r1", {"prompt": "v2", "day": "mon"}, [True, False, True])
    _tagged(root, "r2", {"prompt": "v1", "day": "mon"}, [True, True, True])
    _tagged(root, "r3", {"prompt": "v2", "day": "tue"}, [False, False, True])
    _tagged(root, "r4", {"day": "tue"}, [True, True, True])
    result = _compare(str(root), "--by", "tag:prompt", "--format", "json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    # in the order of the first run of each value (runs under a folder: by path)
    labels = [run["label"] for run in report["runs"]]
    assert labels == ["prompt=v2 (2 runs)", "prompt=v1"]
    assert report["runs"][0]["trials"] == 6 and report["runs"][0]["passed"] == 3
    assert f"{root / 'r4'} has no tag prompt: left out" in result.stderr
    (comparison,) = report["comparisons"]
    assert comparison["fixes"] == ["task-0", "task-1"] and comparison["regressions"] == []
    # --tag selects: only Monday's runs, compared as runs
    monday = _compare(str(root), "--tag", "day=mon", "--format", "json", cwd=tmp_path)
    assert monday.returncode == 0, monday.stderr
    runs = json.loads(monday.stdout)["runs"]
    assert [Path(run["path"]).name for run in runs] == ["r1", "r2"]
    assert runs[0]["tags"] == {"prompt": "v2", "day": "mon"}
    assert "2 run(s) without day=mon left out" in monday.stderr
    alone = _compare(str(root), "--tag", "day=wed", cwd=tmp_path)
    assert alone.returncode == 2 and "hold one (none)" in alone.stderr


def test_names_and_tags_show_and_hostile_ones_are_escaped(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", {"t": [True]})
    b = write_run(tmp_path / "b", {"t": [False]})
    write_json_atomic(a / "run.json", run_metadata(
        "batch", agent="tool", model="m", name="base\x1b[2J\x1b]0;pwned\x07 <b>line",
        tags={"html": "<script>alert(1)</script>", "ansi": "\x1b[31mred"},
    ))  # fmt: skip
    write_json_atomic(b / "run.json", run_metadata(
        "batch", agent="tool", model="m", name=["not", "a", "string"], tags="team=x",
    ))  # fmt: skip
    result = _compare(str(a), str(b), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "base\\x1b[2J" in result.stdout and "<b>line" in result.stdout
    assert "html=<script>alert(1)</script>" in result.stdout
    # the wrong types: one warning line each, the comparison still made
    assert "field name: expected a string, got list; ignored" in result.stderr
    assert "field tags: expected an object, got str; ignored" in result.stderr
    report = json.loads(_compare(str(a), str(b), "--format", "json", cwd=tmp_path).stdout)
    assert report["runs"][0]["tags"]["ansi"] == "\x1b[31mred"  # JSON keeps the text as is
    assert report["runs"][1]["name"] is None and report["runs"][1]["tags"] == {}
    markdown = _compare(str(a), str(b), "--format", "markdown", cwd=tmp_path).stdout
    assert "\x1b" not in markdown and "html=\\<script\\>" in markdown
    # a huge name is cut on the line, never wrapped over the screen
    write_json_atomic(b / "run.json", run_metadata("batch", agent="tool", model="m",
                                                   name="N" * 5000))  # fmt: skip
    huge = _compare(str(a), str(b), cwd=tmp_path)
    assert huge.returncode == 0 and "N" * 79 + "…" in huge.stdout and "N" * 81 not in huge.stdout
