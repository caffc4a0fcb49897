"""`helios toolcalls --config c.yaml`: the tool-call front door on the command line.

Exit codes: 0 every run passed; 1 a run failed; 2 a bad config or invocation;
130 interrupted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from helios.cli.common import (
    EXIT_BELOW_THRESHOLD,
    EXIT_OK,
    fail,
    handle_errors,
    run_coroutine,
)
from helios.cli.options import DebugOpt, NameOpt, TagOpt
from helios.text import visible
from helios.toolcalls.types import BatchResult


def toolcalls_command(
    config: Annotated[
        Path, typer.Option("--config", "-c", help="The YAML config (synthesizer, agent, tests).")
    ],
    runs: Annotated[
        int | None, typer.Option("--runs", min=1, help="Runs per prompt (beats the config).")
    ] = None,
    max_concurrency: Annotated[
        int | None, typer.Option("--max-concurrency", min=1, help="Runs in flight at most.")
    ] = None,
    report: Annotated[
        Path | None, typer.Option("--report", help="Write a report: out.json or out.html.")
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Keep a run folder (records and summary) here."),
    ] = None,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Always synthesize (no audio cache).")
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Only the per-test table, no run details.")
    ] = False,
    name: NameOpt = None,
    tag: TagOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Run the tool-call tests of a YAML config; print the summary; exit 1 if a run failed."""
    from helios.engine.labels import labels_of
    from helios.toolcalls.config import build_components, load_config
    from helios.toolcalls.report import check_report_path

    try:
        labels = labels_of(name, tag)
        if report is not None:
            check_report_path(report)
        parsed = load_config(config)
        synthesizer, agent, evaluator = build_components(parsed, config)
        cases = parsed.cases(runs)
    except ValueError as exc:
        fail(str(exc))
    except Exception as exc:
        handle_errors(exc, debug)
    try:
        from helios.toolcalls.runner import run_cases

        batch = run_coroutine(run_cases(
            cases, synthesizer=synthesizer, agent=agent, evaluator=evaluator,
            max_concurrency=max_concurrency or parsed.max_concurrency,
            cache=False if no_cache else None, output_dir=output, labels=labels,
            settings={"config_file": str(config.absolute()),
                      **parsed.model_dump(mode="json", exclude_none=True)},
        ))  # fmt: skip
    except Exception as exc:
        handle_errors(exc, debug)
    entries = _print(batch, [test.id for test in parsed.tests], quiet)
    if report is not None:
        from helios.toolcalls.report import write_report

        try:
            typer.echo(visible(f"report written to {write_report(report, entries)}"))
        except OSError as exc:
            fail(f"{report}: {exc.strerror or exc}")
    raise typer.Exit(EXIT_OK if batch.passed else EXIT_BELOW_THRESHOLD)


def _print(batch: BatchResult, test_ids: list[str], quiet: bool) -> list[tuple[str, BatchResult]]:
    """The per-test summaries and the table; the failures' details once (under their
    test, or under the table with `quiet`). Test ids, prompts and tool names come
    from the config and the agent: their control characters are shown."""
    from helios.toolcalls.report import terminal_summary

    entries = []
    for test_id in test_ids:
        runs = [run for run in batch.runs if run.test_id == test_id]
        result = BatchResult(runs=runs)
        entries.append((test_id, result))
        if not quiet:
            typer.echo("\n" + visible(test_id, one_line=True))
            typer.echo(visible(result.summary()))
    typer.echo(visible(terminal_summary(entries, failures=quiet)))
    return entries
