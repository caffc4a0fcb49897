"""`helios toolcalls --config c.yaml`: the tool-call front door on the command line.

Exit codes: 0 every run passed; 1 a run failed; 2 a bad config or invocation;
3 stopped by a budget (`--max-cost`, `--max-total-tokens`, `--max-duration`);
130 interrupted.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, cast

import typer

from helios.cli.common import (
    EXIT_BELOW_THRESHOLD,
    EXIT_BUDGET,
    EXIT_OK,
    err_console,
    fail,
    handle_errors,
    run_coroutine,
    shown,
)
from helios.cli.options import (
    BudgetHardOpt,
    DebugOpt,
    ExecutorOpt,
    MaxCostOpt,
    MaxDurationOpt,
    MaxTotalTokensOpt,
    NameOpt,
    RayAddressOpt,
    TagOpt,
)
from helios.text import visible
from helios.toolcalls.types import BatchResult

if TYPE_CHECKING:
    from helios.engine.config import Executor
    from helios.toolcalls.config import ToolcallsConfig


def toolcalls_command(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="The YAML config (synthesizer, agent, tests). "
                     "With --resume: the run's saved one, unless given."),
    ] = None,
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
    resume: Annotated[
        Path | None,
        typer.Option("--resume", help="A run folder (made with --output) to finish with the "
                     "config it saved: its recorded runs are not run again."),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="With --resume, accept other components than the run's.")
    ] = False,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
    name: NameOpt = None,
    tag: TagOpt = None,
    max_cost: MaxCostOpt = None,
    max_total_tokens: MaxTotalTokensOpt = None,
    max_duration: MaxDurationOpt = None,
    budget_hard: BudgetHardOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Run the tool-call tests of a YAML config; print the summary; exit 1 if a run failed."""
    from helios.cli.resume import given
    from helios.engine.budget import BudgetConfig
    from helios.engine.labels import labels_of
    from helios.toolcalls.config import build_components, load_config
    from helios.toolcalls.report import check_report_path

    if config is None and resume is None:
        fail("--config is required (or --resume RUN_DIR of a run that saved its config)")
    try:
        labels = labels_of(name, tag)
        budget = BudgetConfig.of(max_cost, max_total_tokens, max_duration, budget_hard)
        if report is not None:
            check_report_path(report)
        # resumed here (--executor local): the cluster the run recorded is not asked for
        here = ("ray_address",) if given(ctx, "executor") and executor == "local" else ()
        found = _saved(ctx, resume, needed=config is None, here=here) if resume else None
        if found is not None:
            saved, saved_file, saved_runs, saved_limit, saved_executor = found
            runs = runs if runs is not None else saved_runs
            max_concurrency = max_concurrency or saved_limit
            if saved_executor is not None and not given(ctx, "executor"):
                executor = saved_executor  # a run on a Ray cluster goes on there
        if config is not None:
            parsed = load_config(config)
        else:
            assert found is not None  # `_saved` raised otherwise
            parsed, config = saved, saved_file
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
            settings={CONFIG_FILE: str(config.absolute()), RUNS: runs, EXECUTOR: executor,
                      **_saved_settings(parsed)},
            resume=resume, force=force, budget=budget, executor=cast("Executor", executor),
            ray_address=ray_address,
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
    if batch.budget_stopped:
        how = ("rerun with --resume RUN_DIR (its run folder) and a higher budget"
               if output is not None or resume is not None else
               "keep a run folder with --output, so that a resume with a higher budget can "
               "go on")  # fmt: skip
        err_console.print(f"[yellow]stopped by a budget:[/] {shown(batch.budget_stopped)}; {how}",
                          highlight=False, soft_wrap=True)  # fmt: skip
        raise typer.Exit(EXIT_BUDGET)
    raise typer.Exit(EXIT_OK if batch.passed else EXIT_BELOW_THRESHOLD)


def _saved_settings(parsed: ToolcallsConfig) -> dict[str, object]:
    """The config as run.json saves it: unset values left out, but `synthesizer: null`
    (text mode) kept, as its absence means the default synthesizer to a resume."""
    dumped = parsed.model_dump(mode="json")
    return {k: v for k, v in dumped.items() if v is not None or k == "synthesizer"}


#: what run.json's `config.settings` holds beside the YAML config: its file (relative
#: component paths are read from its folder), --runs and --executor
CONFIG_FILE, RUNS, EXECUTOR = "config_file", "runs_override", "executor"


def _saved(
    ctx: typer.Context, run_dir: Path, *, needed: bool, here: tuple[str, ...] = ()
) -> tuple[ToolcallsConfig, Path, int | None, int | None, str | None] | None:
    """The YAML config a run saved (run.json's `config`), validated again, with its
    file, --runs, the bound on runs in flight and the executor: one InputError line
    for anything that does not fit. None for a run of before config_version, unless
    `needed` (no --config given: an InputError). A Ray cluster's address the run
    recorded must be given again (a run folder never chooses where to connect), unless
    named in `here` (the run goes on elsewhere)."""
    from pydantic import ValidationError

    from helios.cli.resume import recorded_run, refuse_recorded_endpoints
    from helios.engine.saved_config import load_fields, saved_config
    from helios.engine.store import RUN_FILE
    from helios.errors import InputError
    from helios.toolcalls.config import ToolcallsConfig

    where = str(run_dir / RUN_FILE)
    run = recorded_run(run_dir, ("toolcalls",))
    refuse_recorded_endpoints(ctx, run, run_dir / RUN_FILE, here)
    config = saved_config(run, where)
    if config is None and not needed:
        return None
    if config is None:
        raise InputError("a run of before config_version saved no config: resume it with "
                         "--config FILE", file=where, field="config_version")  # fmt: skip
    settings = config.get("settings")
    if not isinstance(settings, dict):
        raise InputError("expected an object", file=where, field="config.settings")
    settings = dict(settings)
    head = load_fields(_Head, {k: settings.pop(k) for k in (CONFIG_FILE, RUNS, EXECUTOR)
                               if k in settings}, where, "config.settings")  # fmt: skip
    limit = load_fields(_Limit, {"max_concurrency": config.get("max_concurrency")}, where,
                        "config")  # fmt: skip
    try:
        parsed = ToolcallsConfig.model_validate(settings)
    except ValidationError as exc:
        error = exc.errors()[0]
        path = ".".join(str(part) for part in error["loc"])
        raise InputError(error["msg"], file=where, field=f"config.settings.{path}") from None
    file = head.get(CONFIG_FILE) or run_dir / "config.yaml"
    return (parsed, Path(file), head.get(RUNS), limit.get("max_concurrency"),
            head.get(EXECUTOR))  # fmt: skip


@dataclass
class _Head:
    config_file: Path | None = None
    runs_override: int | None = None
    executor: Literal["local", "ray"] | None = None


@dataclass
class _Limit:
    max_concurrency: int | None = None


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
