"""`helios compare RUN_A RUN_B [...]`: runs compared task by task, in the terminal or as
a report (JSON, CSV, Markdown) for CI.

Exit codes: 0 compared; 1 with `--fail-if-worse`, a run is significantly worse than the
baseline; 2 a path that is no run folder, or a bad option.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from helios.cli.common import EXIT_BELOW_THRESHOLD, EXIT_OK, err_console, fail, shown
from helios.display.console import SafeConsole, plain
from helios.engine.labels import parse_tag
from helios.errors import InputError
from helios.figures import percent, points
from helios.results.compare import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    CompareReport,
    Comparison,
    compare_runs,
)
from helios.results.formats import (
    attempts,
    flip_titles,
    interval,
    money,
    seconds,
    signed_money,
    signed_seconds,
    to_csv,
    to_markdown,
    verdict,
)
from helios.results.groups import By, group, select
from helios.results.runs import NotARun, load_runs

#: flips and tasks listed per comparison in the terminal unless --limit says otherwise
DEFAULT_LIMIT = 20


def compare_command(
    runs: Annotated[
        list[Path],
        typer.Argument(
            help="Run folders (helios batch, helios run, helios toolcalls --output), or "
            "folders of runs such as the -o folder of several batches. The first run is "
            "the baseline; each other run is compared with it.",
            show_default=False,
        ),
    ],
    output_format: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            help="text (tables), json (everything), csv (a row per task and run), "
            "markdown (the tables, for a report or a pull request).",
        ),
    ] = "text",
    tasks: Annotated[
        bool, typer.Option("--tasks", help="List every task, not only the flips.")
    ] = False,
    limit: Annotated[
        int,
        typer.Option(
            "--limit",
            min=0,
            help="Flips and tasks listed per comparison in text "
            "and markdown (0: all). json and csv list all.",
        ),
    ] = DEFAULT_LIMIT,
    fail_if_worse: Annotated[
        bool,
        typer.Option(
            "--fail-if-worse",
            help="Exit 1 when a run is significantly worse than "
            "the baseline: the upper bound of its pass-rate difference's 95% "
            "interval is below 0.",
        ),
    ] = False,
    seed: Annotated[
        int, typer.Option("--seed", help="Seed of the bootstrap (same seed, same interval).")
    ] = DEFAULT_SEED,
    resamples: Annotated[
        int, typer.Option("--resamples", min=1, help="Bootstrap resamples of the tasks.")
    ] = DEFAULT_RESAMPLES,
    by: Annotated[
        str | None,
        typer.Option(
            "--by",
            help="Compare groups instead of runs: model or agent (each trial by its "
            "record's; works within ONE run of several models), or tag:KEY (each run by "
            "its tag KEY; runs without it are left out).",
        ),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option(
            "--baseline",
            help="With --by: the value whose group is A (default: the first model or "
            "agent in sort order; the tag value of the first run given).",
        ),
    ] = None,
    tag: Annotated[
        list[str] | None,
        typer.Option("--tag", help="KEY=VALUE, repeatable: compare only the runs with these tags."),
    ] = None,
) -> None:
    """Compare runs task by task: pass rates with a paired bootstrap 95% interval, the
    tasks that flipped, rewards, pass@k, cost and time. With --by, compare the models,
    agents or tag values of the runs instead."""
    if output_format not in ("text", "json", "csv", "markdown"):
        fail(f"--format {output_format}: use text, json, csv or markdown")
    if baseline is not None and by is None:
        fail("--baseline needs --by (the first run given is the baseline)")
    try:
        wanted = dict(parse_tag(text) for text in tag or ())
        grouping = By.parse(by) if by is not None else None
        loaded = load_runs(runs)
    except InputError as exc:
        fail(str(exc))
    compared, skipped = select(loaded.runs, wanted), list(loaded.skipped)
    if wanted and len(compared) < len(loaded.runs):
        skipped.append(f"{len(loaded.runs) - len(compared)} run(s) without "
                       f"{', '.join(tag or ())} left out")  # fmt: skip
    if grouping is not None:
        try:
            grouped = group(compared, grouping, baseline)
        except NotARun as exc:
            fail(str(exc))
        skipped += grouped.left_out
        if len(grouped.groups) < 2:
            found = grouped.groups[0].label if grouped.groups else "none"
            fail(f"comparing by {grouping.title} needs two values or more; the runs given "
                 f"have one ({found})")  # fmt: skip
        compared = grouped.groups
    elif len(compared) < 2:
        found = compared[0].label if compared else "none"
        fail(f"comparing needs two runs or more; the paths given hold one ({found})")
    report = compare_runs(compared, resamples=resamples, seed=seed, skipped=skipped)
    _warn(report)
    if output_format == "json":
        sys.stdout.write(report.to_json() + "\n")
    elif output_format == "csv":
        sys.stdout.write(to_csv(report))
    elif output_format == "markdown":
        sys.stdout.write(to_markdown(report, tasks=tasks, limit=limit))
    else:
        print_report(SafeConsole(highlight=False), report, tasks=tasks, limit=limit)
    worse = report.worse
    if fail_if_worse and worse:
        for comparison in worse:
            err_console.print(
                f"[red]worse:[/] {shown(comparison.b)} passes "
                f"{points(comparison.pass_rate_delta)} against {shown(comparison.a)} "
                f"({interval(comparison)})",
                highlight=False, soft_wrap=True,
            )  # fmt: skip
        raise typer.Exit(EXIT_BELOW_THRESHOLD)
    raise typer.Exit(EXIT_OK)


def _warn(report: CompareReport) -> None:
    """Damaged lines and skipped folders, on stderr (stdout stays the report)."""
    lines = [*report.skipped, *(p for run in report.runs for p in run.problems)]
    for line in lines:
        err_console.print(f"[yellow]warning:[/] {shown(line)}", highlight=False, soft_wrap=True)


# -- the terminal ----------------------------------------------------------------------
def print_report(console: Console, report: CompareReport, *, tasks: bool, limit: int) -> None:
    """The runs (a letter each, A the baseline), then each comparison: its figures, its
    verdict, its flips and (`tasks`) every task."""
    keys = {run.label: run_key(index) for index, run in enumerate(report.runs)}
    console.print(Text("Runs", style="bold"))
    for index, run in enumerate(report.runs):
        line = Text(f" {keys[run.label]}  ", style="bold")
        line.append(plain(run.label))
        if run.name is not None:
            line.append("  ")
            line.append(plain(cut(run.name), "bold"))
        who = " · ".join(part for part in (run.model, run.agent) if part)
        if who:
            line.append("  ")
            line.append(plain(who, "cyan"))
        if run.tags:
            line.append("  ")
            line.append(plain(cut(" ".join(f"{k}={v}" for k, v in run.tags.items())), "dim"))
        if index == 0:
            line.append("  (baseline)", style="dim")
        if not run.finished:
            line.append("  (unfinished)", style="yellow")
        console.print(line)
    console.print(_runs_table(report, keys))
    for comparison in report.comparisons:
        a, b = keys[comparison.a], keys[comparison.b]
        console.print(Text(f"{b} against {a} · {comparison.shared_tasks} tasks paired",
                           style="bold"))  # fmt: skip
        console.print(_comparison_table(comparison, a, b))
        line = Text(f"{verdict(comparison)} ", style=_verdict_style(comparison))
        line.append(f"({interval(comparison)}, {comparison.ci.resamples} resamples, "
                    f"seed {comparison.ci.seed})", style="dim")  # fmt: skip
        console.print(line)
        if comparison.note:
            console.print(plain(f"note: {comparison.note}", "yellow"))
        _print_flips(console, comparison, limit, a, b)
        if tasks:
            console.print(_tasks_table(comparison, limit, a, b))
        console.print()
    if not tasks and any(c.tasks for c in report.comparisons):
        console.print(Text("--tasks lists every task", style="dim"))


def cut(text: str, limit: int = 80) -> str:
    """A name or tags on one line of the runs list: at most `limit` characters."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def run_key(index: int) -> str:
    """A, B, … Z, then R27, R28, …"""
    return chr(ord("A") + index) if index < 26 else f"R{index + 1}"


