"""A tool-call run as an engine episode: the null sandbox, the agent under test
behind an `Agent` adapter, and the evaluator as the episode's scorer.

The adapter hands the prompt's audio (text mode: its text) to the agent under test
through the engine's calls to that agent's endpoint (`EndpointCalls`: its limiter,
a timeout per attempt, its retries), or, for an agent that reaches a model through
Helios's model services (`ModelAgent`), straight to it: those services are the
engine's for the batch and retry its calls. The agent's answer becomes the
conversation's assistant turn, whose tool calls the scorer evaluates.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from helios.agents.base import Agent, AgentContext, AgentOutcome
from helios.engine import EndpointCalls, Score
from helios.environments.base import Environment
from helios.models.base import Message, ToolCall
from helios.models.errors import ModelError
from helios.toolcalls.context import current_context
from helios.toolcalls.helpers import coerce_response
from helios.toolcalls.protocols import Evaluator
from helios.toolcalls.types import Audio, EvalResult


class ToolCallAgent(Agent):
    """The episode's agent: one call of the agent under test."""

    name: ClassVar[str] = "toolcall"

    def __init__(self, agent: Any, *, audio: Audio | None, calls: EndpointCalls | None) -> None:
        super().__init__()
        self.agent = agent
        #: None: text mode (the agent reads the instruction)
        self.audio = audio
        #: None: the agent's own model services retry its calls
        self.calls = calls

    async def run(self, instruction: str, env: Environment, ctx: AgentContext) -> AgentOutcome:
        agent, audio = self.agent, self.audio

        async def call() -> Any:
            return await (agent.run_text(instruction) if audio is None else agent.run(audio))

        def retrying(error: ModelError, delay: float, attempt: int) -> None:
            ctx.usage.retries += 1
            ctx.retrying("agent", delay, f"{error.kind}: {error}")

        token = current_context.set(ctx)
        try:
            if self.calls is None:
                raw = await call()
            else:
                raw, _ = await self.calls.call(call, slot=ctx.slot, on_retry=retrying)
        finally:
            current_context.reset(token)
        response = coerce_response(raw)
        ctx.conversation.append(Message("user", instruction))
        ctx.conversation.append(Message("assistant", tool_calls=list(response.tool_calls)))
        return AgentOutcome(conversation=ctx.conversation, n_turns=1)


def answered_calls(outcome: AgentOutcome) -> list[ToolCall]:
    """The tool calls the agent made, in order."""
    return [call for message in outcome.conversation if message.role == "assistant"
            for call in message.tool_calls]  # fmt: skip


class EvaluatorScorer:
    """Scores the agent's calls against the expected ones; keeps the EvalResult."""

    phase = "evaluator"

    def __init__(self, evaluator: Evaluator, expect: Sequence[ToolCall]) -> None:
        self.evaluator = evaluator
        self.expect = list(expect)
        self.result: EvalResult | None = None

    async def score(self, env: Environment, outcome: AgentOutcome, out_dir: Path) -> Score:
        result = self.evaluator.evaluate(list(self.expect), answered_calls(outcome))
        self.result = as_eval_result(result)
        return Score(reward=1.0 if self.result.passed else 0.0)


def as_eval_result(result: Any) -> EvalResult:
    if isinstance(result, EvalResult):
        return result
    dump = getattr(result, "model_dump", None)
    if callable(dump):  # another library's EvalResult of the same shape
        return EvalResult.model_validate(dump())
    raise TypeError(f"the evaluator returned {type(result).__name__}, not EvalResult")
