"""`helios cleanup` and `helios tasks check`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from helios.cli.common import Interrupted, err_console, handle_errors, run_coroutine
from helios.tasks.runner import ParallelRunner
from helios.tasks.summary import BatchResult

console = Console()


def cleanup_command(
    run: Annotated[
        str | None, typer.Option("--run", help="Only what this run id left behind.")
    ] = None,
    force: Annotated[
        bool,
        typer.Option("--force", help="Also take sandboxes of batches that are still running."),
    ] = False,
    images: Annotated[
        bool, typer.Option("--images", help="Also remove images Helios built.")
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> None:
    """Remove leftover Helios containers and local sandboxes.

    Without --run it skips every batch whose process is still alive (--force
    takes them too)."""
    from helios.environments.docker import DockerEnvironment, remove_images
    from helios.environments.local import LocalEnvironment

    async def go() -> tuple[list[str], list[str], list[str]]:
        try:
            containers = await DockerEnvironment.cleanup_run(run, force=force)
        except Exception as exc:
            err_console.print(
                f"[yellow]docker skipped:[/] {escape(str(exc))}", highlight=False, soft_wrap=True
            )
            containers = []
        removed_images = await remove_images() if images else []
        sandboxes = await LocalEnvironment.cleanup_run(run, force=force)
        return containers, removed_images, sandboxes

    try:
        containers, removed_images, sandboxes = run_coroutine(go())
    except (Exception, Interrupted) as exc:
        handle_errors(exc, debug)
    console.print(
        f"removed {len(containers)} container(s), {len(removed_images)} image(s), "
        f"{len(sandboxes)} orphaned local sandbox(es)"
    )


def _rewards(batch: BatchResult) -> dict[str, float]:
    return {r.name: r.reward for r in batch.results}


def tasks_check_command(
    tasks_dir: Annotated[Path, typer.Argument(help="Folder of tasks to check.")],
    provider: Annotated[str, typer.Option("--provider", help="docker or local.")] = "docker",
    n_concurrent: Annotated[int, typer.Option("--n-concurrent", "-n", min=1)] = 2,
    output: Annotated[Path, typer.Option("--output", "-o")] = Path("output"),
    pattern: Annotated[str, typer.Option("--pattern", "-p")] = "**/task.toml",
    debug: Annotated[bool, typer.Option("--debug")] = False,
) -> None:
    """Check tasks: the oracle must reach 1.0 and nop must stay below it."""

    async def go() -> tuple[BatchResult, BatchResult, ParallelRunner]:
        def runner_for(agent: str) -> ParallelRunner:
            return ParallelRunner(
                tasks_dir, n_concurrent=n_concurrent, agent=agent, provider=provider,
                output_dir=output, pattern=pattern, quiet=True, show_progress=False,
                run_prefix=f"check_{agent}",
            )  # fmt: skip

        oracle_runner, nop_runner = runner_for("oracle"), runner_for("nop")
        # One after the other, so -n bounds the trials in flight.
        oracle = await oracle_runner.run()
        nop = await nop_runner.run()
        return oracle, nop, oracle_runner

    try:
        oracle, nop, runner = run_coroutine(go())
    except (Exception, Interrupted) as exc:
        handle_errors(exc, debug)
    broken = _report(oracle, nop)
    for bad in runner.invalid:
        console.print(f"[red]invalid[/] {escape(bad.error)}", highlight=False, soft_wrap=True)
    n_broken = len(broken) + len(runner.invalid)
    if n_broken:
        names = ", ".join(broken + [b.path for b in runner.invalid])
        console.print(f"[red]{n_broken} broken task(s)[/]: {names}")
        raise typer.Exit(1)
    console.print(f"[green]all {len(_rewards(oracle))} tasks healthy[/]")


def _report(oracle: BatchResult, nop: BatchResult) -> list[str]:
    oracle_rewards, nop_rewards = _rewards(oracle), _rewards(nop)
    errors = {r.name: r.error for r in oracle.results if r.error}
    table = Table(title="Task check")
    for column in ("task", "oracle", "nop", "verdict"):
        table.add_column(column)
    broken: list[str] = []
    for name in sorted(oracle_rewards):
        o, n = oracle_rewards[name], nop_rewards.get(name, 0.0)
        problems = []
        if o < 1.0:
            problems.append("oracle below 1.0" + (f" ({errors[name]})" if name in errors else ""))
        if n >= 1.0:
            problems.append("nop passes: the test accepts the initial state")
        if problems:
            broken.append(name)
        verdict = "[green]healthy[/]" if not problems else "[red]" + "; ".join(problems) + "[/]"
        table.add_row(name, f"{o:g}", f"{n:g}", verdict)
    console.print(table)
    return broken
