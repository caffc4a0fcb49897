"""The one engine: scheduling, limits, the store, metrics and progress.

What a front door needs is named here (`from helios.engine import BatchService,
Door, run_episode`): the door contract, the batch service, the episode, the
scheduler's slot, the run store and the events. The names are imported on first
use, so `import helios.engine.events` (the display's) stays light. Each is written
once, as an import under `TYPE_CHECKING` (`helios.lazy.lazy_exports` reads them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from helios.lazy import lazy_exports

if TYPE_CHECKING:
    from helios.engine.batch import BatchPlan as BatchPlan
    from helios.engine.batch import BatchService as BatchService
    from helios.engine.batch import Counts as Counts
    from helios.engine.calls import EndpointCalls as EndpointCalls
    from helios.engine.config import ConcurrencyConfig as ConcurrencyConfig
    from helios.engine.config import OutputsConfig as OutputsConfig
    from helios.engine.config import RunConfig as RunConfig
    from helios.engine.config import SandboxConfig as SandboxConfig
    from helios.engine.door import Door as Door
    from helios.engine.door import Unit as Unit
    from helios.engine.door import Verdict as Verdict
    from helios.engine.episode import AgentRun as AgentRun
    from helios.engine.episode import Episode as Episode
    from helios.engine.episode import EpisodeBody as EpisodeBody
    from helios.engine.episode import EpisodeContext as EpisodeContext
    from helios.engine.episode import EpisodeSession as EpisodeSession
    from helios.engine.episode import EpisodeSpec as EpisodeSpec
    from helios.engine.episode import PhaseTimings as PhaseTimings
    from helios.engine.episode import Score as Score
    from helios.engine.episode import Scorer as Scorer
    from helios.engine.episode import now_iso as now_iso
    from helios.engine.episode import run_episode as run_episode
    from helios.engine.episode import unit_dir as unit_dir
    from helios.engine.run import Run as Run
    from helios.engine.run import RunOutcome as RunOutcome
    from helios.engine.scheduler import Scheduler as Scheduler
    from helios.engine.shared import SharedValues as SharedValues
    from helios.engine.store import KEEP_LEFTOVERS as KEEP_LEFTOVERS
    from helios.engine.store import RunInUse as RunInUse
    from helios.engine.store import RunStore as RunStore
    from helios.engine.store import new_run_dir as new_run_dir
    from helios.engine.store import run_metadata as run_metadata
    from helios.engine.store import write_json_atomic as write_json_atomic
    from helios.engine.workers import default_workers as default_workers
    from helios.events import BatchPlanned as BatchPlanned
    from helios.events import BatchStopping as BatchStopping
    from helios.events import DesktopReady as DesktopReady
    from helios.events import Event as Event
    from helios.events import EventSink as EventSink
    from helios.events import PhaseChanged as PhaseChanged
    from helios.events import Retrying as Retrying
    from helios.events import TrialFinished as TrialFinished
    from helios.events import TrialStarted as TrialStarted
    from helios.events import TurnStarted as TurnStarted
    from helios.events import emit_to as emit_to
    from helios.slots import Slot as Slot
    from helios.slots import backoff_sleep as backoff_sleep

__getattr__, __dir__ = lazy_exports(globals())
