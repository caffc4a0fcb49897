"""The generate run on screen: a header's rows, a live line counted in prompts (rows
written, discarded, failed, tokens/s, cost), and a final table with tool usage,
reasoning coverage and discards. Fed by the engine's events like `helios batch`."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from helios.datagen.settings import GenerateSettings
from helios.datagen.statistics import RunTotals
from helios.display.console import markup_safe
from helios.display.presenter import RunPresenter, endpoint_text
from helios.display.progress import BatchProgress
from helios.models.services import ModelServices
from helios.text import visible


def header_rows(
    show: RunPresenter, settings: GenerateSettings, *, total: int, pending: int,
    bad_lines: int, first_batch: int, run_dir: Path,
) -> dict[str, str]:  # fmt: skip
    """The header's rows: the dataset, the prompts to run, the batch files, the model
    and its endpoint; concurrency and sandbox as the run's config has them."""
    s, done = settings, total - pending
    return {
        "Dataset": f"{s.dataset_file} ({total} prompts"
        + (f", {bad_lines} bad lines" if bad_lines else "")
        + ")",
        "Prompts": f"{pending} to run" + (f", {done} already done" if done else ""),
        "Batches": f"{s.batch_size} prompts each, from batch_{first_batch}",
        "Concurrency": f"{show.concurrency} prompts in flight",
        "Model": f"{s.model} @ {endpoint_text(show.services, default='')}",
        "Distribution": s.distribution,
        "Sandbox": show.environment,
        "Output": str(run_dir),
    }


class GenerateProgress(BatchProgress):
    """BatchProgress with the line counted in rows, discards and failures."""

    unit = " prompts"

    def __init__(
        self,
        console: Console,
        *,
        quiet: bool,
        services: ModelServices | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rows = self.discarded = self.errors = 0
        super().__init__(console, total=0, quiet=quiet, clock=clock)
        self.services = services
        self.t0 = clock()
        self.clock = clock
        self.extra_source = self.money_line

    def counts_markup(self) -> str:
        return (f"[green]rows {self.rows}[/] · [yellow]discarded {self.discarded}[/] · "
                f"[red]failed {self.errors}[/]")  # fmt: skip

    def money_line(self) -> str:
        """The model figures: output tokens per second of wall time since the start
        (as `helios batch`'s live line), cost and retries."""
        services = self.services
        if services is None:
            return ""
        t = services.totals
        elapsed = max(self.clock() - self.t0, 1e-9)
        return (f"{t.output_tokens / elapsed:,.0f} out tok/s · {t.cost_text()} · "
                f"{t.retries} retries")  # fmt: skip

    def finished(self, key: str, label: str, passed: bool, detail: str) -> None:
        if passed:
            self.rows += 1
        elif detail.startswith("discarded"):
            self.discarded += 1
        else:
            self.errors += 1
        self.passed, self.failed = self.rows, self.discarded + self.errors
        self._running.pop(key, None)
        self.eta.completed()
        self._progress.update(self._task, advance=1)
        if self.quiet or passed:
            return
        mark = "[yellow]–[/]" if detail.startswith("discarded") else "[red]✗[/]"
        self.console.print(f"{mark} {markup_safe(label)} {markup_safe(detail)}",
                           highlight=False, soft_wrap=True)  # fmt: skip

    def summary_line(self) -> str:
        done = self.rows + self.discarded + self.errors
        return (f"{done} prompts: {self.rows} rows, {self.discarded} discarded, "
                f"{self.errors} failed · {self.money_line()}")  # fmt: skip


def final_table(
    run: RunTotals,
    *,
    merged: int,
    failures: int,
    tombstones: int,
    seconds: float = 0.0,
    interrupted: bool = False,
) -> RenderableType:
    """The run's final table. Its tokens are those of the recorded prompts (all runs
    of the folder) per second of the run's wall time (`seconds`), as the live line
    counts them; after an interrupt it says the live line also counted the prompts
    the interrupt stopped."""
    tools = Table(title="Tool usage", title_justify="left", expand=False)
    for column in ("tool", "calls", "success", "failure", "success rate"):
        tools.add_column(column, justify="left" if column == "tool" else "right")
    for name, stats in sorted(run.tools.items(), key=lambda item: -item[1]["count"]):
        calls = stats["success"] + stats["failure"]
        rate = f"{stats['success'] / calls:.1%}" if calls else "–"
        tools.add_row(Text(visible(name, one_line=True)), str(stats["count"]),
                      str(stats["success"]), str(stats["failure"]), rate)  # fmt: skip
    if not run.tools:
        tools.add_row("(no tool calls)", "", "", "", "")
    coverage = run.turns_with_reasoning / run.turns if run.turns else 0.0
    summary = Table.grid(padding=(0, 2))
    summary.add_column(style="bold cyan")
    summary.add_column()
    summary.add_row("Trajectories", f"{merged} in trajectories.jsonl")
    summary.add_row("Reasoning", f"{run.turns_with_reasoning}/{run.turns} assistant turns "
                    f"({coverage:.1%})")  # fmt: skip
    summary.add_row("Discarded", f"{tombstones} ({run.discarded} without reasoning)")
    summary.add_row("Failed", f"{failures}" + (" (retried by --resume)" if failures else ""))
    cost = run.cost_text if run.cost_usd is not None else (
        f"cost unknown: {run.cost_unknown_reason} (add it with --prices FILE)")  # fmt: skip
    wall = f" · {run.tokens_out / seconds:,.0f} out tok/s" if seconds > 0 else ""
    summary.add_row("Tokens", f"{run.tokens_in:,} in / {run.tokens_out:,} out{wall} · {cost}")
    if run.cache_hits:
        summary.add_row("Response cache", f"{run.cache_hits:,} answers replayed · "
                        f"{run.cache_saved_tokens:,} tokens saved")  # fmt: skip
    if interrupted:
        summary.add_row("", "of the recorded prompts: the live line also counted the "
                        "prompts the interrupt stopped, which no record holds")  # fmt: skip
    table = Table.grid()
    table.add_row(tools)
    table.add_row(Panel(summary, title="Run", expand=False, border_style="cyan"))
    return table
