"""Gemini replies → AgentResponse: generateContent bodies (REST camelCase or SDK
snake_case) and Live API `toolCall` messages, alone or as a list of messages."""

from __future__ import annotations

from typing import Any

from helios.models.base import ToolCall
from helios.toolcalls.parsers.common import field, parsed_call
from helios.toolcalls.types import AgentResponse


class GeminiResponseParser:
    def parse(self, raw_response: Any) -> AgentResponse:
        messages = raw_response if isinstance(raw_response, list) else [raw_response]
        calls: list[ToolCall] = []
        for message in messages:
            calls.extend(self._from_message(message))
        return AgentResponse(tool_calls=calls, raw=raw_response)

    def _from_message(self, message: Any) -> list[ToolCall]:
        calls: list[ToolCall] = []
        for candidate in field(message, "candidates", default=None) or []:
            content = field(candidate, "content", default=None)
            for part in field(content, "parts", default=None) or [] if content else []:
                function = field(part, "functionCall", "function_call", default=None)
                if function is not None:
                    calls.append(_call(function))
        live = field(message, "toolCall", "tool_call", default=None)
        if live is not None:
            for function in field(live, "functionCalls", "function_calls", default=None) or []:
                calls.append(_call(function))
        return calls


def _call(function: Any) -> ToolCall:
    name = str(field(function, "name", default=""))
    return parsed_call(name, field(function, "args", "arguments", default=None))
