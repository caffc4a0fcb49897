"""The Agent contract: an instruction in; exec/upload/download on the environment;
the conversation and usage out.

An agent reports partial endings (max turns, context overflow, repeated bad
tool calls) in `AgentOutcome.error`: the trial is still scored. An agent that
raises marks the trial as errored; a timeout is enforced by the trial.

The conversation is kept in `AgentContext.conversation`, owned by the trial, so
a timeout or a crash still leaves what was said; writers render it (ATIF for
tasks, ShareGPT for datagen).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from helios.environments.base import Environment
from helios.environments.spec import SandboxSpec
from helios.events import MAX_TOOL_ARGUMENTS, EventSink, Retrying, ToolCalled, TurnStarted
from helios.failures import ErrorInfo
from helios.models.base import Message
from helios.models.tools import ToolSpec
from helios.slots import Slot
from helios.usage import Usage

if TYPE_CHECKING:
    from helios.agents.mcp_tools import MCPServer
    from helios.agents.toolsets.base import Tool
    from helios.models.services import ModelServices


@dataclass
class AgentContext:
    #: host folder for the agent's own files (logs); None = keep none
    logs_dir: Path | None
    timeout: float
    #: the agent's working directory inside the sandbox
    workdir: str = "/app"
    #: a short name of the unit of work, for messages
    label: str = ""
    trial_id: str = ""
    #: the trial's scheduler slot, released while waiting out backoffs
    slot: Slot | None = None
    emit: EventSink | None = None
    #: the agent adds each model call's usage here as it goes, so a timeout
    #: or a crash still keeps what was spent; it is the trial's usage
    usage: Usage = field(default_factory=Usage)
    #: the conversation so far, appended by the agent as it goes
    conversation: list[Message] = field(default_factory=list)
    #: the tools the agent offers the model, set when it starts (kept on a timeout)
    tool_specs: list[ToolSpec] = field(default_factory=list)
    #: shared model clients, limiter and prices; None for agents without a model
    services: ModelServices | None = None
    #: the tools the door offers for this unit; None = the agent's default
    tools: Sequence[Tool] | None = None
    #: a reference solution (the task door's `solution/`), for the oracle
    solution_dir: Path | None = None
    #: environment variables for the agent's commands (never secrets)
    exec_env: dict[str, str] = field(default_factory=dict)
    #: environment variables for the reference solution only (`[solution.env]`)
    solution_env: dict[str, str] = field(default_factory=dict)
    #: the MCP servers the unit offers (`[[environment.mcp_servers]]`), for agents
    #: that take "mcp"
    mcp_servers: tuple[MCPServer, ...] = ()
    #: the folder of skills inside the sandbox (`[environment] skills_dir`), for
    #: agents that take "skills"
    skills_dir: str | None = None

    def turn(self, n: int) -> None:
        if self.emit is not None:
            self.emit(TurnStarted(self.trial_id, n))

    def tool_called(self, name: str, arguments: dict[str, Any] | None) -> None:
        """Say that the agent calls `name` (for a display: the trial's record is the
        conversation)."""
        if self.emit is not None:
            text = json.dumps(arguments, ensure_ascii=False, default=str)
            self.emit(ToolCalled(self.trial_id, name, text[:MAX_TOOL_ARGUMENTS]))

    def retrying(self, phase: str, delay: float, error: str = "") -> None:
        if self.emit is not None:
            self.emit(Retrying(self.trial_id, phase, delay, error))


@dataclass
class AgentOutcome:
    #: a partial ending; the trial is still scored
    error: ErrorInfo | None = None
    n_turns: int = 0
    #: the whole conversation (Helios messages), as in `AgentContext.conversation`
    conversation: list[Message] = field(default_factory=list)
    #: the tools the agent offered the model (writers list them)
    tools: list[ToolSpec] = field(default_factory=list)
    #: messages before this index were set-up (system prompt, prefill): writers
    #: of training data may leave them out
    setup_messages: int = 0


class Agent(ABC):
    name: ClassVar[str]
    version: ClassVar[str] = "1.0"
    #: whether the agent calls a model (decides if --model and keys matter)
    uses_model: ClassVar[bool] = False
    #: what a task may offer its agent that this one takes: "skills" (`[environment]
    #: skills_dir`), "mcp" (`mcp_servers` over stdio), "mcp-http" (over HTTP too). An
    #: agent that has no use for them (the oracle, nop) takes them too: the task means
    #: the same to it. A task that offers one to an agent that does not take it is
    #: unsupported for that agent alone.
    takes: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, **settings: Any) -> None:
        self.settings = settings

    def identity(self) -> dict[str, Any]:
        """What about this agent changes results: part of every trial id."""
        return {"name": self.name, "version": self.version, "settings": self.settings}

    async def prepare_sandbox(
        self,
        sandbox: SandboxSpec,
        *,
        provider: str,
        services: ModelServices | None,
        logs_dir: Path | None,
    ) -> SandboxSpec:
        """The unit's sandbox as this agent needs it, asked once before it is built
        (an installed agent adds its install, and on a provider that cannot switch
        networks later, the egress proxy its model route needs). The default: as is."""
        return sandbox

    @abstractmethod
    async def run(self, instruction: str, env: Environment, ctx: AgentContext) -> AgentOutcome: ...
