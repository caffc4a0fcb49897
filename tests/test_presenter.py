"""Thin doors (issue 30): what a run shows goes through the display presenter.

A door's runner keeps its units, its door and its finish; its header, warnings,
live display and final panels are `helios.display.presenter.RunPresenter`'s. These
tests read the runners' source (no panel code grows back in them) and hold that the
presenter shows the same header rows as before for a batch, a run and a generate run.
"""

from __future__ import annotations

import ast
import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from helios.datagen.display import header_rows
from helios.datagen.settings import GenerateSettings
from helios.display.presenter import RunPresenter
from helios.display.progress import BatchProgress
from helios.display.trial import TrialView
from helios.engine.config import ConcurrencyConfig, OutputsConfig, RunConfig, SandboxConfig
from helios.engine.run import Run
from helios.models.services import ModelServices, open_model_services
from helios.tasks.report import header
from helios.tasks.settings import TaskBatchSettings

SRC = Path(__file__).resolve().parent.parent / "src" / "helios"
RUNNERS = ("tasks/runner.py", "datagen/runner.py", "toolcalls/runner.py")
#: issue 30 aims at about 150 lines; past this, something that is not the door's own
#: (config, screen, planning) has grown back into it
MAX_RUNNER_LINES = 200
#: what only the presenter (and a door's report or display module) may use to draw
DRAWING = {"header_panel", "Panel", "Table", "escape", "BatchProgress", "final_panels",
           "pass_at_k_panel", "results_panel"}  # fmt: skip
DRAWING_MODULES = {"rich.panel", "rich.table", "rich.markup", "rich.text"}


def _imports(path: Path) -> tuple[set[str], set[str]]:
    """(modules, names) a source file imports, anywhere in it."""
    modules: set[str] = set()
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
    return modules, names


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_door_runner_shows_its_run_through_the_presenter(runner: str) -> None:
    path = SRC / runner
    modules, names = _imports(path)
    assert "helios.display.presenter" in modules, f"{runner} does not use the presenter"
    assert not modules & DRAWING_MODULES, f"{runner} draws with {modules & DRAWING_MODULES}"
    assert not names & DRAWING, f"{runner} imports drawing code: {names & DRAWING}"
    source = path.read_text("utf-8")
    assert ".print(" not in source, f"{runner} prints itself: use the presenter"
    lines = len(source.splitlines())
    assert lines <= MAX_RUNNER_LINES, f"{runner} has {lines} lines (at most {MAX_RUNNER_LINES})"


def test_the_presenter_imports_no_door() -> None:
    modules, _ = _imports(SRC / "display" / "presenter.py")
    doors = {m for m in modules if m.split(".")[1:2] in (["tasks"], ["datagen"], ["toolcalls"])}
    assert not doors, f"the presenter imports doors: {doors}"


def _services(*models: str) -> ModelServices:
    """Model services whose endpoints carry a secret in their userinfo (never shown)."""
    first, *others = models
    services = open_model_services(first, base_url="http://user:s3cret@127.0.0.1:9/v1",
                                   api_key="sk-test-key")  # fmt: skip
    services.name = first
    for port, other in enumerate(others, start=10):
        more = open_model_services(other, base_url=f"http://127.0.0.1:{port}/v1",
                                   api_key="sk-test-key")  # fmt: skip
        more.name = other
        services.add_model(other, more)
    return services


def _in_run(
    tmp_path: Path, services: Callable[[], ModelServices] | None,
    show: Callable[[RunPresenter], Any], *, provider: str = "local", in_flight: int = 3,
) -> tuple[Any, RunPresenter, Path]:  # fmt: skip
    """`show(presenter)` inside an open run of that config; its result, the presenter
    and the run's folder."""
    screen = RunPresenter(Console(record=True, width=200))

    async def main() -> tuple[Any, Path]:
        async with Run(open_services=services, preflight=False) as run:
            await run.open(RunConfig(
                kind="batch", concurrency=ConcurrencyConfig(in_flight=in_flight),
                sandbox=SandboxConfig(provider=provider), outputs=OutputsConfig(parent=tmp_path),
            ))  # fmt: skip
            screen.attach(run)
            return show(screen), run.run_dir

    found, run_dir = asyncio.run(main())
    return found, screen, run_dir


def _tasks(view: str, **more: Any) -> TaskBatchSettings:
    return TaskBatchSettings.from_kwargs(
        n_concurrent=3, model="openai-compatible/scripted", provider="local", view=view, **more
    )


