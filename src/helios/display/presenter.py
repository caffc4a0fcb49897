"""What a run shows around its units, for every door: the header panel, the
one-line warnings, the store's repairs, the live display and the final panels.

A door hands it rows and panels of its own; the rest it reads from the run: the
config the run was opened with (`RunConfig`: units in flight, the sandbox
provider), the run's folder and its model services (the endpoint, the live line).
Whether anything is shown is the door's settings: `show` (nothing at all without
it, as the Python APIs' `quiet`) and `quiet` (the CLI's `-q`: the live line only,
then where the results are).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Literal, TypeVar

from rich.console import Console, RenderableType
from rich.markup import escape

from helios.display.progress import BatchProgress, default_console, header_panel
from helios.display.trial import TrialView
from helios.engine.config import RunConfig
from helios.engine.run import Run
from helios.engine.store import KEEP_LEFTOVERS, RunStore
from helios.models.services import ModelServices
from helios.secrets import public_url
from helios.text import visible

D = TypeVar("D", bound=AbstractContextManager[Any])

#: the endpoint shown when the model's requests go to the provider's own
PROVIDER_DEFAULT = "the provider's default"

__all__ = ["PROVIDER_DEFAULT", "RunPresenter", "endpoint_text"]


def endpoint_text(services: ModelServices | None, default: str = PROVIDER_DEFAULT) -> str:
    """Where a model's requests (and its key) go, never with a secret in it."""
    url = services.spec.base_url if services is not None else None
    return public_url(url) if url else default


