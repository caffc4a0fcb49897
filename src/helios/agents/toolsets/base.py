"""The contract of a tool: a `ToolSpec` for the model, and `run` inside a sandbox.

A tool is stateless: what one run needs (the environment, the working folder,
limits) arrives in a `ToolContext`, so one instance serves every trial at once.
A bad call by the model raises `ToolInputError`, whose message goes back to the
model; only infrastructure failures (`EnvironmentError_`) and cancellation
propagate out of the `ToolRunner`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from helios.agents.tools_text import ToolInputError
from helios.errors import ConfigError
from helios.models.tools import ToolSpec

if TYPE_CHECKING:
    from helios.environments.base import Environment

__all__ = ["Tool", "ToolContext", "ToolInputError", "ToolOutcome", "Toolset", "ToolsetUnavailable"]

DEFAULT_TIMEOUT = 120.0
DEFAULT_MAX_OUTPUT_CHARS = 16000


@dataclass(frozen=True)
class ToolOutcome:
    #: text returned to the model, already truncated
    output: str
    is_error: bool = False
    #: the agent asked to end the run (submit)
    finished: bool = False
    #: the call itself was malformed (unknown tool, arguments not a JSON object):
    #: the agent counts these to give up on a model that cannot call tools
    malformed: bool = False


@dataclass
class ToolContext:
    """What a tool call may use: one run's sandbox and its limits."""

    env: Environment
    #: the run's working directory inside the sandbox
    workdir: str
    default_timeout: float = DEFAULT_TIMEOUT
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS
    #: environment variables for commands the tools run (never secrets)
    exec_env: dict[str, str] = field(default_factory=dict)


class Tool(ABC):
    """One tool. Subclasses set `spec` and implement `run`."""

    spec: ClassVar[ToolSpec]

    @property
    def name(self) -> str:
        return self.spec.name

    @abstractmethod
    async def run(self, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        """Run one call. Raise `ToolInputError` for a bad call; never for a failed command."""


class ToolsetUnavailable(ConfigError):
    """A toolset exists but cannot be used here (e.g. web search without a backend)."""

    kind = "ToolsetUnavailable"


def always_available() -> str | None:
    """The default `Toolset.unavailable_reason` (a function, not a lambda, so that a
    toolset pickles for worker processes)."""
    return None


@dataclass(frozen=True)
class Toolset:
    name: str
    description: str
    #: factories, so a toolset can check its configuration when it is asked for
    tools: Sequence[Callable[[], Tool]]
    #: None when usable; else why not (one line, naming what to configure)
    unavailable_reason: Callable[[], str | None] = always_available

    def create(self) -> list[Tool]:
        reason = self.unavailable_reason()
        if reason is not None:
            raise ToolsetUnavailable(f"toolset {self.name!r} is unavailable: {reason}")
        return [factory() for factory in self.tools]

    def tool_names(self) -> list[str]:
        return [factory().name for factory in self.tools]


def tools_by_name(tools: Sequence[Tool]) -> Mapping[str, Tool]:
    return {tool.name: tool for tool in tools}
