"""Selecting tasks (issue 33): globs, `[metadata]` fields, --limit, and a seeded
--sample that a resume keeps; `helios tasks list` reads and selects, runs nothing."""

from __future__ import annotations

import asyncio
import functools
import io
import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from helios import ParallelRunner
from helios.cli.job_options import apply_job
from helios.errors import ConfigError, InputError
from helios.tasks.job import load_job
from helios.tasks.plan import load_batch, load_tasks, resolve_task_dirs
from helios.tasks.selection import TaskSelection, selected_line
from helios.tasks.settings import TaskBatchSettings
from helios.tasks.task import Task
from tests.cli_inprocess import helios_inprocess

EXAMPLES = Path(__file__).parents[1] / "examples" / "tasks"


@functools.cache
def _examples() -> list[Task]:
    return load_tasks(resolve_task_dirs(EXAMPLES, "**/task.toml")).tasks


def _names(selection: TaskSelection) -> list[str]:
    return [task.name for task in selection.apply(_examples())]


def test_globs_and_metadata_select_tasks() -> None:
    every = _names(TaskSelection())
    assert len(every) == 8
    assert _names(TaskSelection(include=("hello-*",))) == ["hello-file"]
    assert _names(TaskSelection(include=("*/word-count",))) == ["word-count"]  # the path
    assert "hello-file" not in _names(TaskSelection(exclude=("hello*", "sort-*")))
    assert len(_names(TaskSelection(exclude=("hello*", "sort-*")))) == 6
    shell = _names(TaskSelection(category=("SHELL",)))  # case does not matter
    assert shell == ["find-largest", "fix-script"]
    assert _names(TaskSelection(task_tags=("csv", "wc"))) == ["csv-report", "word-count"]
    assert _names(TaskSelection(task_tags=("csv",), category=("shell",))) == []
    assert _names(TaskSelection(difficulty=("easy",))) == every
    assert _names(TaskSelection(difficulty=("hard",))) == []
    assert _names(TaskSelection(limit=3)) == every[:3]


def test_a_sample_is_the_same_for_the_same_seed() -> None:
    first = _names(TaskSelection(sample=3, seed=7))
    assert len(first) == 3 and first == _names(TaskSelection(sample=3, seed=7))
    assert first == sorted(first, key=_names(TaskSelection()).index)  # the order found
    others = {tuple(_names(TaskSelection(sample=3, seed=s))) for s in range(6)}
    assert len(others) > 1  # the seed chooses
    assert len(_names(TaskSelection(sample=3, seed=7, limit=2))) == 2
    assert len(_names(TaskSelection(sample=50))) == 8  # more than there are: all


def test_bad_counts_are_refused_naming_the_flag() -> None:
    with pytest.raises(ConfigError) as caught:
        TaskSelection(limit=0)
    assert caught.value.field == "--limit"


def test_nothing_selected_is_one_line() -> None:
    with pytest.raises(InputError, match=r"no task selected: 0 of 8 tasks selected by "
                                         r"--include nope"):  # fmt: skip
        load_batch(EXAMPLES, "**/task.toml", selection=TaskSelection(include=("nope",)))


def test_the_header_line_counts_what_was_found() -> None:
    assert selected_line(12, 3566) == "12 of 3,566 tasks selected"


def test_settings_and_job_files_take_the_selection(tmp_path: Path) -> None:
    settings = TaskBatchSettings.from_kwargs(include=["hello-*"], limit=2, sample=3, seed=4)
    assert settings.selection == TaskSelection(include=("hello-*",), limit=2, sample=3, seed=4)
    job = tmp_path / "job.yaml"
    job.write_text("tasks: [tasks]\ndifficulty: easy\nexclude: [a, b]\nlimit: 2\nseed: 9\n")
    loaded = load_job(job)
    merged = apply_job(TaskBatchSettings(), loaded, lambda name: name == "seed", job)
    # a flag given (here --seed) wins over the job's value
    assert merged.selection == TaskSelection(difficulty=("easy",), exclude=("a", "b"), limit=2)


def test_tasks_list_selects_and_runs_nothing(tmp_path: Path) -> None:
    done = helios_inprocess("tasks", "list", str(EXAMPLES), "--category", "shell", "--json",
                            cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [row["name"] for row in rows] == ["find-largest", "fix-script"]
    assert rows[0]["difficulty"] == "easy" and "shell" in rows[0]["tags"]
    assert rows[0]["path"] == str(EXAMPLES / "find-largest")
    shown = helios_inprocess("tasks", "list", str(EXAMPLES), "--limit", "2", cwd=tmp_path)
    assert shown.returncode == 0 and "2 of 8 tasks selected" in shown.stdout
    missing = helios_inprocess("tasks", "list", str(EXAMPLES), "--include", "zzz",
                               cwd=tmp_path)  # fmt: skip
    assert missing.returncode == 2
    assert "no task selected" in missing.stderr and len(missing.stderr.strip().splitlines()) == 1


@pytest.mark.usefixtures("need_bwrap")
def test_limit_runs_that_many_and_the_header_says_so(tmp_path: Path) -> None:
    out = io.StringIO()
    runner = ParallelRunner(
        EXAMPLES, agent="nop", provider="local", output_dir=tmp_path / "out", limit=3,
        console=Console(file=out, width=200, color_system=None), show_progress=True,
    )  # fmt: skip
    batch = asyncio.run(runner.run())
    assert len(batch.results) == 3
    assert "3 of 8 tasks selected" in out.getvalue()


@pytest.mark.usefixtures("need_bwrap")
def test_a_resume_of_a_sampled_run_runs_the_same_sample(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    shutil.copytree(EXAMPLES, tasks)
    args = ("batch", str(tasks), "--agent", "nop", "--provider", "local", "-o", "out", "-q")
    first = helios_inprocess(*args, "--sample", "2", "--seed", "3", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    (run_dir,) = (tmp_path / "out").iterdir()
    run = json.loads((run_dir / "run.json").read_text())
    saved = run["config"]["settings"]["selection"]
    assert (saved["sample"], saved["seed"]) == (2, 3)
    names = sorted(r["name"] for r in json.loads((run_dir / "batch_summary.json").read_text())[
        "tasks"])  # fmt: skip
    # the run folder's trials: one per sampled task
    folders = sorted(p.name for p in run_dir.iterdir() if (p / "result.json").is_file())
    assert len(folders) == 2
    # a trial lost (its folder and record gone): the resume runs it again, and only it
    lost = run_dir / folders[0]
    records = run_dir / "results.jsonl"
    lines = [line for line in records.read_text().splitlines() if folders[0] not in line]
    records.write_text("".join(line + "\n" for line in lines))
    shutil.rmtree(lost)
    again = helios_inprocess("batch", "--resume", str(run_dir), "-q", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    after = sorted(p.name for p in run_dir.iterdir() if (p / "result.json").is_file())
    assert after == folders  # the same sample, not the other six tasks
    resumed = json.loads((run_dir / "batch_summary.json").read_text())
    assert sorted(r["name"] for r in resumed["tasks"]) == names and len(names) == 2
    # the job file `helios config show` writes selects them again
    shown = helios_inprocess("config", "show", str(run_dir), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "sample: 2\n" in shown.stdout and "seed: 3\n" in shown.stdout
