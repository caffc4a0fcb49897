"""`helios tasks check`: the oracle must reach 1.0 and nop must stay below it; and
which schema features each task uses, and which of them are not honoured."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from helios.agents.registry import agent_class, available_agents
from helios.cli.common import Interrupted, handle_errors, run_coroutine, shown
from helios.display.console import SafeConsole, plain
from helios.environments.registry import sandbox_provider
from helios.errors import HeliosError
from helios.tasks.features import agent_limits, caveats, features_used
from helios.tasks.plan import LoadedTasks, load_tasks, resolve_task_dirs
from helios.tasks.runner import ParallelRunner
from helios.tasks.summary import BatchResult
from helios.tasks.task import Task

console = SafeConsole()


def tasks_check_command(
    tasks_dir: Annotated[Path, typer.Argument(help="Folder of tasks to check.")],
    provider: Annotated[str, typer.Option("--provider", help="docker or local.")] = "docker",
    n_concurrent: Annotated[int, typer.Option("--n-concurrent", "-n", min=1)] = 2,
    output: Annotated[Path, typer.Option("--output", "-o")] = Path("output"),
    pattern: Annotated[str, typer.Option("--pattern", "-p")] = "**/task.toml",
    debug: Annotated[bool, typer.Option("--debug")] = False,
) -> None:
    """Check tasks: the oracle must reach 1.0 and nop must stay below it.

    Also lists the schema features each task uses and what is not honoured;
    unsupported tasks are not run and are counted apart (they alone do not fail
    the check)."""
    try:
        loaded = load_tasks(resolve_task_dirs(tasks_dir, pattern), sandbox_provider(provider))
    except Exception as exc:
        handle_errors(exc, debug)
    _features_table(loaded, provider)
    broken: list[str] = []
    if loaded.tasks:
        try:
            oracle, nop = run_coroutine(_run(tasks_dir, provider, n_concurrent, output, pattern))
        except (Exception, Interrupted) as exc:
            handle_errors(exc, debug)
        broken = _report(oracle, nop)
    _skipped(loaded)
    n_broken = len(broken) + len(loaded.invalid)
    if n_broken:
        names = shown(", ".join(broken + [b.path for b in loaded.invalid]))
        console.print(f"[red]{n_broken} broken task(s)[/]: {names}", highlight=False)
        raise typer.Exit(1)
    suffix = f" ({len(loaded.unsupported)} unsupported, not run)" if loaded.unsupported else ""
    console.print(f"[green]all {len(loaded.tasks)} tasks healthy[/]{suffix}", highlight=False)


async def _run(
    tasks_dir: Path, provider: str, n_concurrent: int, output: Path, pattern: str
) -> tuple[BatchResult, BatchResult]:
    def runner_for(agent: str) -> ParallelRunner:
        # the live aggregate line (and the run folder after it), as `helios batch -q`
        return ParallelRunner(
            tasks_dir, n_concurrent=n_concurrent, agent=agent, provider=provider,
            output_dir=output, pattern=pattern, quiet=True, show_progress=True,
            report_inputs=False, run_prefix=f"check_{agent}",
        )  # fmt: skip

    # One after the other, so -n bounds the trials in flight.
    results = []
    for agent in ("oracle", "nop"):
        console.print(f"checking with {agent}:", highlight=False)
        results.append(await runner_for(agent).run())
    return results[0], results[1]


def _features_table(loaded: LoadedTasks, provider: str) -> None:
    table = Table(title="Task features")
    for column in ("task", "uses", "not honoured"):
        table.add_column(column)
    cls = sandbox_provider(provider)
    for task in loaded.tasks:
        used = ", ".join(features_used(task)) or "-"
        notes = "; ".join([*caveats(task, cls), *_agents_without(task)]) or "-"
        table.add_row(plain(task.name), plain(used), plain(notes))
    for skipped in loaded.unsupported:
        reasons = plain("; ".join(skipped.reasons), style="yellow")
        table.add_row(plain(Path(skipped.path).name), "-", reasons)
    if table.rows:
        console.print(table)


def _agents_without(task: Task) -> list[str]:
    """What the task offers its agent that some agents do not take (skills, MCP
    servers): the runs of those agents refuse it (the oracle and nop take it)."""
    refused: dict[str, list[str]] = {}
    for name in available_agents():
        try:
            limits = agent_limits(task, agent_class(name))
        except HeliosError:  # a plugin that cannot be loaded here: not for this table
            continue
        for limit in limits:
            refused.setdefault(limit.field, []).append(name)
    return [f"{field}: not for the {', '.join(names)} agent(s)"
            for field, names in refused.items()]  # fmt: skip


def _skipped(loaded: LoadedTasks) -> None:
    for bad in loaded.invalid:
        console.print(f"[red]invalid[/] {shown(bad.error)}", highlight=False, soft_wrap=True)
    for task in loaded.unsupported:
        console.print(
            f"[yellow]unsupported task[/] {shown(task.error)}", highlight=False, soft_wrap=True
        )
    unknown = loaded.unknown_keys_line()
    if unknown is not None:
        console.print(f"[yellow]warning[/] {shown(unknown)}", highlight=False, soft_wrap=True)


def _rewards(batch: BatchResult) -> dict[str, float]:
    return {r.name: r.reward for r in batch.results}


def _report(oracle: BatchResult, nop: BatchResult) -> list[str]:
    oracle_rewards, nop_rewards = _rewards(oracle), _rewards(nop)
    reasons = {r.name: r.reason for r in oracle.results if r.reason}
    table = Table(title="Task check")
    for column in ("task", "oracle", "nop", "verdict"):
        table.add_column(column)
    broken: list[str] = []
    outputs: list[tuple[str, str, Path]] = []
    for name in sorted(oracle_rewards):
        o, n = oracle_rewards[name], nop_rewards.get(name, 0.0)
        problems = []
        if o < 1.0:
            problems.append("oracle below 1.0" + (f" ({reasons[name]})" if name in reasons else ""))
        if n >= 1.0:
            problems.append("nop passes: the test accepts the initial state")
        if problems:
            broken.append(name)
        verdict = plain("healthy", "green") if not problems else plain("; ".join(problems), "red")
        table.add_row(plain(name), f"{o:g}", f"{n:g}", verdict)
        for agent, batch, flagged in (("oracle", oracle, o < 1.0), ("nop", nop, n >= 1.0)):
            where = verifier_output(batch, name) if flagged else None
            if where is not None:
                outputs.append((name, agent, where))
    console.print(table)
    for name, agent, where in outputs:
        console.print(
            f"{shown(name)}: the verifier's output with {agent}: {shown(str(where))}",
            highlight=False, soft_wrap=True,
        )  # fmt: skip
    return broken


def verifier_output(batch: BatchResult, name: str) -> Path | None:
    """The file with what `name`'s verifier printed in `batch` (its last step's, for a
    multi-step task); else the trial's folder; None when the batch kept no folder."""
    result = next((r for r in batch.results if r.name == name), None)
    if result is None or batch.output_dir is None or not result.folder:
        return None
    folder = batch.output_dir / result.folder
    steps = sorted(folder.glob("steps/*/verifier/test-stdout.txt"), key=lambda p: p.stat().st_mtime)
    for candidate in [folder / "verifier" / "test-stdout.txt", *reversed(steps)]:
        if candidate.is_file():
            return candidate
    return folder
