"""`helios run`'s view: one trial at a time, its phases as they happen.

    ╭─ Helios run ─╮  (the header: task, agent, sandbox, output)
    [Setup] starting the sandbox
    [Agent] tool · openai/gpt-4.1
      turn 1
      → bash  ls -la /app
    [Verify] running the tests
    [Result] ✓ passed · reward 1 · total 1 · rows 1 · 2.1s

It is fed by the engine's typed events (`handle`: phases, turns, tool calls,
retries) and, once the trial is recorded, by its outcome (`result`: every reward
key, the error, tokens). Each line is printed when it happens, on a terminal and
in a log alike: a single trial's story reads top to bottom, with nothing redrawn.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import TracebackType

from rich.console import Console

from helios.display.console import markup_safe
from helios.display.desktops import ShownDesktops
from helios.engine.events import (
    BatchPlanned,
    DesktopReady,
    Event,
    PhaseChanged,
    Retrying,
    ToolCalled,
    TrialFinished,
    TrialStarted,
    TurnStarted,
)
from helios.text import visible

#: a phase's tag and what it says, by the name the engine gives it
PHASES = {
    "environment": ("Setup", "starting the sandbox"),
    "agent": ("Agent", ""),
    "verifier": ("Verify", "running the tests"),
}
#: the arguments that stand for a whole call (`bash`'s command, `editor`'s path)
MAIN_ARGUMENTS = ("command", "path", "query", "url")


def call_line(name: str, arguments: str) -> str:
    """A tool call on one line: its name, then its main argument or its arguments."""
    try:
        parsed = json.loads(arguments)
    except ValueError:
        parsed = None
    shown = arguments
    if isinstance(parsed, dict):
        main = [parsed[key] for key in MAIN_ARGUMENTS if isinstance(parsed.get(key), str)]
        rest = {k: v for k, v in parsed.items() if k not in MAIN_ARGUMENTS}
        if main and name != "editor":
            shown = main[0]
        elif main:  # the editor: its command and path, e.g. "create /app/x.py"
            shown = " ".join(main[:2])
        elif not rest:
            shown = ""
    return visible(f"{name}  {shown}".rstrip(), one_line=True)


def _number(value: float) -> str:
    return f"{value:g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.2e}"


class TrialView:
    """The lines of `helios run`; a context manager like the batch's live display."""

    def __init__(self, console: Console, *, agent: str = "", quiet: bool = False) -> None:
        self.console = console
        #: what the [Agent] line names (the agent, and its model)
        self.agent = agent
        self.quiet = quiet
        self._trials = 1
        #: the desktops announced (`--watch` serves each until its trial ends)
        self._desktops = ShownDesktops()

    def __enter__(self) -> TrialView:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    def _line(self, markup: str, text: str = "") -> None:
        """`markup` (ours) then `text` (untrusted: a command, a label), cut to the width."""
        width = self.console.width
        self.console.print(
            markup + markup_safe(text), highlight=False, no_wrap=True, overflow="ellipsis",
            crop=True, width=width,
        )  # fmt: skip

    # -- events --------------------------------------------------------------------------
    def handle(self, event: Event) -> None:
        """The engine's event sink."""
        if self.quiet:
            return
        if isinstance(event, BatchPlanned):
            self._trials = event.pending
        elif isinstance(event, TrialStarted):
            if self._trials > 1:
                self._line("[bold cyan]──[/] ", event.label)
        elif isinstance(event, PhaseChanged):
            tag, what = PHASES.get(event.phase, (event.phase.capitalize(), ""))
            what = self.agent if event.phase == "agent" else what
            self._line(f"[bold magenta]\\[{markup_safe(tag)}][/] ", what)
        elif isinstance(event, TurnStarted):
            self._line("  [dim]turn[/] ", str(event.n))
        elif isinstance(event, ToolCalled):
            self._line("  [cyan]→[/] ", call_line(event.name, event.arguments))
        elif isinstance(event, Retrying):
            why = f": {event.error}" if event.error else ""
            self._line("  [yellow]retrying[/] ", f"{event.phase} in {event.delay:.0f}s{why}")
        elif isinstance(event, DesktopReady):
            self._desktops.show(self.console, event)
        elif isinstance(event, TrialFinished):
            self._desktops.forget(event.trial_id)

    def result(
        self,
        *,
        passed: bool,
        status: str,
        rewards: Mapping[str, float],
        duration: float,
        error: str | None = None,
        usage: str = "",
    ) -> None:
        """The trial's outcome, once recorded: every reward key, its error, its tokens."""
        if self.quiet:
            return
        mark = "[green]✓ passed[/]" if passed else f"[red]✗ {markup_safe(status)}[/]"
        scores = " · ".join(f"{key} {_number(value)}" for key, value in rewards.items())
        text = " · ".join(part for part in (scores, f"{duration:.1f}s") if part)
        self.console.print(
            f"[bold]\\[Result][/] {mark} · {markup_safe(text)}", highlight=False, soft_wrap=True
        )
        for extra in (error, usage):
            if extra:
                self.console.print(
                    f"         {markup_safe(extra)}", highlight=False, soft_wrap=True
                )
