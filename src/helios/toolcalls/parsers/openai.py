"""OpenAI Chat Completions replies (dicts or SDK objects) → AgentResponse."""

from __future__ import annotations

from typing import Any

from helios.models.base import ToolCall
from helios.toolcalls.parsers.common import field, parsed_call
from helios.toolcalls.types import AgentResponse


class OpenAIResponseParser:
    """Reads `choices[*].message.tool_calls[*].function` (and legacy `function_call`)."""

    def parse(self, raw_response: Any) -> AgentResponse:
        calls: list[ToolCall] = []
        for choice in field(raw_response, "choices", default=None) or []:
            message = field(choice, "message", default=None)
            if message is None:
                continue
            for call in field(message, "tool_calls", default=None) or []:
                function = field(call, "function", default=None)
                if function is not None and field(function, "name", default=""):
                    calls.append(self._call(function))
            legacy = field(message, "function_call", default=None)
            if legacy is not None and field(legacy, "name", default=""):
                calls.append(self._call(legacy))
        return AgentResponse(tool_calls=calls, raw=raw_response)

    @staticmethod
    def _call(function: Any) -> ToolCall:
        return parsed_call(str(field(function, "name")), field(function, "arguments", default=None))
