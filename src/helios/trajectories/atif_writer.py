"""Render a Helios conversation as an ATIF document (the task door's trajectory.json).

The agent keeps plain `Message`s as it goes; this runs once per trial, after the
agent has stopped (also after a timeout), so no turn pays for serialisation.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from helios.models.base import Message, ToolCall
from helios.safe_json import dumps
from helios.secrets import redact_value
from helios.trajectories.atif import (
    StepMetrics,
    ToolCallRecord,
    TrajectoryRecorder,
    atomic_write_text,
)


def conversation_to_atif(
    conversation: Sequence[Message],
    *,
    session_id: str,
    agent_name: str,
    agent_version: str,
    model_name: str | None,
    tool_definitions: list[dict[str, Any]],
) -> dict[str, Any]:
    recorder = TrajectoryRecorder(
        session_id=session_id,
        agent_name=agent_name,
        agent_version=agent_version,
        model_name=model_name,
        tool_definitions=tool_definitions,
    )
    step_of_call: dict[str, int] = {}
    for message in conversation:
        if message.role == "system":
            recorder.add_system(message.content, at=message.created)
        elif message.role == "user":
            recorder.add_user(message.content, at=message.created)
        elif message.role == "assistant":
            calls = [_call_record(call) for call in message.tool_calls]
            step_id = recorder.add_agent(
                message=message.content,
                reasoning=message.reasoning,
                tool_calls=calls or None,
                metrics=_metrics(message),
                model_name=message.model or None,
                at=message.created,
            )
            step_of_call.update({call.id: step_id for call in message.tool_calls})
        elif message.tool_call_id in step_of_call:
            recorder.add_observation(
                step_of_call[message.tool_call_id], message.tool_call_id, message.content
            )
    document: dict[str, Any] = redact_value(recorder.to_dict())
    return document


def write_atif(path: Path, conversation: Sequence[Message], **meta: Any) -> None:
    """Write the conversation's ATIF document atomically (keys redacted)."""
    document = conversation_to_atif(conversation, **meta)
    atomic_write_text(path, dumps(document, indent=2, ensure_ascii=False) + "\n")


def _call_record(call: ToolCall) -> ToolCallRecord:
    arguments = call.arguments if call.arguments is not None else {"_raw": call.raw_arguments}
    return ToolCallRecord(tool_call_id=call.id, function_name=call.name, arguments=arguments)


def _metrics(message: Message) -> StepMetrics | None:
    usage = message.usage
    if usage is None:
        return None
    return StepMetrics(
        prompt_tokens=usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens,
        completion_tokens=usage.output_tokens,
        cached_tokens=usage.cache_read_tokens,
        cost_usd=usage.cost_usd,
        reasoning_tokens=usage.reasoning_tokens,
    )
