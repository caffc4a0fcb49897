"""The one engine: scheduling, limits, the store, metrics and progress.

What a front door needs is named here (`from helios.engine import BatchService,
Door, run_episode`): the door contract, the batch service, the episode, the
scheduler's slot, the run store and the events. The names are imported on first
use, so `import helios.engine.events` (the display's) stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from helios.lazy import lazy_exports

if TYPE_CHECKING:
    from helios.engine.batch import BatchOptions, BatchPlan, BatchService, Counts
    from helios.engine.calls import EndpointCalls
    from helios.engine.door import Door, Unit, Verdict
    from helios.engine.episode import (
        AgentRun,
        Episode,
        EpisodeBody,
        EpisodeContext,
        EpisodeSession,
        EpisodeSpec,
        PhaseTimings,
        Score,
        Scorer,
        now_iso,
        run_episode,
        unit_dir,
    )
    from helios.engine.run import (
        ConcurrencyConfig,
        OutputsConfig,
        Run,
        RunConfig,
        RunOutcome,
        SandboxConfig,
    )
    from helios.engine.scheduler import Scheduler
    from helios.engine.shared import SharedValues
    from helios.engine.store import (
        KEEP_LEFTOVERS,
        RunInUse,
        RunStore,
        new_run_dir,
        run_metadata,
        write_json_atomic,
    )
    from helios.engine.workers import default_workers
    from helios.events import (
        BatchPlanned,
        BatchStopping,
        DesktopReady,
        Event,
        EventSink,
        PhaseChanged,
        Retrying,
        TrialFinished,
        TrialStarted,
        TurnStarted,
        emit_to,
    )
    from helios.slots import Slot, backoff_sleep

_FROM = {
    "helios.engine.batch": ("BatchOptions", "BatchPlan", "BatchService", "Counts"),
    "helios.engine.calls": ("EndpointCalls",),
    "helios.engine.door": ("Door", "Unit", "Verdict"),
    "helios.engine.episode": (
        "AgentRun", "Episode", "EpisodeBody", "EpisodeContext", "EpisodeSession", "EpisodeSpec",
        "PhaseTimings", "Score", "Scorer", "now_iso", "run_episode", "unit_dir",
    ),
    "helios.engine.run": (
        "ConcurrencyConfig", "OutputsConfig", "Run", "RunConfig", "RunOutcome", "SandboxConfig",
    ),
    "helios.engine.scheduler": ("Scheduler",),
    "helios.engine.shared": ("SharedValues",),
    "helios.engine.store": (
        "KEEP_LEFTOVERS", "RunInUse", "RunStore", "new_run_dir", "run_metadata",
        "write_json_atomic",
    ),
    "helios.engine.workers": ("default_workers",),
    "helios.events": (
        "BatchPlanned", "BatchStopping", "DesktopReady", "Event", "EventSink", "PhaseChanged",
        "Retrying", "TrialFinished", "TrialStarted", "TurnStarted", "emit_to",
    ),
    "helios.slots": ("Slot", "backoff_sleep"),
}  # fmt: skip
_EXPORTS = {name: module for module, names in _FROM.items() for name in names}

__all__ = [
    "KEEP_LEFTOVERS",
    "AgentRun",
    "BatchOptions",
    "BatchPlan",
    "BatchPlanned",
    "BatchService",
    "BatchStopping",
    "ConcurrencyConfig",
    "Counts",
    "DesktopReady",
    "Door",
    "EndpointCalls",
    "Episode",
    "EpisodeBody",
    "EpisodeContext",
    "EpisodeSession",
    "EpisodeSpec",
    "Event",
    "EventSink",
    "OutputsConfig",
    "PhaseChanged",
    "PhaseTimings",
    "Retrying",
    "Run",
    "RunConfig",
    "RunInUse",
    "RunOutcome",
    "RunStore",
    "SandboxConfig",
    "Scheduler",
    "Score",
    "Scorer",
    "SharedValues",
    "Slot",
    "TrialFinished",
    "TrialStarted",
    "TurnStarted",
    "Unit",
    "Verdict",
    "backoff_sleep",
    "default_workers",
    "emit_to",
    "new_run_dir",
    "now_iso",
    "run_episode",
    "run_metadata",
    "unit_dir",
    "write_json_atomic",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), __all__)
