"""`helios export RUN`: a run's outputs in another tool's format.

A generate run exports its trajectories for training (`--format sharegpt`, `openai`,
`parquet`: helios.datagen.export); a task run (`helios batch`, `helios run`) exports
as a Harbor job folder (`--format harbor`: helios.results.harbor_export). The run's
kind in its run.json decides which formats apply: the wrong pair is one error line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from helios.cli.common import err_console, handle_errors, shown
from helios.display.console import SafeConsole

#: the formats of a task run (the others are a generate run's)
TASK_FORMATS = ("harbor",)


def _opt(*names: str, help: str) -> Any:
    return typer.Option(*names, help=help)


def export_command(
    run: Annotated[
        Path,
        typer.Argument(
            help="A run folder: a generate run (e.g. data/my_run), or a "
            "`helios batch`/`helios run` folder for --format harbor."
        ),
    ],
    fmt: Annotated[
        str,
        _opt(
            "--format",
            "-f",
            help="sharegpt | openai | parquet (a generate run); "
            "harbor (a task run: a Harbor job folder).",
        ),
    ] = "sharegpt",
    output: Annotated[
        Path | None,
        _opt(
            "--output",
            "-o",
            help="Output file (default: RUN/export/sharegpt.jsonl, openai.jsonl or "
            "sharegpt.parquet); for harbor, the job folder (default: "
            "RUN/export/harbor/<RUN's name>).",
        ),
    ] = None,
    force: Annotated[
        bool,
        _opt(
            "--force",
            help="harbor: replace an existing output folder (the new "
            "one is complete before the old one goes).",
        ),
    ] = False,
    debug: Annotated[bool, _opt("--debug", help="Show tracebacks.")] = False,
) -> None:
    """Export a run for training, or as a Harbor job folder.

    A generate run: --format sharegpt, openai or parquet. A `helios batch` or
    `helios run` folder: --format harbor."""
    try:
        if fmt == "harbor":
            _export_harbor(run, output, force)
            return
        _refuse_task_run(run, fmt)
        from helios.datagen.export import export_run

        target, count = export_run(run, fmt, output)
    except Exception as exc:
        handle_errors(exc, debug)
    SafeConsole().print(f"{count} rows → {shown(str(target))}", highlight=False, soft_wrap=True)


def _export_harbor(run: Path, output: Path | None, force: bool) -> None:
    from helios.results.harbor_export import export_harbor

    report = export_harbor(run, output, force=force)
    for line in report.problems:
        err_console.print(f"[yellow]warning:[/] {shown(line)}", highlight=False, soft_wrap=True)
    SafeConsole().print(
        f"{report.trials} trial{'' if report.trials == 1 else 's'} → "
        f"{shown(str(report.target))} (a Harbor job folder)",
        highlight=False,
        soft_wrap=True,
    )


def _refuse_task_run(run: Path, fmt: str) -> None:
    """A task run asked for a generate run's format: one line naming the right one."""
    from helios.engine.store import RUN_FILE
    from helios.errors import InputError
    from helios.safe_json import JsonValueError, parse_json

    path = run / RUN_FILE
    if not path.is_file():
        return
    try:
        kind = parse_json(path.read_bytes()).get("kind")
    except (OSError, JsonValueError, AttributeError):
        return
    if kind in ("batch", "run"):
        raise InputError(
            f"{run} is a `helios {kind}` run: it exports as a Harbor job folder "
            f"(--format harbor), not as {fmt}"
        )
