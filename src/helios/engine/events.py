"""The engine's typed events, for the display and callbacks: defined in
`helios.events`, below the agents that emit some of them, and named here too."""

from helios.events import (
    BatchPlanned,
    BatchStopping,
    DesktopReady,
    Event,
    EventSink,
    PhaseChanged,
    Retrying,
    ToolCalled,
    TrialFinished,
    TrialStarted,
    TurnStarted,
    emit_to,
)

__all__ = [
    "BatchPlanned",
    "BatchStopping",
    "DesktopReady",
    "Event",
    "EventSink",
    "PhaseChanged",
    "Retrying",
    "ToolCalled",
    "TrialFinished",
    "TrialStarted",
    "TurnStarted",
    "emit_to",
]
