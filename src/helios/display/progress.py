"""The live display: header panel, running trials, one aggregate progress line.

It is fed by the engine's typed events (`handle`); the engine never imports it.

On a terminal it animates with rich.Live; elsewhere (CI logs, pipes) it prints
one line per finished trial so logs stay readable. `quiet` keeps only the
aggregate line.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.live import Live
from rich.panel import Panel
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from helios.display.console import SafeConsole, markup_safe
from helios.display.desktops import ShownDesktops
from helios.display.eta import EtaEstimator, clock_text
from helios.engine.events import (
    BatchPlanned,
    DesktopReady,
    Event,
    PhaseChanged,
    Retrying,
    TrialFinished,
    TrialStarted,
    TurnStarted,
)
from helios.text import visible


@dataclass
class _Running:
    label: str
    phase: str
    since: float
    note: str = ""
    #: where its desktop is shown (`--watch`)
    url: str = ""


def default_console() -> Console:
    """The terminal's width on a terminal; elsewhere (logs, pipes) wide enough that
    paths and error lines are not cut to 80 columns. It shows control characters
    (`SafeConsole`)."""
    console = SafeConsole()
    return console if console.is_terminal else SafeConsole(width=max(console.width, 160))


def header_panel(title: str, rows: dict[str, str]) -> Panel:
    """A run's header; the values are plain text (paths, names), never markup."""
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold cyan")
    table.add_column()
    for key, value in rows.items():
        table.add_row(key, Text(visible(value, one_line=True), overflow="fold"))
    return Panel(table, title=title, expand=False, border_style="cyan")


#: the bar's width: as wide as the line allows within these
MIN_BAR, MAX_BAR = 10, 30


