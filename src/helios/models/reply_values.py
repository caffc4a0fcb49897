"""Values read from a model's reply, which is untrusted input: a token count must be
a sane whole number, and a tool call's arguments strict, finite JSON.

A reply that breaks these is malformed: `ValueError` here becomes a
`TransientError` in `JsonEndpoint.call` (retried, then recorded), never a crash and
never a NaN in a trajectory.
"""

from __future__ import annotations

import json
import math
from typing import Any

from helios.models.base import Message, ModelResponse, ToolCall
from helios.safe_json import JsonValueError, parse_json
from helios.usage import Usage

#: tokens one reply may report in one count: more is not a real reply (and, priced,
#: would overflow a float)
MAX_TOKENS = 10**12


def token_count(value: Any) -> int:
    """A usage count: absent is 0, a negative one is read as 0, anything that is not a
    finite number up to MAX_TOKENS is a ValueError."""
    if value is None or value == "":
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"usage: a token count of type {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("usage: a token count that is not finite")
    count = int(value)  # a str that is not digits is a ValueError too
    if count > MAX_TOKENS:
        raise ValueError(f"usage: a token count above {MAX_TOKENS:,}")
    return max(count, 0)


def parse_arguments(raw: str) -> dict[str, Any] | None:
    """A tool call's arguments as an object, or None if they are not strict JSON
    (NaN, nesting too deep, a number out of range) or not an object: the agent
    then tells the model its arguments were invalid."""
    if not raw.strip():
        return {}
    try:
        parsed = parse_json(raw)
    except JsonValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def function_call(call_id: Any, name: Any, raw_arguments: Any) -> ToolCall:
    """A function call of a reply: its arguments kept as sent (JSON text; any other
    value as its JSON) and parsed by `parse_arguments`."""
    arguments = raw_arguments if isinstance(raw_arguments, str) else json.dumps(raw_arguments)
    return ToolCall(
        id=str(call_id or ""),
        name=str(name or ""),
        arguments=parse_arguments(arguments),
        raw_arguments=arguments,
    )


def parts_response(
    texts: list[str], reasoning: list[str], calls: list[ToolCall], provider_state: Any,
    *, usage: Usage, finish_reason: str, model: str,
) -> ModelResponse:  # fmt: skip
    """The reply of a wire that sends its text and reasoning in parts (Messages,
    Responses, generateContent): the texts joined as they are, the reasoning parts
    one a line (None when there is none)."""
    message = Message(
        role="assistant",
        content="".join(texts),
        tool_calls=calls,
        reasoning="\n".join(reasoning) or None,
        provider_state=provider_state,
    )
    return ModelResponse(message=message, usage=usage, finish_reason=finish_reason, model=model)