def test_a_batch_header_has_the_rows_it_always_had(tmp_path: Path) -> None:
    settings = _tasks("batch", n_attempts=2)

    def show(screen: RunPresenter) -> tuple[str, dict[str, str]]:
        title, rows = header(screen, settings, task="tasks", agent="tool · scripted",
                             n_trials=8, n_pending=6, per_task=2, invalid=1)  # fmt: skip
        screen.header(title, rows)
        return title, rows

    (title, rows), screen, run_dir = _in_run(tmp_path, lambda: _services("openai-compatible/a"),
                                             show)  # fmt: skip
    assert title == "Helios batch"
    assert rows == {
        "Tasks": "4 found, 1 invalid",
        "Attempts": "2",
        "Trials": "8 (2 already done)",
        "Concurrency": "3",
        "Agent": "tool · scripted",
        "Endpoint": "http://127.0.0.1:9/v1",
        "Environment": "local",
        "Output": str(run_dir),
    }
    printed = screen.console.export_text()
    assert "Helios batch" in printed and "s3cret" not in printed and str(run_dir) in printed


def test_a_run_header_names_the_task_and_every_endpoint(tmp_path: Path) -> None:
    settings = _tasks("trial", n_attempts=1)

    def show(screen: RunPresenter) -> tuple[str, dict[str, str]]:
        return header(screen, settings, task="examples/hello", agent="tool", n_trials=1,
                      n_pending=1, per_task=1)  # fmt: skip

    services = lambda: _services("openai-compatible/a", "openai-compatible/b")  # noqa: E731
    (title, rows), _, run_dir = _in_run(tmp_path, services, show)
    assert title == "Helios run"
    assert list(rows) == ["Task", "Agent", "Endpoints", "Environment", "Output"]
    assert rows["Task"] == "examples/hello" and rows["Environment"] == "local"
    assert rows["Endpoints"] == (
        "openai-compatible/a: http://127.0.0.1:9/v1 · openai-compatible/b: http://127.0.0.1:10/v1"
    )
    assert rows["Output"] == str(run_dir)
    # no model (an oracle): no endpoint row
    oracle = TaskBatchSettings.from_kwargs(provider="local", view="trial", agent="oracle")
    (_, rows), _, _ = _in_run(tmp_path, None, lambda screen: header(
        screen, oracle, task="t", agent="oracle", n_trials=1, n_pending=1, per_task=1))  # fmt: skip
    assert "Endpoint" not in rows and "Endpoints" not in rows


def test_a_generate_header_reads_the_runs_config(tmp_path: Path) -> None:
    settings = GenerateSettings(
        dataset_file=tmp_path / "p.jsonl", batch_size=5, run_name="r",
        model="openai-compatible/a", num_workers=7, output_dir=tmp_path,
    )  # fmt: skip

    def show(screen: RunPresenter) -> dict[str, str]:
        return header_rows(screen, settings, total=10, pending=4, bad_lines=2, first_batch=3,
                           run_dir=settings.run_dir)  # fmt: skip

    rows, _, _ = _in_run(tmp_path, lambda: _services("openai-compatible/a"), show,
                         provider="docker", in_flight=7)  # fmt: skip
    assert rows == {
        "Dataset": f"{tmp_path / 'p.jsonl'} (10 prompts, 2 bad lines)",
        "Prompts": "4 to run, 6 already done",
        "Batches": "5 prompts each, from batch_3",
        "Concurrency": "7 prompts in flight",
        "Model": "openai-compatible/a @ http://127.0.0.1:9/v1",
        "Distribution": "default",
        "Sandbox": "docker",
        "Output": str(tmp_path / "r"),
    }


def _screen(**options: Any) -> RunPresenter:
    return RunPresenter(Console(record=True, width=200), **options)


def test_warnings_are_escaped_and_quiet_keeps_only_the_output_line() -> None:
    screen = _screen()
    screen.warn("invalid task", "[bold]x[/bold] in task.toml")
    screen.say("adopted [red]3[/red] rows", "cyan")
    screen.caution("bad line \x1b[31m")
    text = screen.console.export_text()
    assert "invalid task [bold]x[/bold] in task.toml" in text
    assert "adopted [red]3[/red] rows" in text and "warning: bad line" in text
    assert "\x1b" not in text  # a control character is shown, never sent

    quiet = _screen(quiet=True)
    quiet.header("Helios batch", {"Tasks": "1 found"})
    quiet.finish(["a final panel"], output=Path("out/batch_1"))
    assert quiet.console.export_text() == "Output: out/batch_1\n"

    silent = _screen(show=False)
    silent.warn("warning", "not shown")
    silent.warn("warning", "cannot write batch_summary.json", always=True)
    silent.finish(["a final panel"], output=Path("out"))
    assert silent.console.export_text() == "warning cannot write batch_summary.json\n"
    assert silent.shown(BatchProgress(silent.console, total=0)) is None


def test_the_live_display_is_the_views(tmp_path: Path) -> None:
    screen = _screen()
    assert isinstance(screen.live("trial", agent="tool"), TrialView)
    screen.services = _services("openai-compatible/a")
    progress = screen.live()
    assert isinstance(progress, BatchProgress)
    assert progress.extra_source is not None  # the model's figures (no budget: nothing more)
    assert progress.extra_source() == screen.services.live_line()
    assert screen.shown(progress) is progress
