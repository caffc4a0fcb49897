"""The extension points of a tool-call test, as russo defines them.

Any object with the right method fits; nothing needs to inherit from these.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from helios.models.base import ToolCall
from helios.toolcalls.types import AgentResponse, Audio, EvalResult


@runtime_checkable
class Synthesizer(Protocol):
    """Turns a prompt's text into speech."""

    async def synthesize(self, text: str) -> Audio: ...


@runtime_checkable
class Agent(Protocol):
    """Hears audio and answers with the tool calls it made."""

    async def run(self, audio: Audio) -> AgentResponse: ...


@runtime_checkable
class TextAgent(Protocol):
    """Reads the prompt as text (text mode: the synthesizer may be None)."""

    async def run_text(self, prompt: str) -> AgentResponse: ...


@runtime_checkable
class Evaluator(Protocol):
    """Scores the actual tool calls against the expected ones."""

    def evaluate(self, expected: list[ToolCall], actual: list[ToolCall]) -> EvalResult: ...


@runtime_checkable
class ResponseParser(Protocol):
    """Turns a provider's raw reply into an AgentResponse."""

    def parse(self, raw_response: Any) -> AgentResponse: ...
