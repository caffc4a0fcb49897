"""The batch service: what every door drives to run its units of work.

A door supplies what a unit is (its id, folder and label), how one unit runs,
and how a result becomes a record and the door's own files. The service owns
the rest: resume planning, the scheduler, recording, the fatal-error stop and
interrupt cleanup, and it emits typed events for the display and callbacks.

Invariants (see docs/design/invariants.md):
- a unit is complete iff the store holds its record; resume skips completed
  ids, and re-runs errored ones only when asked (`retry_errors`);
- a pending unit's leftover folder is moved aside before it runs, never deleted;
- a result's files are written before its record is appended;
- a failure while recording, or in a callback, never aborts the batch;
- after an interrupt the provider's cleanup hook removes this run's sandboxes;
- before a run with a store starts units, the same hook removes the sandboxes an
  earlier invocation of the run left (killed with -9, nothing cleaned up): the
  run's lock is held, so no live process owns any of them. One path for every door.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import inspect
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import helios.engine.retries as retries
from helios.engine.budget import (
    BUDGET_STOPPED,
    INVOCATION_KEY,
    SPEND_KEY,
    STOPPED_KEY,
    BudgetWatch,
    record_spend,
)
from helios.engine.config import ConcurrencyConfig
from helios.engine.door import Door, Unit, Verdict
from helios.engine.episode import EpisodeContext
from helios.engine.jsonl import RecordHead
from helios.engine.retries import RetryRound
from helios.engine.scheduler import Scheduler
from helios.engine.spend_ledger import SpendLedger
from helios.engine.store import RunStore
from helios.errors import ConfigError
from helios.events import BatchPlanned, BatchStopping, EventSink, TrialFinished, TrialStarted
from helios.failures import DISK_FULL, ErrorInfo
from helios.slots import Slot
from helios.usage import Usage

if TYPE_CHECKING:
    from helios.models.services import ModelServices

__all__ = [
    "FATAL_ERRORS",
    "STOP_AFTER_IN_A_ROW",
    "BatchPlan",
    "BatchService",
    "Counts",
    "Door",
    "Unit",
    "Verdict",
]

log = logging.getLogger(__name__)

#: how often a budget is checked while trials run (a time budget, a hard one)
BUDGET_EVERY = 0.2
#: errors that every later unit would hit too: the batch stops starting units
FATAL_ERRORS = frozenset({"AuthError", DISK_FULL})
#: errors that stop the batch after this many units in a row ended with them
#: (an unreachable endpoint: one refusal may be a blip, three in a row are not)
STOP_AFTER_IN_A_ROW = {"ConnectionError": 3}


U = TypeVar("U", bound=Unit)
R = TypeVar("R")


@dataclass
class BatchPlan(Generic[U]):
    #: the door's units as given (never copied: a lazy sequence stays lazy)
    units: Sequence[U]
    #: the units to run: `units` itself when none is complete
    pending: Sequence[U]
    #: ids of the units already complete, in unit order
    finished_ids: list[str]
    #: their full records, read only when asked for (`finished`)
    records: dict[str, dict[str, Any]] | None = None
    store: RunStore | None = None
    #: pending units that run a finished one again (`--retry-failed-below`)
    retried: int = 0

    @property
    def finished(self) -> list[dict[str, Any]]:
        """The records of the units already complete, in unit order. Read from the
        store on first use, so a resume starts without parsing whole records."""
        if self.records is None:
            wanted = set(self.finished_ids)
            self.records = self.store.read_records(wanted) if self.store is not None else {}
        return [self.records[tid] for tid in self.finished_ids if tid in self.records]


@dataclass
class Counts:
    """What this invocation recorded, kept whatever `keep_results` says."""

    total: int = 0
    passed: int = 0
    errors: int = 0


OnRecorded = Callable[[Any, Any], Awaitable[None] | None]


@dataclass
class BatchService(Generic[U, R]):
    door: Door[U, R]
    #: None: nothing is persisted and every unit is pending (in-memory batches)
    store: RunStore | None
    #: the run's knobs (`RunConfig.concurrency`): in flight, processes, sandbox
    #: starts, retry_errors, executor
    concurrency: ConcurrencyConfig = field(default_factory=ConcurrencyConfig)
    #: whose cleanup hook removes the run's sandboxes (None: no sandboxes)
    provider: str | None = None
    emit: EventSink | None = None
    services: ModelServices | None = None
    #: the user's callback, called with (unit, result) after each record
    on_recorded: OnRecorded | None = None
    #: results recorded by this invocation, in completion order (if `keep_results`)
    recorded: list[R] = field(default_factory=list)
    counts: Counts = field(default_factory=Counts)
    #: why the batch stopped starting units early, if it did
    aborted: str | None = None
    interrupted: bool = False
    _in_a_row: tuple[str | None, int] = (None, 0)
    # -- the engine's own policy (not the user's knobs) --------------------------
    fatal_errors: frozenset[str] = FATAL_ERRORS
    stop_after_in_a_row: dict[str, int] = field(default_factory=lambda: dict(STOP_AFTER_IN_A_ROW))
    start_retries: int = 2
    start_backoff: float = 2.0
    #: keep every result in `recorded` (the door's summary needs them); False keeps
    #: only `counts`, so memory does not grow with the number of units
    keep_results: bool = True
    #: the run's budgets and spend (`engine.budget`); None: no budget
    budget: BudgetWatch | None = None
    #: the run's spend ledger (`engine.spend_ledger`): the spend of the model calls as
    #: they are made, so a trial killed before its record still counts on resume
    ledger: SpendLedger | None = None
    #: the run's seconds so far, every invocation's (`Run.seconds`); and what keeps
    #: them in run.json (called every 5 s under a time budget)
    clock: Callable[[], float] | None = None
    save_clock: Callable[[], object] | None = None
    #: units handed to an executor to start (the budget's count of trials in flight)
    started_units: int = 0
    #: what stops the trials in flight under a hard budget on another executor (Ray's)
    on_hard_stop: Callable[[], None] | None = None
    _hard_stopping: bool = False
    _running: set[asyncio.Future[Any]] = field(default_factory=set)
    #: the units whose spend the budget counts already (`_account`)
    _accounted: set[str] = field(default_factory=set)
    #: this invocation's `--retry-failed-below` round (`engine.retries`); None: none
    retry: RetryRound | None = None
    #: the ids of the records a retry recorded by this invocation replaces in the
    #: counts (the records themselves stay): a door's summary leaves them out
    superseded: set[str] = field(default_factory=set)
    #: retry unit id -> (its slot, n); and -> the record it replaces once recorded
    _retries: dict[str, tuple[str, int]] = field(default_factory=dict)
    _supersedes: dict[str, str] = field(default_factory=dict)

    #: the run id when there is no store
    memory_run_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def run_id(self) -> str:
        if self.store is None:
            return self.memory_run_id
        return str(self.store.metadata().get("run_id", self.store.run_dir.name))

    # -- planning --------------------------------------------------------------
    def plan(
        self,
        units: Sequence[U],
        records: Mapping[str, dict[str, Any] | RecordHead] | None = None,
    ) -> BatchPlan[U]:
        """Skip complete units; move the leftovers of pending ones aside.

        `records` are the store's complete records (or their heads, `load_index`)
        if the door has loaded them already."""
        if self.store is None:
            self._emit(BatchPlanned(total=len(units), pending=len(units)))
            return BatchPlan(units, units, [])
        known = self.store.load_index() if records is None else records
        newest = retries.newest_retries(known)
        pending: list[U] = []
        finished_ids: list[str] = []
        for unit in units:
            n = newest.get(unit.trial_id, 0)
            tid = unit.trial_id if n == 0 else retries.retry_id(unit.trial_id, n)
            record = known.get(tid)
            if record is None or not self._is_done(record):
                pending.append(unit if n == 0 else self._retry(unit, n))
            elif self.retry is not None and retries.below(record, self.retry):
                pending.append(self._retry(unit, n + 1, supersedes=tid))
                finished_ids.append(tid)  # counted until its retry is recorded
            else:
                finished_ids.append(tid)
        for unit in pending:
            if unit.folder is not None:
                self.store.clear_leftover(unit.folder)
        first = next(iter(known.values()), None)
        full = known if isinstance(first, dict) else None  # the door's full records
        self._emit(BatchPlanned(total=len(units), pending=len(pending)))
        # Nothing complete: the units themselves, not a second list of them.
        todo: Sequence[U] = pending if finished_ids or newest else units
        return BatchPlan(units, todo, finished_ids, records=full,  # type: ignore[arg-type]
                         store=self.store, retried=len(self._supersedes))  # fmt: skip

    def _retry(self, unit: U, n: int, supersedes: str | None = None) -> U:
        """`unit`'s n-th retry (`engine.retries`), remembered for its record's marks."""
        if not isinstance(self.door, retries.Retries):
            raise ConfigError(f"{retries.FLAG}: this run's units cannot be retried",
                              field=retries.FLAG)  # fmt: skip
        tid = retries.retry_id(unit.trial_id, n)
        self._retries[tid] = (unit.trial_id, n)
        if supersedes is not None:
            self._supersedes[tid] = supersedes
        retried: U = self.door.retried(unit, n, tid)
        return retried

    def _is_done(self, record: dict[str, Any] | RecordHead | None) -> bool:
        if record is None:
            return False
        if isinstance(record, dict):
            status, stopped = record.get("status"), record.get(STOPPED_KEY)
        else:
            status, stopped = record.status, record.budget_stopped
        if stopped:  # stopped by a budget: no result, it runs again on resume
            return False
        return not (self.concurrency.retry_errors and status == "error")

    # -- running ---------------------------------------------------------------
    async def run(self, plan: BatchPlan[U]) -> list[R]:
        ctx = EpisodeContext(
            run_id=self.run_id,
            run_dir=self.store.run_dir if self.store is not None else None,
            start_gate=asyncio.Semaphore(self.concurrency.starts_at_once),
            start_retries=self.start_retries,
            start_backoff=self.start_backoff,
            emit=self.emit,
            services=self.services,
        )

        async def job(unit: U, slot: Slot) -> R:
            self._emit(TrialStarted(unit.trial_id, unit.label))
            if self.budget is None:
                return await self.door.run_unit(unit, ctx, slot)
            if self.budget.config.hard:
                result = await self._stoppable(unit, ctx, slot)
            else:
                result = await self.door.run_unit(unit, ctx, slot)
            usage = getattr(result, "usage", None)  # counted before the slot is given back
            self._account(unit, record_spend(usage) if isinstance(usage, Usage) else {})
            return result

        scheduler: Scheduler[U, R] = Scheduler(
            job,
            n_concurrent=self.concurrency.in_flight,
            on_result=self._record,
            on_crash=lambda unit, exc: self.door.crashed(
                unit, ErrorInfo.from_exception(exc, "internal")
            ),
            stop_when=self._starts_nothing,
            # Results reach `_record` one by one; the scheduler need not keep them.
            keep_results=False,
        )
        workers = min(self.concurrency.processes, self.concurrency.in_flight, len(plan.pending))
        on_ray = self.concurrency.executor == "ray"
        # On Ray the sweep runs on every node of the cluster (`run_on_ray`).
        if self.store is not None and not self.store.readonly and not on_ray:
            await self._remove_sandboxes(ctx.run_id, "left by an earlier invocation")
        watching = asyncio.create_task(self._watch_budget()) if self.budget else None
        try:
            if on_ray:
                from helios.engine.ray_executor import run_on_ray

                await run_on_ray(self, plan.pending, ctx, self.concurrency.ray_address,
                                 self.provider)  # fmt: skip
            elif workers > 1:
                from helios.engine.workers import run_sharded

                await run_sharded(self, plan.pending, ctx, workers)
            else:
                with self._ledger_after_each_call():
                    await scheduler.run(plan.pending)
        except asyncio.CancelledError:
            self.interrupted = True
            await self._cleanup_after_interrupt(ctx.run_id)
            raise
        finally:
            if watching is not None:
                watching.cancel()
            if self.store is not None:
                self.store.flush()
        return self.recorded

    # -- budgets ---------------------------------------------------------------
    def note_spend(self) -> None:
        """Keep this invocation's model-call totals in the spend ledger (if they moved)."""
        if self.ledger is not None and self.services is not None:
            self.ledger.note(self.services.totals)

    @contextlib.contextmanager
    def _ledger_after_each_call(self) -> Iterator[None]:
        """In this process: the ledger is kept after each model call (`on_call`)."""
        services = self.services
        if self.ledger is None or services is None:
            yield
            return
        before = services.on_call

        def on_call() -> None:
            self.note_spend()
            if before is not None:
                before()

        services.on_call = on_call
        try:
            yield
        finally:
            services.on_call = before

    def halted(self, in_flight: int | None = None) -> bool:
        """Whether no more unit starts: a fatal stop, or a budget reached (counting
        `in_flight` trials, default: those started and not recorded yet, at their mean
        spend). Every executor asks before it starts (or hands out) a unit."""
        if self.aborted is not None:
            return True
        budget = self.budget
        if budget is None:
            return False
        if budget.stopped_by is not None:
            return True
        n = self.started_units - len(self._accounted) if in_flight is None else in_flight
        self._observe()
        reason = budget.reached(max(0, min(n, self.concurrency.in_flight)))
        if reason is not None:
            self._budget_stop(reason)
        return reason is not None

    def _starts_nothing(self) -> bool:
        if self.halted():
            return True
        self.started_units += 1
        return False

    def _observe(self) -> None:
        if self.budget is not None:
            totals = self.services.totals if self.services is not None else None
            self.budget.observe(totals, self.clock() if self.clock is not None else 0.0)

    def _budget_stop(self, reason: str) -> None:
        assert self.budget is not None
        if self.budget.stopped_by is None:
            self.budget.stopped_by = reason
            self._emit(BatchStopping(self.budget.stop_reason()))

    async def _watch_budget(self) -> None:
        """Under a time budget, or `hard`, the budget is checked while trials run too:
        a hard budget stops them once the spend reaches it (`BudgetStopped`); the run's
        time is kept in run.json meanwhile, so a kill -9 loses little of it."""
        budget = self.budget
        assert budget is not None
        saved = asyncio.get_running_loop().time()
        while True:
            await asyncio.sleep(BUDGET_EVERY)
            self._observe()
            reached = budget.reached()  # the spend itself, not the projection of starts
            if reached is not None:
                self._budget_stop(reached)
            if budget.config.hard and reached is not None and not self._hard_stopping:
                self._hard_stopping = True
                for running in list(self._running):
                    running.cancel()
                if self.on_hard_stop is not None:
                    self.on_hard_stop()
            now = asyncio.get_running_loop().time()
            if self.save_clock is not None and budget.config.max_seconds and now - saved > 5:
                saved = now
                self.save_clock()  # a small atomic write, as the store's appends are

    async def _stoppable(self, unit: U, ctx: EpisodeContext, slot: Slot) -> R:
        """A unit under a hard budget: stopped (cancelled: its sandbox stops as after
        an interrupt) once the budget is reached, and recorded as `BudgetStopped`."""
        inner = asyncio.ensure_future(self.door.run_unit(unit, ctx, slot))
        self._running.add(inner)
        try:
            return await inner
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if not self._hard_stopping or (me is not None and me.cancelling()):
                raise
            assert self.budget is not None
            error = ErrorInfo(type=BUDGET_STOPPED, message=self.budget.stop_reason(),
                              phase="internal", infrastructure=True)  # fmt: skip
            return self.door.crashed(unit, error)
        finally:
            self._running.discard(inner)

    def _spend_keys(self, unit: U, result: R) -> dict[str, Any]:
        """The record's spend and, for a unit a budget stopped, the mark that runs it
        again on resume."""
        keys: dict[str, Any] = {}
        usage = getattr(result, "usage", None)
        if isinstance(usage, Usage):
            keys[SPEND_KEY] = record_spend(usage)
            if self.ledger is not None and self.ledger.kept:  # its calls are in the ledger
                keys[SPEND_KEY][INVOCATION_KEY] = self.ledger.invocation
        if self.budget is not None and self.door.verdict(result).error_kind == BUDGET_STOPPED:
            keys[STOPPED_KEY] = True
        self._account(unit, keys.get(SPEND_KEY, {}))
        return keys

    def _account(self, unit: U, spend: dict[str, Any]) -> None:
        """Count a finished unit's spend in the budget once, as soon as its result
        exists: in one process before its files are written (the next start is decided
        meanwhile), else as its result arrives."""
        if self.budget is None or unit.trial_id in self._accounted:
            return
        self._accounted.add(unit.trial_id)
        self.budget.on_record(spend)

    async def _record(self, unit: U, result: R, extra: Mapping[str, Any] | None = None) -> None:
        """Write the result's files, then its completion record (with `extra` keys of
        the executor's, e.g. how many times Ray ran it), then events and callbacks."""
        # Decide the fatal stop before the first await: the scheduler hands the
        # freed slot to the next unit as soon as this coroutine yields.
        self._check_fatal(self.door.verdict(result))
        self.note_spend()  # the ledger holds at least what the record will
        try:
            if getattr(self.door, "writes_files", True):
                await asyncio.to_thread(self.door.write_files, unit, result)
        except OSError as exc:
            if _out_of_space(exc):
                self._stop(f"the output disk is full ({exc.strerror}): nothing more is started")
            result = self.door.crashed(unit, ErrorInfo.from_exception(exc, "record"))
        extra = {**(extra or {}), **self._spend_keys(unit, result)}
        if (marks := self._retries.get(unit.trial_id)) is not None:
            extra.update(retries.keys(*marks, self.retry))
        if self.store is not None:
            try:
                record = self.door.to_record(unit, result)
                self.store.append({**record, **extra} if extra else record)
            except OSError as exc:
                # The record is rolled back: this unit runs again on resume.
                self._stop(f"cannot record results in {self.store.run_dir}: {exc.strerror}")
                return
        if (replaced := self._supersedes.get(unit.trial_id)) is not None:
            self.superseded.add(replaced)
        if self.keep_results:
            self.recorded.append(result)
        verdict = self.door.verdict(result)
        self.counts.total += 1
        self.counts.passed += verdict.passed
        self.counts.errors += verdict.error_kind is not None
        self._emit(TrialFinished(unit.trial_id, unit.label, verdict.passed, verdict.detail))
        await self._notify(unit, result)

    def _stop(self, reason: str) -> None:
        if self.aborted is None:
            self.aborted = reason
            self._emit(BatchStopping(reason))

    def _check_fatal(self, verdict: Verdict) -> None:
        kind = verdict.error_kind
        last, count = self._in_a_row
        self._in_a_row = (kind, count + 1 if kind == last else 1)
        limit = self.stop_after_in_a_row.get(kind or "")
        fatal = kind in self.fatal_errors or (
            limit is not None and self._in_a_row[1] >= limit
        )
        if fatal:
            # Every other unit would fail the same way: stop starting new ones.
            self._stop(f"{kind}: {verdict.error_message}")

    async def _notify(self, unit: U, result: R) -> None:
        if self.on_recorded is None:
            return
        try:
            maybe = self.on_recorded(unit, result)
            if inspect.isawaitable(maybe):
                await maybe
        except Exception as exc:
            # The user's callback must not lose the batch: one line, and go on.
            log.error("the on_complete callback failed for %s: %s: %s",
                      unit.label, type(exc).__name__, exc)  # fmt: skip

    async def _cleanup_after_interrupt(self, run_id: str) -> None:
        await asyncio.shield(self._remove_sandboxes(run_id, "after an interrupt"))

    async def _remove_sandboxes(self, run_id: str, why: str) -> None:
        """The provider's cleanup hook for this run's sandboxes; a failure is logged,
        never raised (the batch goes on; `helios cleanup` is the fallback)."""
        if self.provider is None:
            return
        from helios.environments.registry import provider_class

        try:
            provider = provider_class(self.provider)
            removed = await provider.cleanup_run(run_id)
        except Exception as exc:
            log.info("could not remove the sandboxes of run %s (%s): %s: %s",
                     run_id, why, type(exc).__name__, exc)  # fmt: skip
            return
        if removed:
            log.info("removed %d sandbox(es) of run %s %s", len(removed), run_id, why)

    def _emit(self, event: Any) -> None:
        if self.emit is not None:
            self.emit(event)


def _out_of_space(exc: OSError) -> bool:
    return exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS)
