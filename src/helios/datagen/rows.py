"""One prompt's conversation → Hermes's row, tool statistics and reasoning coverage.

Tool success follows Hermes's rules, read from the tool result alone: a JSON
object with a non-null `error` (also inside `content`) or `"success": false` is a
failure; so is an empty text or one starting with "error:". A non-zero exit code
is not a failure: the model can correct itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from helios.models.base import Message
from helios.safe_json import JsonValueError, parse_json
from helios.trajectories.sharegpt import has_reasoning

ToolStats = dict[str, dict[str, int]]


def tool_failed(content: str) -> bool:
    text = content.strip()
    if not text:
        return True
    try:  # what a tool printed: hostile text (deep nesting, huge numbers)
        data = parse_json(text, allow_nan=True) if text[0] in "{[" else None
    except JsonValueError:
        data = None
    if isinstance(data, dict):
        inner = data.get("content")
        return (
            data.get("error") is not None
            or data.get("success") is False
            or (isinstance(inner, dict) and inner.get("error") is not None)
        )
    if data is not None:
        return False
    return text.lower().startswith("error:")


def tool_stats(conversation: Sequence[Message]) -> ToolStats:
    """{tool: {count, success, failure}} for the tools the model called (any name)."""
    stats: ToolStats = {}
    names: dict[str, str] = {}
    for message in conversation:
        if message.role == "assistant":
            for call in message.tool_calls:
                entry = stats.setdefault(call.name, {"count": 0, "success": 0, "failure": 0})
                entry["count"] += 1
                names[call.id] = call.name
        elif message.role == "tool" and message.tool_call_id in names:
            entry = stats[names[message.tool_call_id]]
            entry["failure" if tool_failed(message.content) else "success"] += 1
    return stats


@dataclass(frozen=True, slots=True)
class Coverage:
    turns: int
    with_reasoning: int


def reasoning_coverage(conversation: Sequence[Message]) -> Coverage:
    turns = [m for m in conversation if m.role == "assistant"]
    return Coverage(len(turns), sum(1 for m in turns if has_reasoning(m)))


def normalized(stats: ToolStats, all_tools: Sequence[str]) -> ToolStats:
    """Every tool Helios offers, zero-filled, then any other name the model used."""
    full = {name: dict(stats.get(name, {"count": 0, "success": 0, "failure": 0}))
            for name in all_tools}  # fmt: skip
    full.update({name: dict(entry) for name, entry in stats.items() if name not in full})
    return full


def hermes_row(
    *,
    prompt_index: int,
    conversations: list[dict[str, str]],
    batch_num: int,
    model: str,
    completed: bool,
    partial: bool,
    api_calls: int,
    toolsets: list[str],
    stats: ToolStats,
    all_tools: Sequence[str],
) -> dict[str, Any]:
    """The row, key for key and in Hermes's order."""
    full = normalized(stats, all_tools)
    return {
        "prompt_index": prompt_index,
        "conversations": conversations,
        "metadata": {
            "batch_num": batch_num,
            "timestamp": datetime.now().isoformat(),
            "model": model,
        },
        "completed": completed,
        "partial": partial,
        "api_calls": api_calls,
        "toolsets_used": list(toolsets),
        "tool_stats": full,
        "tool_error_counts": {name: entry["failure"] for name, entry in full.items()},
    }
