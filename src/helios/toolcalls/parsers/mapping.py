"""JsonResponseParser: tool calls from any JSON shape, described by dot paths."""

from __future__ import annotations

from typing import Any

from helios.models.base import ToolCall
from helios.toolcalls.parsers.common import parsed_call
from helios.toolcalls.types import AgentResponse

_MISSING = object()


def extract_path(obj: Any, path: str) -> Any:
    """Walk `a.b.0.c` through dicts and lists; _MISSING when a step is absent."""
    current = obj
    if not path:
        return current
    for key in path.split("."):
        if isinstance(current, dict) and key in current:
            current = current[key]
        elif isinstance(current, list) and key.lstrip("-").isdigit():
            index = int(key)
            if not -len(current) <= index < len(current):
                return _MISSING
            current = current[index]
        else:
            return _MISSING
    return current


class JsonResponseParser:
    """Reads calls at `tool_calls_key`; each call's name at `name_key` and its
    arguments at `arguments_key` (all dot paths; list indexes allowed). With
    `single=True` the path holds one call object instead of a list. A list of
    messages (a WebSocket conversation) is searched message by message and the
    calls of every message that has some are collected.
    """

    def __init__(
        self,
        *,
        tool_calls_key: str = "tool_calls",
        name_key: str = "name",
        arguments_key: str = "arguments",
        single: bool = False,
    ) -> None:
        self.tool_calls_key = tool_calls_key
        self.name_key = name_key
        self.arguments_key = arguments_key
        self.single = single

    def __repr__(self) -> str:
        return (
            f"JsonResponseParser(tool_calls_key={self.tool_calls_key!r}, "
            f"name_key={self.name_key!r}, arguments_key={self.arguments_key!r}, "
            f"single={self.single})"
        )

    def parse(self, raw_response: Any) -> AgentResponse:
        direct = self._calls(raw_response)
        if direct is not None or not isinstance(raw_response, list):
            return AgentResponse(tool_calls=direct or [], raw=raw_response)
        calls: list[ToolCall] = []
        for message in raw_response:
            calls.extend(self._calls(message) or [])
        return AgentResponse(tool_calls=calls, raw=raw_response)

    def _calls(self, obj: Any) -> list[ToolCall] | None:
        found = extract_path(obj, self.tool_calls_key)
        if found is _MISSING or found is None:
            return None
        items = [found] if self.single else found
        if not isinstance(items, list):
            return None
        calls = []
        for item in items:
            name = extract_path(item, self.name_key)
            if not isinstance(name, str) or not name:
                continue
            arguments = extract_path(item, self.arguments_key)
            calls.append(parsed_call(name, None if arguments is _MISSING else arguments))
        return calls