class RunPresenter:
    """The run's screen for one door's invocation."""

    def __init__(
        self,
        console: Console | None = None,
        *,
        show: bool = True,
        quiet: bool = False,
        warnings: Console | None = None,
    ) -> None:
        self.console = console or default_console()
        #: where warnings go (generate: stderr, apart from its output)
        self.warnings = warnings or self.console
        self.show = show
        self.quiet = quiet
        self.services: ModelServices | None = None
        self._run: Run | None = None

    # -- what it reads from the run ---------------------------------------------------
    def attach(self, run: Run) -> None:
        """The run whose config, folder and services the header and live line show."""
        self._run = run
        self.services = run.services

    @property
    def config(self) -> RunConfig:
        if self._run is None:
            raise RuntimeError("no run attached (call `attach(run)` once it is open)")
        return self._run.config

    @property
    def concurrency(self) -> str:
        return str(self.config.concurrency.in_flight)

    @property
    def environment(self) -> str:
        return str(self.config.sandbox.provider)

    @property
    def output(self) -> str:
        return str(self.store.run_dir)

    @property
    def store(self) -> RunStore:
        if self._run is None:
            raise RuntimeError("no run attached (call `attach(run)` once it is open)")
        return self._run.store

    def endpoint_row(self) -> dict[str, str]:
        """Where the model's requests (and its key) go, always shown: a resumed run
        folder or a <PROVIDER>_BASE_URL may have chosen it (never a key in it)."""
        if self.services is None:
            return {}
        every = [self.services, *self.services.others.values()]
        if len(every) == 1:
            return {"Endpoint": endpoint_text(self.services)}
        return {"Endpoints": " · ".join(f"{s.name}: {endpoint_text(s)}" for s in every)}

    # -- the header -------------------------------------------------------------------
    @property
    def shows_panels(self) -> bool:
        """The header and final panels: shown unless nothing is, or `-q`."""
        return self.show and not self.quiet

    def header(self, title: str, rows: Mapping[str, str]) -> None:
        """The run's header panel (after the leftovers line, when the plan pruned some)."""
        if not self.shows_panels:
            return
        pruned = self._run.store.pruned if self._run is not None and not self._run.in_memory else []
        if pruned:  # the plan moved the pending trials' leftovers aside
            self.console.print(
                f"removed {len(pruned)} old leftover folder(s) from _incomplete/ "
                f"(the last {KEEP_LEFTOVERS} of each trial are kept)", highlight=False,
            )  # fmt: skip
        self.console.print(header_panel(title, dict(rows)))

    # -- one-line messages ------------------------------------------------------------
    def warn(self, label: str, text: str, *, always: bool = False) -> None:
        """`label` in yellow, then `text` (escaped: it may quote a file). `always`: shown
        even when nothing else is (the records are safe, but something is not)."""
        if self.show or always:
            self.warnings.print(f"[yellow]{label}[/] {escape(text)}", highlight=False,
                                soft_wrap=True)  # fmt: skip

    def warn_lines(self, lines: Iterable[tuple[str, str]]) -> None:
        for label, text in lines:
            self.warn(label, text)

    def store_repairs(self, store: RunStore) -> None:
        """One line per bad line of the results the store moved to its quarantine file;
        always shown."""
        for bad in store.quarantined:
            self.warn("warning", f"{store.results_path}:{bad.line}: {bad.reason}; "
                      f"moved to {store.results.quarantine_path.name}", always=True)  # fmt: skip

    def list_desktops(self, run_dir: Path) -> None:
        """Under `--watch`: the desktops being served are listed in `run_dir` from now
        on (`helios view` links them). The server is imported with --watch only."""
        from helios.display import watch

        if (served := watch.active()) is not None:
            served.publish_in(run_dir)

    def say(self, text: str, style: str = "") -> None:
        """A line that may quote the inputs (a dataset's text): its controls are shown."""
        if self.show:
            shown = escape(visible(text))
            self.console.print(f"[{style}]{shown}[/]" if style else shown, highlight=False,
                               soft_wrap=True)  # fmt: skip

    def caution(self, text: str) -> None:
        """A warning that may quote the inputs, all of it in yellow, to `warnings`."""
        if self.show:
            shown = escape(visible(f"warning: {text}"))
            self.warnings.print(f"[yellow]{shown}[/]", highlight=False, soft_wrap=True)

    # -- the live display -------------------------------------------------------------
    def live(
        self, view: Literal["batch", "trial"] = "batch", *, agent: str = "",
        quiet: bool | None = None,
    ) -> BatchProgress | TrialView:  # fmt: skip
        """The live display: `helios run`'s trial view, else the batch's units and one
        aggregate line followed by the model services' figures (tokens, cost, limits)."""
        quiet = self.quiet or not self.show if quiet is None else quiet
        if view == "trial":
            return TrialView(self.console, agent=agent, quiet=quiet)
        progress = BatchProgress(self.console, total=0, quiet=quiet)
        if self.services is not None or self._budgeted:
            progress.extra_source = self.live_figures
        return progress

    @property
    def _budgeted(self) -> bool:
        return self._run is not None and self._run.budgeted

    def live_figures(self) -> str:
        """The live line's model figures, then the spend against each budget."""
        return self.with_budget(self.services.live_line if self.services is not None else None)()

    def with_budget(self, figures: Callable[[], str] | None) -> Callable[[], str]:
        """`figures` (a door's own live figures), then the spend against each budget."""

        def line() -> str:
            shown = [figures()] if figures is not None else []
            budget = self._run.budget if self._run is not None else None
            if budget is not None:
                shown.append(f"budget {budget.against()}")
            return " · ".join(shown)

        return line

    def shown(self, display: D) -> D | None:
        """The display the run is driven inside: none when nothing is shown."""
        return display if self.show else None

    # -- the end ----------------------------------------------------------------------
    def finish(self, panels: Iterable[RenderableType], *, output: Path | None = None) -> None:
        """The final panels; with `-q` instead, where the results are (`output`)."""
        if self.show and self.quiet and output is not None:
            self.console.print(f"Output: {output}", highlight=False, soft_wrap=True, markup=False)
        if self.shows_panels:
            for panel in panels:
                self.console.print(panel)
