"""A run: what every door's invocation shares, owned by the engine.

A door used to hand-write this layer (issue 20): the run folder, its id, its lock,
`run.json`, the model services, the provider's preflight, the time across resumes
and the live display around `BatchService.run`. `Run` holds all of it, driven by
one `RunConfig`; a door supplies its units, its `Door` and what it writes at the
end (`batch_summary.json`, Hermes's files, the tool-call report).

    async with Run(open_services=settings.models.open) as run:  # a missing key: here
        units = plan_the_units()
        await run.open(RunConfig(kind="batch", outputs=OutputsConfig(parent=Path("output"))))
        summary = await run.drive(
            TaskDoor(run.run_dir), units, done=run.store.load_index(),
            emit=progress.handle, display=progress, finish=write_the_summary,
        )
    # finish(outcome) runs however the run ends (an interrupt included): outcome has the
    # plan, this invocation's results, and the time of every invocation (in run.json)

The folder is one of two shapes: a new `<parent>/<prefix>_YYYYMMDD_HHMMSS/` per
invocation (tasks, toolcalls; `resume=` names an old one), or one fixed folder a
run is resumed in by name (generate's `<run_name>/.helios/`). Either way one lock
(the store's) is taken before anything in it is read, and a resume is refused when
a setting that changes results differs (`RunConfig.identity`, and the `HELIOS_*`
variables that change results) unless `force`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Generic, TypeVar

from helios.engine.batch import BatchPlan, BatchService, OnRecorded
from helios.engine.budget import BudgetWatch, prior_spend
from helios.engine.config import RunConfig
from helios.engine.door import Door, Unit
from helios.engine.labels import RunLabels
from helios.engine.retries import ROUND_KEY, RetryRound, next_round
from helios.engine.spend_ledger import LEDGER, SpendLedger
from helios.engine.store import RUN_FILE, RunStore, run_metadata, write_json_atomic
from helios.environments.registry import provider_class
from helios.errors import ConfigError
from helios.events import EventSink
from helios.models.services import ModelServices
from helios.settings import HeliosSettings, active

U = TypeVar("U", bound=Unit)
R = TypeVar("R")
T = TypeVar("T")

#: the key of run.json that keeps the time of every invocation so far
SECONDS_KEY = "seconds"
#: the key of run.json that keeps the last invocation's budgets and the run's spend
BUDGET_KEY = "budget"


@dataclass
class RunOutcome(Generic[U, R]):
    """What a door's `finish` is given when its run ends, however it ends."""

    plan: BatchPlan[U]
    #: the results recorded by this invocation, in the order they were recorded
    recorded: list[R]
    #: the time of this invocation and of every earlier one (kept in run.json)
    seconds: float
    #: the time of the earlier invocations
    prior_seconds: float
    #: stopped by an interrupt (Ctrl-C, SIGTERM)
    interrupted: bool
    #: why the batch stopped early (a fatal error), if it did
    aborted: str | None
    #: the budgets, which stopped the run (`stopped_by`) and the run's spend
    #: (run.json's `budget`); None: no budget
    budget: dict[str, Any] | None = None
    #: ids of earlier records that a retry recorded now replaces in the counts
    #: (`engine.retries`): a door's summary leaves them out of `plan.finished`
    superseded: set[str] = field(default_factory=set)

    def counted(self, records: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """`records` (default: `plan.finished`, the earlier invocations') without those
        a retry recorded now replaced: each unit's newest record."""
        found = self.plan.finished if records is None else records
        return [r for r in found if r.get("trial_id") not in self.superseded]

    @property
    def budget_stopped(self) -> str | None:
        """One line: which budget stopped the run and the spend; None if none did."""
        if self.budget is None or not self.budget.get("stopped_by"):
            return None
        return str(self.budget.get("reason") or self.budget["stopped_by"])

    @property
    def invocation_seconds(self) -> float:
        return self.seconds - self.prior_seconds


class Run:
    """One invocation of a run. `async with` opens the model services (a missing key
    stops the run before any work); the door plans; `open(config)` checks the
    sandbox provider and opens the folder; then `service` and `execute`."""

    def __init__(
        self,
        *,
        open_services: Callable[[], ModelServices] | None = None,
        preflight: bool = True,
    ) -> None:
        self._open_services = open_services
        self._preflight = preflight
        self.services: ModelServices | None = None
        self._config: RunConfig | None = None
        self._store: RunStore | None = None
        #: True when this invocation continues an earlier one
        self.resumed = False
        #: the time of the earlier invocations (from run.json)
        self.prior_seconds = 0.0
        self._started = time.monotonic()
        #: the budgets against the run's spend, when the config has any
        self.budget: BudgetWatch | None = None
        #: this invocation's `--retry-failed-below` round, if any
        self.retry: RetryRound | None = None
        #: the HELIOS_* variables, read once as the run starts (`helios.settings`)
        self.settings = HeliosSettings.read()
        self._settings_scope = active(self.settings)

    # -- opening and closing ---------------------------------------------------------
    async def __aenter__(self) -> Run:
        # What every module reads for the rest of the run, and what run.json records.
        self._settings_scope.__enter__()
        try:
            self.services = self._open_services() if self._open_services is not None else None
        except BaseException:
            self._settings_scope.__exit__(None, None, None)
            raise
        return self

    async def open(self, config: RunConfig) -> RunStore | None:
        """Check the provider, then open (or create) the run's folder, locked. On Ray
        the provider is checked on every node instead (the driver may have none)."""
        self._config = config
        self._refuse_unpriced(config)
        on_ray = config.concurrency.executor == "ray"
        if self._preflight and config.sandbox.provider is not None and not on_ray:
            await provider_class(config.sandbox.provider).preflight()
        self._store = self._open_store(config)
        if self._store is not None:
            self.prior_seconds = float(self._store.metadata().get(SECONDS_KEY, 0.0) or 0.0)
        self._started = time.monotonic()
        return self._store

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if self._store is not None:
                self._store.close()
        finally:
            try:
                if self.services is not None:
                    await self.services.close()
            finally:
                self._settings_scope.__exit__(None, None, None)

    def _open_store(self, config: RunConfig) -> RunStore | None:
        outputs = config.outputs
        identity = config.full_identity()

        def metadata() -> dict[str, Any]:
            return run_metadata(config.kind, **identity, **config.recorded,
                                **config.labels.recorded(), **config.saved())  # fmt: skip

        folder = outputs.resume or outputs.fixed
        if folder is not None:
            store = RunStore.open_or_create(folder, metadata, create=outputs.fixed is not None)
            self.resumed = not store.created
            if self.resumed:
                try:
                    store.check_settings(identity, force=outputs.force)
                    self._relabel(store, config.labels)
                except BaseException:
                    store.close()
                    raise
            return store
        if outputs.parent is None:
            return None  # in memory
        prefix = config.labels.folder_stem() or outputs.prefix
        return RunStore.create_new(outputs.parent, prefix, metadata())

    def _refuse_unpriced(self, config: RunConfig) -> None:
        """A cost budget needs a price for every model of the run: one line naming the
        model without one, before anything starts."""
        if config.budget.max_cost is None or self.services is None:
            return
        model = self.services.unpriced_model()
        if model is not None:
            raise ConfigError(f"--max-cost needs the price of every model, and {model} has "
                              "none: give it with --prices FILE", field="--max-cost")  # fmt: skip

    def _budget_watch(self, ledger: SpendLedger | None) -> BudgetWatch | None:
        """The budgets against the run's spend: the earlier invocations' (every
        record's `spend` and the spend ledger's totals, run.json's `seconds`) plus
        this one's."""
        config = self.config.budget
        if not config.active:
            return None
        spends = self._store.recorded_spends() if self._store is not None else []
        earlier = ledger.earlier if ledger is not None else None
        return BudgetWatch(config, prior_spend(spends, self.prior_seconds, earlier))

    def _ledger(self) -> SpendLedger | None:
        """The run's spend ledger (`engine.spend_ledger`), kept whenever the run has a
        folder it writes: a resume may give a budget that a first invocation had not."""
        if self._store is None or self._store.readonly:
            return None
        return SpendLedger(self._store.stream(LEDGER))

    def _retry_round(self) -> RetryRound | None:
        """This invocation's retry round (`engine.retries`), recorded in run.json
        before any unit starts: a kill -9 leaves it unfinished for the next resume."""
        below = self.config.concurrency.retry_below
        if below is None or self._store is None:
            return None
        metadata = self.store.metadata()
        round_ = next_round(below, metadata.get(ROUND_KEY))
        metadata[ROUND_KEY] = round_.recorded(finished=False)
        write_json_atomic(self.run_dir / RUN_FILE, metadata)
        return round_

    def _finish_round(self, outcome: RunOutcome[Any, Any]) -> None:
        """Mark the retry round finished when nothing stopped it early."""
        if self.retry is None or self._store is None:
            return
        if outcome.interrupted or outcome.aborted or outcome.budget_stopped:
            return
        metadata = self.store.metadata()
        metadata[ROUND_KEY] = self.retry.recorded(finished=True)
        with suppress(OSError):
            write_json_atomic(self.run_dir / RUN_FILE, metadata)

    @staticmethod
    def _relabel(store: RunStore, labels: RunLabels) -> None:
        """A resume keeps the run's name and tags; one that names them again replaces
        the name, and each tag it gives (the others stay)."""
        if not labels:
            return
        metadata = store.metadata()
        if labels.name is not None:
            metadata["name"] = labels.name
        if labels.tags:
            tags = metadata.get("tags")
            metadata["tags"] = {**(tags if isinstance(tags, dict) else {}), **labels.tags}
        write_json_atomic(store.run_dir / RUN_FILE, metadata)

    # -- what a door uses ------------------------------------------------------------
    @property
    def config(self) -> RunConfig:
        if self._config is None:
            raise RuntimeError("the run is not open (call `await run.open(config)`)")
        return self._config

    @property
    def budgeted(self) -> bool:
        """Whether the run is open with a budget."""
        return self._config is not None and self._config.budget.active

    @property
    def store(self) -> RunStore:
        if self._store is None:
            raise RuntimeError(
                "the run has no folder (not open yet, or its records are kept in memory)"
            )
        return self._store

    @property
    def in_memory(self) -> bool:
        return self._store is None

    @property
    def run_dir(self) -> Path:
        return self.store.run_dir

    def service(
        self, door: Door[U, R], *, emit: EventSink | None = None,
        on_recorded: OnRecorded | None = None, services: ModelServices | None = None,
    ) -> BatchService[U, R]:  # fmt: skip
        """The batch service of this run; `services`: model services the door's
        agent brought (not the run's to close), else the run's own."""
        ledger = self._ledger()
        self.budget = self._budget_watch(ledger)
        self.retry = self._retry_round()
        return BatchService(
            door=door,
            store=self._store,
            concurrency=self.config.concurrency,
            provider=self.config.sandbox.provider,
            emit=emit,
            services=services or self.services,
            on_recorded=on_recorded,
            budget=self.budget,
            ledger=ledger,
            clock=lambda: self.seconds,
            save_clock=self.save_seconds,
            retry=self.retry,
        )

    async def execute(
        self,
        service: BatchService[U, R],
        plan: BatchPlan[U],
        display: AbstractContextManager[Any] | None = None,
    ) -> None:
        """Run the plan, inside the live display if there is one."""
        with display if display is not None else nullcontext():
            try:
                await service.run(plan)
            finally:  # the display's last line and the final panel: one "out tok/s"
                if service.services is not None:
                    service.services.stop_clock()

    async def drive(
        self, door: Door[U, R], units: Sequence[U], *, finish: Callable[[RunOutcome[U, R]], T],
        done: Mapping[str, Any] | None = None, emit: EventSink | None = None,
        on_recorded: OnRecorded | None = None, services: ModelServices | None = None,
        display: AbstractContextManager[Any] | None = None,
        on_plan: Callable[[BatchPlan[U]], None] | None = None,
    ) -> T:  # fmt: skip
        """Run a door's units: plan them against `done` (the records of earlier
        invocations: the finished are not run again), show the plan (`on_plan`, e.g. a
        header), run what is pending inside the live display, keep the time, then
        `finish(outcome)` and return what it returns. `finish` runs however the run
        ends, so an interrupted run still writes its door's files."""
        service = self.service(door, emit=emit, on_recorded=on_recorded, services=services)
        plan = service.plan(units, done)
        if on_plan is not None:
            on_plan(plan)
        interrupted = False
        try:
            await self.execute(service, plan, display)
        except (asyncio.CancelledError, KeyboardInterrupt):
            interrupted = True
            raise
        finally:
            outcome = RunOutcome(
                plan=plan, recorded=service.recorded, seconds=self.save_seconds(),
                prior_seconds=self.prior_seconds,
                interrupted=service.interrupted or interrupted, aborted=service.aborted,
                budget=self._save_budget(service), superseded=service.superseded,
            )  # fmt: skip
            self._finish_round(outcome)
            finished = finish(outcome)
        return finished

    def _save_budget(self, service: BatchService[Any, Any]) -> dict[str, Any] | None:
        """run.json's `budget`: the budgets, which one stopped the run, and the spend."""
        if self.budget is None:
            return None
        totals = service.services.totals if service.services is not None else None
        self.budget.observe(totals, self.seconds)
        state = self.budget.recorded_state()
        if self.budget.stopped_by is not None:
            state["reason"] = self.budget.stop_reason()
        if self._store is not None:
            metadata = self.store.metadata()
            metadata[BUDGET_KEY] = state
            with suppress(OSError):
                write_json_atomic(self.run_dir / RUN_FILE, metadata)
        return state

    @property
    def seconds(self) -> float:
        """This invocation's time so far plus every earlier one's."""
        return self.prior_seconds + time.monotonic() - self._started

    def save_seconds(self) -> float:
        """Keep the total time in run.json (a resume adds to it); returns it. A disk
        that refuses it costs only the time: the records are what matter."""
        total = self.seconds
        if self._store is None:
            return total
        metadata = self.store.metadata()
        metadata[SECONDS_KEY] = round(total, 3)
        with suppress(OSError):
            write_json_atomic(self.run_dir / RUN_FILE, metadata)
        return total