def _verdict_style(comparison: Comparison) -> str:
    if comparison.significantly_worse:
        return "bold red"
    if comparison.significantly_better:
        return "bold green"
    return "bold"


def _runs_table(report: CompareReport, keys: dict[str, str]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    ks = {max(run.pass_at_k, key=lambda key: int(key[5:]), default="") for run in report.runs}
    same_k = ks.pop() if len(ks) == 1 else None
    table.add_column("run")
    for name in ("tasks", "pass rate", same_k if same_k is not None else "pass@k",
                 "mean reward", "cost", "time"):  # fmt: skip
        if name:
            table.add_column(name, justify="right")
    for run in report.runs:
        k = max(run.pass_at_k, key=lambda key: int(key[5:]), default=None)
        cells: list[Text | str] = [keys[run.label], _tasks_cell(run.tasks, run.trials),
                                   percent(run.pass_rate)]  # fmt: skip
        if same_k != "":
            shown_k = "" if k is None else percent(run.pass_at_k[k])
            cells.append(shown_k if same_k is not None or k is None else f"{k} {shown_k}")
        cells += [f"{run.mean_reward:.3f}", money(run.cost_usd), seconds(run.wall_seconds)]
        table.add_row(*cells)
    return table


def _tasks_cell(tasks: int, trials: int) -> str:
    """`8`, `8×3` (three attempts each), or `8 (15 trials)`."""
    if trials == tasks:
        return str(tasks)
    if tasks and trials % tasks == 0:
        return f"{tasks}×{trials // tasks}"
    return f"{tasks} ({trials} trials)"


def _comparison_table(c: Comparison, a: str, b: str) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("")
    for name in (a, b, f"Δ ({b} − {a})"):
        table.add_column(name, justify="right")
    table.add_row("pass rate", percent(c.pass_rate_a), percent(c.pass_rate_b),
                  Text(points(c.pass_rate_delta), style=_verdict_style(c)))  # fmt: skip
    table.add_row("mean reward", f"{c.mean_reward_a:.3f}", f"{c.mean_reward_b:.3f}",
                  f"{c.reward_delta:+.3f}")  # fmt: skip
    for key in c.pass_at_k_a:
        in_a, in_b = c.pass_at_k_a[key], c.pass_at_k_b[key]
        table.add_row(key, percent(in_a), percent(in_b), points(in_b - in_a))
    table.add_row("cost", money(c.cost_a_usd), money(c.cost_b_usd),
                  signed_money(c.cost_delta_usd))  # fmt: skip
    table.add_row("trial time", seconds(c.trial_seconds_a), seconds(c.trial_seconds_b),
                  signed_seconds(c.duration_delta))  # fmt: skip
    return table


def _print_flips(console: Console, c: Comparison, limit: int, a: str, b: str) -> None:
    by_name = {row.task: row for row in c.tasks}
    worse, better = flip_titles(c, a, b)
    for title, names, style in ((worse, c.regressions, "red"),
                                (better, c.fixes, "green")):  # fmt: skip
        head = Text(f"{len(names)} {'task' if len(names) == 1 else 'tasks'} {title}",
                    style=style)  # fmt: skip
        console.print(head)
        shown_names = names[:limit] if limit > 0 else names
        for name in shown_names:
            row = by_name[name]
            line = Text("  ")
            line.append(plain(name))
            line.append(f"  {attempts(row.a)} → {attempts(row.b)}", style="dim")
            console.print(line)
        if len(shown_names) < len(names):
            console.print(Text(f"  … and {len(names) - len(shown_names)} more "
                               "(--limit 0 lists all)", style="dim"))  # fmt: skip


def _tasks_table(c: Comparison, limit: int, a: str, b: str) -> Table:
    table = Table(title=f"Tasks ({len(c.tasks)})", title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False)  # fmt: skip
    table.add_column("task", overflow="fold")
    for name in ("change", a, b, "reward Δ", "time Δ", "cost Δ"):
        table.add_column(name, justify="left" if name == "change" else "right")
    rows = c.tasks[:limit] if limit > 0 else c.tasks
    styles = {"regressed": "red", "fixed": "green", "only_a": "yellow", "only_b": "yellow"}
    for row in rows:
        paired = row.a is not None and row.b is not None
        table.add_row(
            plain(row.task), Text(row.change, style=styles.get(row.change, "")),
            attempts(row.a), attempts(row.b),
            "" if row.reward_delta is None else f"{row.reward_delta:+.3f}",
            signed_seconds(row.duration_delta),
            signed_money(row.cost_delta_usd) if paired else "",
        )  # fmt: skip
    if len(rows) < len(c.tasks):
        table.caption = f"… and {len(c.tasks) - len(rows)} more (--limit 0 lists all)"
    return table
