"""Typed events: how the engine tells the display and callbacks what happens.

The engine emits; it never renders. Each event names its trial by id, so a
display can keep one row per trial in flight. The types live below every layer
that emits one (an agent says when it starts a turn or waits to retry); the
engine names them as well (`helios.engine.events`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BatchPlanned:
    total: int
    pending: int


@dataclass(frozen=True, slots=True)
class TrialStarted:
    trial_id: str
    label: str


@dataclass(frozen=True, slots=True)
class PhaseChanged:
    trial_id: str
    phase: str


@dataclass(frozen=True, slots=True)
class Retrying:
    trial_id: str
    phase: str
    delay: float
    error: str = ""


@dataclass(frozen=True, slots=True)
class TurnStarted:
    trial_id: str
    n: int


@dataclass(frozen=True, slots=True)
class ToolCalled:
    """An agent called a tool: its name and its arguments as compact JSON (at most
    `MAX_TOOL_ARGUMENTS` characters; a display fits them to its width)."""

    trial_id: str
    name: str
    arguments: str


#: the characters of a call's arguments an event carries
MAX_TOOL_ARGUMENTS = 2000


@dataclass(frozen=True, slots=True)
class TrialFinished:
    trial_id: str
    label: str
    passed: bool
    detail: str


@dataclass(frozen=True, slots=True)
class DesktopReady:
    """A trial's desktop is up (before its agent starts). With `--watch` its view
    is served from the sandbox: `vnc_socket` is the host path of x11vnc's unix
    socket, and `vnc_namespace` the pid namespace (its inode) of the x11vnc that
    answered there first, before any agent process existed; a later connection is
    taken only from a process of that namespace. No view: both None."""

    trial_id: str
    label: str
    width: int
    height: int
    vnc_socket: str | None = None
    vnc_namespace: int | None = None
    #: the viewer may take control (`--interactive`)
    interactive: bool = False
    #: the trial's folder on the host (its screenshots), None when it keeps none: once
    #: the trial ends, `--watch` shows its last screenshot from there
    folder: str | None = None


@dataclass(frozen=True, slots=True)
class BatchStopping:
    """No further trial starts (a fatal error); those in flight finish."""

    reason: str


Event = (
    BatchPlanned
    | TrialStarted
    | PhaseChanged
    | Retrying
    | TurnStarted
    | ToolCalled
    | TrialFinished
    | DesktopReady
    | BatchStopping
)
EventSink = Callable[[Event], None]


def emit_to(*sinks: EventSink | None) -> EventSink:
    """One sink that forwards to each of `sinks` (None ones are skipped)."""
    chosen = [sink for sink in sinks if sink is not None]

    def emit(event: Event) -> None:
        for sink in chosen:
            sink(event)

    return emit
