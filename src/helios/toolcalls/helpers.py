"""Small helpers of the russo API: `tool_call`, the `@agent` decorator, assertions."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from helios.models.base import ToolCall
from helios.toolcalls.types import AgentResponse, Audio, BatchResult, EvalResult, as_call

AgentFunction = Callable[[Audio], Awaitable[AgentResponse]]


def tool_call(name: str, **arguments: Any) -> ToolCall:
    """`tool_call("book_flight", from_city="NYC")`: an expected call (a models ToolCall)."""
    return ToolCall("", name, arguments)


class CallableAgent:
    """An agent from an async function `fn(audio) -> AgentResponse`.

    A function may also return a list of ToolCall (or of dicts with name and
    arguments); it is wrapped in an AgentResponse.
    """

    def __init__(self, fn: Callable[[Audio], Awaitable[Any]]) -> None:
        self._fn = fn
        functools.update_wrapper(self, fn)  # type: ignore[arg-type]

    async def run(self, audio: Audio) -> AgentResponse:
        return coerce_response(await self._fn(audio))

    def __repr__(self) -> str:
        return f"CallableAgent({getattr(self._fn, '__qualname__', self._fn)!r})"


def agent(fn: Callable[[Audio], Awaitable[Any]]) -> CallableAgent:
    """Decorator: `@agent async def my_agent(audio) -> AgentResponse`."""
    return CallableAgent(fn)


def coerce_response(value: Any) -> AgentResponse:
    if isinstance(value, AgentResponse):
        return value
    if isinstance(value, list):
        return AgentResponse(tool_calls=[coerce_call(item) for item in value], raw=value)
    raise TypeError(
        f"an agent must return an AgentResponse (or a list of tool calls), "
        f"not {type(value).__name__}"
    )


def coerce_call(value: Any) -> ToolCall:
    """A ToolCall from a ToolCall or a {"name": ..., "arguments": {...}} dict."""
    if isinstance(value, ToolCall | dict):
        return as_call(value)
    raise TypeError(f"a tool call must be a ToolCall or a dict, not {type(value).__name__}")


class ToolCallAssertionError(AssertionError):
    """A failed tool-call assertion whose message is the result's summary."""

    def __init__(self, result: EvalResult | BatchResult, message: str = "") -> None:
        self.result = result
        detail = result.summary()
        super().__init__(f"{message}\n{detail}" if message else detail)


def assert_tool_calls(result: EvalResult | BatchResult, *, message: str = "") -> None:
    """Raise ToolCallAssertionError, with the summary, unless the result passed."""
    if not result.passed:
        raise ToolCallAssertionError(result, message)
