"""What a front door is to the engine: its units, how one runs and becomes a
record, and the verdict the batch service counts and shows (`batch.BatchService`
drives a door; the worker processes of `--workers` run its units)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from helios.engine.calls import EndpointCalls
from helios.engine.episode import EpisodeContext
from helios.failures import ErrorInfo
from helios.slots import Slot


class Unit(Protocol):
    @property
    def trial_id(self) -> str: ...

    @property
    def folder(self) -> str | None: ...

    @property
    def label(self) -> str: ...


U_contra = TypeVar("U_contra", bound=Unit, contravariant=True)
R = TypeVar("R")


@dataclass(frozen=True)
class Verdict:
    passed: bool
    #: one line for the display, e.g. "reward=1 (2.1s)"
    detail: str
    #: the error kind, if the unit failed with one (decides the fatal stop)
    error_kind: str | None = None
    error_message: str = ""


class Door(Protocol[U_contra, R]):
    """What a front door supplies to the batch service."""

    async def run_unit(self, unit: U_contra, ctx: EpisodeContext, slot: Slot) -> R:
        """Run one unit; never raises (cancellation aside)."""
        ...

    def write_files(self, unit: U_contra, result: R) -> None:
        """The door's own files for this result, written before its record (in a
        thread). A door that keeps no files sets `writes_files = False` and skips
        the thread hop per unit."""
        ...

    def to_record(self, unit: U_contra, result: R) -> dict[str, Any]:
        """The completion record: JSON with at least `trial_id` and `status`."""
        ...

    def crashed(self, unit: U_contra, error: ErrorInfo) -> R:
        """A result for a unit whose run or recording failed unexpectedly."""
        ...

    def verdict(self, result: R) -> Verdict: ...


@runtime_checkable
class ReadsFolders(Protocol[U_contra]):
    """A door whose units read host folders (a task's folder). An executor whose
    nodes do not share the driver's file system (`--executor ray`) ships each folder
    once per node and runs the unit on the node's copy."""

    def inputs(self, unit: U_contra) -> Mapping[str, Path]:
        """The folders the unit reads, by a key naming their content (its hash)."""
        ...

    def with_inputs(self, unit: U_contra, copies: Mapping[str, Path]) -> Any:
        """The unit, reading its folders from `copies` (by the same keys)."""
        ...


@runtime_checkable
class CallsEndpoints(Protocol):
    """A door whose units call endpoints through `EndpointCalls` of its own (a tool-call
    agent under test, a speech synthesizer). An executor whose units run in processes
    of their own on several machines (`--executor ray`) gives each endpoint one limiter
    for the whole run, as it does the run's models."""

    def endpoints(self) -> Mapping[str, EndpointCalls]:
        """The door's endpoints, by a name unique in the door."""
        ...
