"""Render a Helios conversation as an ATIF document (the task door's trajectory.json).

The agent keeps plain `Message`s as it goes; this runs once per trial, after the
agent has stopped (also after a timeout), so no turn pays for serialisation.

A message with images (a screenshot after a computer action) becomes content
parts: its text, then one image part per image, referencing the file
`images/<sha256>.png` beside the trajectory. `write_atif` writes those files
(each once) before the document, so the document never names a missing file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from helios.atomic_write import write_text_atomic
from helios.models.base import ImageRef, Message, ToolCall
from helios.safe_json import dumps
from helios.secrets import redact_value
from helios.trajectories.atif import (
    Content,
    StepMetrics,
    ToolCallRecord,
    TrajectoryRecorder,
    image_part,
    text_part,
)
from helios.trajectories.images import image_path, write_images

#: an image's path in the document (relative to its folder), None to leave it out
ImagePaths = Callable[[ImageRef], str | None]


def conversation_to_atif(
    conversation: Sequence[Message],
    *,
    session_id: str,
    agent_name: str,
    agent_version: str,
    model_name: str | None,
    tool_definitions: list[dict[str, Any]],
    image_paths: ImagePaths = image_path,
    partial: str | None = None,
) -> dict[str, Any]:
    """`partial`: why the agent stopped early (its timeout, ...): the document says
    it holds the steps made until then (`notes`, `extra.partial`)."""
    recorder = TrajectoryRecorder(
        session_id=session_id,
        agent_name=agent_name,
        agent_version=agent_version,
        model_name=model_name,
        tool_definitions=tool_definitions,
    )
    step_of_call: dict[str, int] = {}
    for message in conversation:
        content = _content(message, image_paths)
        if message.role == "system":
            recorder.add_system(content, at=message.created)
        elif message.role == "user":
            recorder.add_user(content, at=message.created)
        elif message.role == "assistant":
            calls = [_call_record(call) for call in message.tool_calls]
            step_id = recorder.add_agent(
                message=content,
                reasoning=message.reasoning,
                tool_calls=calls or None,
                metrics=_metrics(message),
                model_name=message.model or None,
                at=message.created,
                extra=_cache_extra(message),
            )
            step_of_call.update({call.id: step_id for call in message.tool_calls})
        elif message.tool_call_id in step_of_call:
            call_id = message.tool_call_id
            recorder.add_observation(step_of_call[call_id], call_id, content)
    document: dict[str, Any] = recorder.to_dict()
    if partial is not None:
        document["notes"] = (f"partial: the agent stopped early ({partial}); these are its "
                             "steps until then")  # fmt: skip
        document["extra"] = {**document.get("extra", {}), "partial": True, "ended": partial}
    redacted: dict[str, Any] = redact_value(document)
    return redacted


def write_atif(path: Path, conversation: Sequence[Message], **meta: Any) -> None:
    """Write the conversation's images (`images/` beside `path`, each once), then its
    ATIF document, atomically (keys redacted)."""
    write_images(path.parent, (image for message in conversation for image in message.images))
    document = conversation_to_atif(conversation, **meta)
    write_text_atomic(path, dumps(document, indent=2, ensure_ascii=False) + "\n")


def _content(message: Message, image_paths: ImagePaths) -> Content:
    """The message's text, or (with images) its text and image parts."""
    if not message.images:
        return message.content
    parts = [text_part(message.content)] if message.content else []
    for image in message.images:
        path = image_paths(image)
        if path is None:
            parts.append(text_part(f"[an image of type {image.media_type} was left out]"))
        else:
            parts.append(image_part(path, image.media_type))
    return parts


def _call_record(call: ToolCall) -> ToolCallRecord:
    arguments = call.arguments if call.arguments is not None else {"_raw": call.raw_arguments}
    return ToolCallRecord(tool_call_id=call.id, function_name=call.name, arguments=arguments)


def _cache_extra(message: Message) -> dict[str, Any] | None:
    """The response cache's mark of a step (`--cache`): its key (`helios cache show
    KEY`) and, for a hit, what the call it replays took; this step itself cost nothing."""
    mark = message.cache
    if mark is None:
        return None
    cache: dict[str, Any] = {"key": mark.key, "hit": mark.hit}
    if mark.saved is not None:
        saved = mark.saved
        cache["saved"] = {
            "prompt_tokens": saved.input_tokens + saved.cache_read_tokens
            + saved.cache_write_tokens,
            "completion_tokens": saved.output_tokens,
            "cost_usd": saved.cost_usd,
        }
    return {"response_cache": cache}


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
        cost_unknown_reason=usage.cost_unknown_reason,
    )
