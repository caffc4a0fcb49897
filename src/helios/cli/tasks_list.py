"""`helios tasks list`: the tasks a batch would run, read and selected, nothing run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.cells import cell_len
from rich.text import Text

from helios.cli.batch import _dataset, _selection
from helios.cli.common import fail, handle_errors, shown
from helios.cli.options import (
    CategoryOpt,
    DatasetOpt,
    DebugOpt,
    DifficultyOpt,
    ExcludeOpt,
    IncludeOpt,
    LimitOpt,
    RegistryOpt,
    SampleOpt,
    SeedOpt,
    TaskTagOpt,
)
from helios.display.console import SafeConsole
from helios.tasks.plan import LoadedTasks, load_batch
from helios.tasks.selection import selected_line
from helios.tasks.task import Task
from helios.text import visible

console = SafeConsole()


def tasks_list_command(
    tasks_dir: Annotated[
        Path | None, typer.Argument(help="Folder searched for task.toml files.")
    ] = None,
    pattern: Annotated[
        str, typer.Option("--pattern", "-p", help="Glob for task.toml files.")
    ] = "**/task.toml",
    include: IncludeOpt = None,
    exclude: ExcludeOpt = None,
    task_tags: TaskTagOpt = None,
    difficulty: DifficultyOpt = None,
    category: CategoryOpt = None,
    limit: LimitOpt = None,
    sample: SampleOpt = None,
    seed: SeedOpt = 0,
    dataset: DatasetOpt = None,
    registry: RegistryOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object per task, in a list.")
    ] = False,
    debug: DebugOpt = False,
) -> None:
    """List the tasks a batch would run (name, path, tags, difficulty); runs nothing."""
    selection = _selection(
        include=include, exclude=exclude, task_tags=task_tags, difficulty=difficulty,
        category=category, limit=limit, sample=sample, seed=seed, debug=debug,
    )  # fmt: skip
    if dataset is not None and tasks_dir is not None:
        fail("give TASKS_DIR or -d/--dataset, not both")
    if dataset is not None:
        paths, _ = _dataset(dataset, registry, debug)
        pattern = "**/task.toml"
    elif tasks_dir is not None:
        paths = [tasks_dir]
    else:
        fail("missing TASKS_DIR (or -d NAME@VERSION)")
    try:
        # parse only: no task's files are hashed (a batch's trial ids need that)
        loaded = load_batch(paths, pattern, None, selection=selection, digests=False)
    except Exception as exc:
        handle_errors(exc, debug)
    rows = [_row(task) for task in loaded.tasks]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    _table(rows)
    _footer(loaded)


def _row(task: Task) -> dict[str, Any]:
    metadata = task.config.metadata
    tags = metadata.get("tags")
    return {
        "name": task.name, "path": str(task.origin or task.path),
        "tags": [str(t) for t in tags] if isinstance(tags, list) else
        ([str(tags)] if tags is not None else []),
        "difficulty": metadata.get("difficulty"), "category": metadata.get("category"),
    }  # fmt: skip


COLUMNS = ("name", "path", "tags", "difficulty", "category")


def _table(rows: list[dict[str, Any]]) -> None:
    """Aligned columns, one line a task, written at once: a rich Table measures and
    folds every cell, 0.6 ms a row (2 s for 3,566 tasks)."""
    cells = [[visible(text, one_line=True) for text in (
        row["name"], _relative(row["path"]), ", ".join(row["tags"]),
        str(row["difficulty"] or ""), str(row["category"] or ""))] for row in rows]  # fmt: skip
    widths = [max([len(name), *(cell_len(line[i]) for line in cells)])
              for i, name in enumerate(COLUMNS)]  # fmt: skip

    def line(texts: list[str] | tuple[str, ...]) -> str:
        padded = [t + " " * (w - cell_len(t)) for t, w in zip(texts[:-1], widths, strict=False)]
        return "  ".join([*padded, texts[-1]])

    console.print(Text(line(COLUMNS), style="bold"), soft_wrap=True)
    if cells:
        console.print(Text("\n".join(line(texts) for texts in cells)), soft_wrap=True)


def _relative(path: str) -> str:
    """The path from the current folder when it is under it (the table is narrow)."""
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


def _footer(loaded: LoadedTasks) -> None:
    for label, text in loaded.warning_lines():
        console.print(f"[yellow]{label}[/] {shown(text)}", highlight=False, soft_wrap=True)
    n = len(loaded.tasks)
    line = selected_line(n, loaded.found) if loaded.found is not None else f"{n:,} task(s)"
    console.print(line, highlight=False)
