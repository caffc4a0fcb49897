"""The built-in tool-calling agent: a system prompt plus the instruction, then
model turns with native tool calls until it submits or answers without a call.

The door chooses the tools (`ctx.tools`, else the `toolsets` setting, default
`core`: bash, editor, submit). Per turn it does O(new messages) work: messages
are converted to the wire format once, and the conversation only grows by
appends into `ctx.conversation`; writers render it once, after the run.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from helios.agents.base import Agent, AgentContext, AgentOutcome
from helios.agents.mcp_tools import DEFAULT_TIMEOUT as MCP_TIMEOUT
from helios.agents.mcp_tools import mcp_tools
from helios.agents.model_turn import model_turn, require_services
from helios.agents.skills import find_skills, skills_prompt
from helios.agents.tools import ToolRunner
from helios.agents.toolsets import Tool, resolve_tools
from helios.environments.base import Environment
from helios.failures import ErrorInfo
from helios.models.base import Message, ToolCall
from helios.models.errors import ContextWindowError
from helios.models.services import ModelServices

DEFAULT_MAX_TURNS = 50
DEFAULT_TOOLSETS = ("core",)
#: invalid tool names, invalid JSON arguments or empty replies in a row before giving up
MAX_CONSECUTIVE_INVALID = 3
DEFAULT_SYSTEM_PROMPT = """\
You are an expert engineer solving a task inside a Linux sandbox.
Work in {workdir} unless the task says otherwise. Use the `bash` tool to run
shell commands and the `editor` tool to view, create and edit files. Inspect
before you change things, make the changes, then check your work with a command.
When the task is complete, call `submit`. Do not ask questions: nobody will answer.
"""
EMPTY_REPLY_NUDGE = (
    "Your reply had no text and no tool call. Continue working on the task with the "
    "tools, and call `submit` when it is complete."
)
#: the nudge when the tools have no `submit` (Hermes's toolsets): a final answer ends the run
EMPTY_REPLY_NUDGE_NO_SUBMIT = (
    "Your reply had no text and no tool call. Continue working on the task with the "
    "tools, and reply with your final answer when it is complete."
)


@dataclass
class _Run:
    """The state of one agent run."""

    ctx: AgentContext
    services: ModelServices
    tools: ToolRunner
    tool_wire: list[dict[str, Any]]
    messages: list[Message]
    invalid_in_a_row: int = 0
    turns: int = 0


class ToolAgent(Agent):
    name: ClassVar[str] = "tool"
    version: ClassVar[str] = "1.0"
    uses_model: ClassVar[bool] = True
    #: a task's skills go into the system prompt; its stdio MCP servers' tools are
    #: offered next to the agent's own (`mcp_tools`)
    takes: ClassVar[frozenset[str]] = frozenset({"skills", "mcp", "mcp-http"})

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        self.max_turns = int(settings.get("max_turns") or DEFAULT_MAX_TURNS)
        self.system_prompt = str(settings.get("system_prompt") or DEFAULT_SYSTEM_PROMPT)
        self.toolsets = tuple(settings.get("toolsets") or DEFAULT_TOOLSETS)
        #: messages sent after the system prompt and before the instruction (few-shot)
        self.prefill: list[dict[str, str]] = list(settings.get("prefill") or [])
        #: how long an MCP server has to start, list its tools or answer one call
        self.mcp_timeout = float(settings.get("mcp_timeout") or MCP_TIMEOUT)

    def identity(self) -> dict[str, Any]:
        prompt_hash = hashlib.sha256(self.system_prompt.encode()).hexdigest()[:16]
        identity: dict[str, Any] = {
            "name": self.name, "version": self.version, "max_turns": self.max_turns,
            "system_prompt": prompt_hash,
        }  # fmt: skip
        # Only when they differ from the defaults, so ids of earlier runs stay valid.
        if self.toolsets != DEFAULT_TOOLSETS:
            identity["toolsets"] = list(self.toolsets)
        if self.prefill:
            identity["prefill"] = hashlib.sha256(repr(self.prefill).encode()).hexdigest()[:16]
        return identity

    def tools_for(self, ctx: AgentContext) -> Sequence[Tool]:
        return ctx.tools if ctx.tools is not None else resolve_tools(self.toolsets)

    async def run(self, instruction: str, env: Environment, ctx: AgentContext) -> AgentOutcome:
        services = require_services(ctx, "tool")
        async with contextlib.AsyncExitStack() as stack:
            tools = list(self.tools_for(ctx))
            extra = ""
            if ctx.skills_dir is not None:
                extra += skills_prompt(await find_skills(env, ctx.skills_dir, ctx.workdir))
            if ctx.mcp_servers:
                found, notes = await stack.enter_async_context(mcp_tools(
                    env, ctx.mcp_servers, workdir=ctx.workdir,
                    taken={t.name for t in tools}, timeout=self.mcp_timeout,
                ))  # fmt: skip
                tools += found
                extra += "".join(f"\nNote: {note}." for note in notes)
            run = self._start(instruction, env, ctx, services, tools, extra)
            outcome = AgentOutcome(
                conversation=ctx.conversation,
                tools=run.tools.specs,
                setup_messages=1 + len(self.prefill),
            )
            try:
                outcome.error = await self._loop(run)
            except ContextWindowError as exc:
                outcome.error = ErrorInfo(
                    type="ContextWindowExceeded", message=str(exc), phase="agent"
                )
            finally:
                outcome.n_turns = run.turns
            return outcome

    def _start(
        self,
        instruction: str,
        env: Environment,
        ctx: AgentContext,
        services: ModelServices,
        tools: Sequence[Tool],
        extra_prompt: str = "",
    ) -> _Run:
        system = self.system_prompt.replace("{workdir}", ctx.workdir) + extra_prompt
        anthropic = services.spec.api == "anthropic"
        runner = ToolRunner(env, workdir=ctx.workdir, tools=tools, exec_env=ctx.exec_env)
        ctx.tool_specs[:] = runner.specs
        wire = [s.to_anthropic() if anthropic else s.to_openai() for s in runner.specs]
        run = _Run(ctx, services, runner, wire, messages=ctx.conversation)
        run.messages.append(Message("system", system))
        for item in self.prefill:
            run.messages.append(Message(item["role"], item["content"]))  # type: ignore[arg-type]
        run.messages.append(Message("user", instruction))
        return run

    async def _loop(self, run: _Run) -> ErrorInfo | None:
        """Model turns until submit; returns why it stopped early, if it did."""
        while run.turns < self.max_turns:
            run.turns += 1
            run.ctx.turn(run.turns)
            response = await model_turn(run.ctx, run.services, run.messages, run.tool_wire)
            message = response.message
            run.messages.append(message)
            if not message.tool_calls:
                if message.content.strip():
                    return None  # a plain answer ends the run like submit
                self._count_invalid(run, valid=False)
                nudge = (
                    EMPTY_REPLY_NUDGE
                    if "submit" in run.tools.tools
                    else (EMPTY_REPLY_NUDGE_NO_SUBMIT)
                )
                run.messages.append(Message("user", nudge))
            elif await self._run_calls(run, message.tool_calls):
                return None
            if run.invalid_in_a_row >= MAX_CONSECUTIVE_INVALID:
                return ErrorInfo(
                    type="InvalidReplies",
                    message=f"{run.invalid_in_a_row} invalid or empty replies in a row",
                    phase="agent",
                )
        return ErrorInfo(type="MaxTurns", message=f"stopped after {self.max_turns} turns",
                         phase="agent")  # fmt: skip

    async def _run_calls(self, run: _Run, calls: list[ToolCall]) -> bool:
        """Execute the turn's calls in order; True if one of them was submit."""
        finished = False
        all_malformed = True
        for call in calls:
            run.ctx.tool_called(call.name, call.arguments)
            result = await run.tools.run(call.name, call.arguments)
            run.messages.append(Message("tool", result.output, tool_call_id=call.id,
                                        is_error=result.is_error))  # fmt: skip
            finished = finished or result.finished
            all_malformed = all_malformed and result.malformed
        self._count_invalid(run, valid=not all_malformed)
        return finished

    @staticmethod
    def _count_invalid(run: _Run, *, valid: bool) -> None:
        run.invalid_in_a_row = 0 if valid else run.invalid_in_a_row + 1