class BatchProgress:
    """The live display of a run: the units running, and one aggregate line.

    The aggregate line keeps, in this order of priority, n/N, the counts, the bar,
    the elapsed time and the ETA; the bar narrows to fit the terminal, and the
    model figures (`extra_source`) follow on the same line when they fit, else on
    a line of their own. Subclasses count in their own units (`counts_markup`)."""

    #: after n/N, e.g. " prompts"
    unit = ""

    def __init__(
        self,
        console: Console,
        *,
        total: int,
        quiet: bool = False,
        max_rows: int = 12,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.console = console
        self.quiet = quiet
        self.max_rows = max_rows
        self.passed = 0
        self.failed = 0
        self._running: dict[str, _Running] = {}
        #: the desktops announced (`--watch` serves each until its trial ends)
        self._desktops = ShownDesktops()
        self.eta = EtaEstimator(clock=clock)
        self._bar = BarColumn(bar_width=MAX_BAR)
        self._progress = Progress(
            TextColumn("{task.completed}/{task.total}" + self.unit),
            TextColumn("{task.fields[counts]}"),
            self._bar,
            TimeElapsedColumn(),
            TextColumn("ETA {task.fields[eta]}"),
            TextColumn("{task.fields[extra]}", markup=False),
            console=console,
            get_time=clock,
        )
        self._task: TaskID = self._progress.add_task(
            "units", total=total, counts=self.counts_markup(), eta=clock_text(None), extra=""
        )
        self._live: Live | None = None
        #: called at each refresh for the text after the bar (tokens, cost, limits)
        self.extra_source: Callable[[], str] | None = None

    def counts_markup(self) -> str:
        """The counts after n/N, as console markup."""
        return f"[green]Passed: {self.passed}[/] | [red]Failed: {self.failed}[/]"

    # -- lifecycle -----------------------------------------------------------
    def __enter__(self) -> BatchProgress:
        if self.console.is_terminal:
            self._live = Live(self, console=self.console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._running.clear()
        if self._live is not None:
            self._live.__exit__(exc_type, exc, tb)
            self._live = None
        else:
            # Not a terminal: one plain line that never gets cut to 80 columns.
            self.console.print(self.summary_line(), highlight=False, soft_wrap=True, markup=False)

    def summary_line(self) -> str:
        """The closing line off a terminal (plain text, not markup); subclasses count
        in their own units."""
        done = self.passed + self.failed
        total = self._progress.tasks[0].total
        extra = f" · {self.extra_source()}" if self.extra_source is not None else ""
        return visible(f"{done}/{total:g} Passed: {self.passed} | Failed: {self.failed}{extra}")

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not self.quiet and self._running:
            yield self._running_table()
        yield from self._aggregate(options.max_width)

    def _aggregate(self, width: int) -> list[RenderableType]:
        """The aggregate line at `width` columns, and the model figures' line if they
        do not fit on it."""
        task = self._progress.tasks[0]
        remaining = int((task.total or 0) - task.completed)
        eta = f"{clock_text(self.eta.seconds_left(remaining))}"
        extra = visible(self.extra_source(), one_line=True) if self.extra_source else ""
        counts = self.counts_markup()
        elapsed = clock_text(task.elapsed or 0.0)
        # the columns but the bar and the figures, and the spaces between the columns
        fixed = sum(
            cell_len(text)
            for text in (f"{task.completed}/{task.total}{self.unit}",
                         Text.from_markup(counts).plain, elapsed, f"ETA {eta}")
        ) + 4  # fmt: skip
        self._bar.bar_width = max(MIN_BAR, min(MAX_BAR, width - fixed - 1))
        used = fixed + 1 + self._bar.bar_width
        inline = bool(extra) and used + 1 + cell_len(extra) <= width
        self._progress.update(self._task, counts=counts, eta=eta, extra=extra if inline else "")
        parts: list[RenderableType] = [self._progress.get_renderable()]
        if extra and not inline:
            parts.append(Text(extra, style="dim", no_wrap=True, overflow="ellipsis"))
        return parts

    # -- events --------------------------------------------------------------
    def handle(self, event: Event) -> None:
        """The engine's event sink."""
        if isinstance(event, BatchPlanned):
            self._progress.update(self._task, total=event.pending)
            if self.passed + self.failed == 0:
                self.eta.restart()  # the work starts now: planning is not part of the rate
        elif isinstance(event, TrialStarted):
            self.started(event.trial_id, event.label)
        elif isinstance(event, PhaseChanged):
            self.phase(event.trial_id, event.phase)
        elif isinstance(event, Retrying):
            self.note(event.trial_id, f"retrying {event.phase} in {event.delay:.0f}s")
        elif isinstance(event, TurnStarted):
            self.note(event.trial_id, f"turn {event.n}")
        elif isinstance(event, TrialFinished):
            self.finished(event.trial_id, event.label, event.passed, event.detail)
        elif isinstance(event, DesktopReady):
            self.desktop(event)

    def desktop(self, event: DesktopReady) -> None:
        """A trial's desktop is up: under `--watch`, served, and its URL shown."""
        url = self._desktops.show(self.console, event)
        running = self._running.get(event.trial_id)
        if running is not None and url is not None:
            running.url = url

    def started(self, key: str, label: str) -> None:
        self._running[key] = _Running(label, "queued", time.monotonic())

    def phase(self, key: str, phase: str) -> None:
        running = self._running.get(key)
        if running is not None:
            running.phase, running.note = phase, ""

    def note(self, key: str, note: str) -> None:
        running = self._running.get(key)
        if running is not None:
            running.note = note

    def finished(self, key: str, label: str, passed: bool, detail: str) -> None:
        self._running.pop(key, None)
        self._desktops.forget(key)
        if passed:
            self.passed += 1
        else:
            self.failed += 1
        self.eta.completed()
        self._progress.update(self._task, advance=1)
        if self.quiet:
            return
        mark = "[green]✓[/]" if passed else "[red]✗[/]"
        # Under Live the same console prints above the live region.
        self.console.print(f"{mark} {markup_safe(label)} {markup_safe(detail)}",
                           highlight=False, soft_wrap=True)  # fmt: skip

    def _running_table(self) -> Table:
        table = Table(box=None, show_header=False, padding=(0, 1))
        now = time.monotonic()
        rows = sorted(self._running.values(), key=lambda r: r.since)
        for row in rows[: self.max_rows]:
            elapsed = int(now - row.since)
            table.add_row(
                Text("⠿", style="yellow"),
                Text(visible(row.label, one_line=True)),
                Text(row.phase, style="magenta"),
                Text(f"{elapsed // 60:02d}:{elapsed % 60:02d}", style="dim"),
                Text(visible(row.note, one_line=True), style="dim"),
                Text(row.url, style="cyan"),
            )
        if len(rows) > self.max_rows:
            table.add_row("", Text(f"… and {len(rows) - self.max_rows} more", style="dim"))
        return table
