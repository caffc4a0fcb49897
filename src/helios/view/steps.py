"""A trial's ATIF trajectory, a page of steps at a time.

The parsed document is kept for the last few trajectories opened (keyed by path,
size and mtime), so paging through a 2,000-step trajectory parses it once. Each step
goes out with its text capped, its images as URLs the viewer serves, and, when its
tool call acts at a point or along a path (a click, a drag), the mark to draw and
the screenshot the action was taken on.
"""

from __future__ import annotations

import base64
import json
import os
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the longest text of one field sent to the page (the raw file has all of it)
MAX_TEXT = 100_000
#: trajectories kept parsed, at most, and their files' bytes in all, at most (a parsed
#: document takes a few times its file's bytes)
CACHED = 4
CACHED_BYTES = 128 * 1024 * 1024
MAX_STEPS_PAGE = 200
#: a trajectory past this is not parsed (a 500 MB one took 3.9 GB and 46 s): the page
#: says so, and the raw file is still there to download
MAX_TRAJECTORY_BYTES = 64 * 1024 * 1024
_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


class NotATIF(ValueError):
    """A trajectory file that cannot be shown as ATIF steps (the reason in the message)."""


@dataclass
class Trajectory:
    document: dict[str, Any]
    steps: list[Any]
    #: per step, the last screenshot before it (a part dict), or None
    screens: list[dict[str, Any] | None]


_cache: OrderedDict[tuple[str, int, int], Trajectory] = OrderedDict()


def load(path: Path) -> Trajectory:
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        raise NotATIF(f"{path.name} is missing: this trial has no trajectory") from None
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    cached = _cache.get(key)
    if cached is not None:
        _cache.move_to_end(key)
        return cached
    if stat.st_size > MAX_TRAJECTORY_BYTES:
        raise NotATIF(f"{path.name} is {stat.st_size / 2**20:,.0f} MB: the viewer shows "
                      f"trajectories up to {MAX_TRAJECTORY_BYTES >> 20} MB (the raw file "
                      "is in the trial's files)")  # fmt: skip
    try:
        document = json.loads(path.read_bytes())
    except (ValueError, RecursionError) as exc:
        raise NotATIF(f"{path.name} is not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise NotATIF(f"{path.name} is not an ATIF trajectory (not a JSON object)")
    version = document.get("schema_version")
    steps = document.get("steps")
    if not isinstance(version, str) or not version.startswith("ATIF"):
        raise NotATIF(f"{path.name} is not an ATIF trajectory (schema_version {version!r:.60})")
    if not isinstance(steps, list):
        raise NotATIF(f"{path.name}: 'steps' is not a list")
    trajectory = Trajectory(document, steps, _screens_before(steps))
    _cache[key] = trajectory
    while len(_cache) > CACHED or (
        len(_cache) > 1 and sum(size for _, size, _ in _cache) > CACHED_BYTES
    ):
        _cache.popitem(last=False)
    return trajectory


def _images(value: Any) -> list[dict[str, Any]]:
    """The image parts in a message or observation content."""
    if isinstance(value, list):
        return [p for p in value if isinstance(p, dict) and p.get("type") == "image"]
    return []


def _step_images(step: Any) -> list[dict[str, Any]]:
    if not isinstance(step, dict):
        return []
    found = _images(step.get("message"))
    observation = step.get("observation")
    if isinstance(observation, dict) and isinstance(observation.get("results"), list):
        for result in observation["results"]:
            if isinstance(result, dict):
                found += _images(result.get("content"))
    return found


def _screens_before(steps: list[Any]) -> list[dict[str, Any] | None]:
    screens: list[dict[str, Any] | None] = []
    last: dict[str, Any] | None = None
    for step in steps:
        screens.append(last)
        images = _step_images(step)
        if images:
            last = images[-1]
    return screens


def cut(text: str) -> str:
    if len(text) > MAX_TEXT:
        return text[:MAX_TEXT] + f"\n… ({len(text) - MAX_TEXT:,} more characters in the raw file)"
    return text


def _text(value: Any) -> Any:
    return cut(value) if isinstance(value, str) else value


def _point(value: Any) -> list[float] | None:
    if isinstance(value, list | tuple) and len(value) == 2:
        x, y = value
    elif isinstance(value, dict) and "x" in value and "y" in value:
        x, y = value["x"], value["y"]
    else:
        return None
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in (x, y)):
        return [float(x), float(y)]
    return None


#: Gemini's computer-use functions: points on a 0-999 grid over the screen
GEMINI_GRID = 1000
GEMINI_FUNCTIONS = ("click_at", "hover_at", "type_text_at", "scroll_at", "drag_and_drop")


def action_mark(arguments: Any, function: str = "") -> dict[str, Any] | None:
    """The point or path a computer action's arguments act at, as the model gave
    them: {"kind": "click", "points": [[x, y]]} or {"kind": "drag", "points": [[x, y],
    ...]}, in the screenshot's pixels (OpenAI, Anthropic and generic models answer in
    the pixels of the screenshot they saw), or with "grid": 1000 for Gemini's 0-999
    grid; None for an action without one."""
    if not isinstance(arguments, dict):
        return None
    if function in GEMINI_FUNCTIONS:
        start = _point(arguments)
        if start is None:
            return None
        end = _point({"x": arguments.get("destination_x"), "y": arguments.get("destination_y")})
        if function == "drag_and_drop" and end is not None:
            return {"kind": "drag", "action": function, "points": [start, end],
                    "grid": GEMINI_GRID}  # fmt: skip
        return {"kind": "click", "action": function, "points": [start], "grid": GEMINI_GRID}
    nested = arguments.get("action")
    if isinstance(nested, dict):  # OpenAI's computer_call: {"action": {"type": ..}}
        return action_mark({**nested, "action": nested.get("type")})
    name = str(arguments.get("action") or "")
    path = arguments.get("path")
    if isinstance(path, list) and len(path) >= 2:
        points = [p for p in map(_point, path) if p is not None]
        if len(points) >= 2:
            return {"kind": "drag", "action": name, "points": points[:1000]}
    start = _point(arguments.get("start_coordinate"))
    end = _point(arguments.get("coordinate"))
    if start is not None and end is not None:
        return {"kind": "drag", "action": name, "points": [start, end]}
    point = end or _point(arguments)
    if point is not None:
        return {"kind": "click", "action": name, "points": [point]}
    return None


def image_source(part: dict[str, Any], url_of: Callable[[str], str | None]) -> str | None:
    """The URL an image part is shown from: its file (through `url_of`, which refuses
    paths outside the run) or its inline base64 data as a data: URL."""
    source = part.get("source")
    if not isinstance(source, dict):
        return None
    media = source.get("media_type")
    if isinstance(source.get("path"), str):
        return url_of(source["path"])
    data = source.get("data")
    if isinstance(data, str) and media in _IMAGE_TYPES:
        try:
            base64.b64decode(data[:64] + "=" * (-len(data[:64]) % 4), validate=True)
        except ValueError:
            return None
        return f"data:{media};base64,{data}"
    return None


def _content(value: Any, url_of: Callable[[str], str | None]) -> Any:
    """A message or observation content: text, or a list of text and image parts."""
    if isinstance(value, list):
        parts: list[dict[str, Any]] = []
        for part in value:
            if not isinstance(part, dict):
                parts.append({"type": "text", "text": _text(json.dumps(part))})
            elif part.get("type") == "image":
                parts.append({"type": "image", "src": image_source(part, url_of)})
            else:
                text = part.get("text")
                parts.append({"type": "text", "text": _text(text if isinstance(text, str)
                                                            else json.dumps(part))})  # fmt: skip
        return parts
    if value is None or isinstance(value, str):
        return _text(value)
    return _text(json.dumps(value))


def page(trajectory: Trajectory, offset: int, limit: int,
         url_of: Callable[[str], str | None]) -> list[dict[str, Any]]:  # fmt: skip
    """Steps [offset, offset + limit) as the page shows them."""
    shown: list[dict[str, Any]] = []
    limit = max(1, min(limit, MAX_STEPS_PAGE))
    for number in range(offset, min(offset + limit, len(trajectory.steps))):
        step = trajectory.steps[number]
        if not isinstance(step, dict):
            shown.append({"index": number, "error": f"step {number + 1} is not a JSON object"})
            continue
        calls = []
        for call in step.get("tool_calls") or []:
            if not isinstance(call, dict):
                continue
            mark = action_mark(call.get("arguments"), str(call.get("function_name", "")))
            calls.append({
                "id": str(call.get("tool_call_id", "")),
                "name": str(call.get("function_name", "")),
                "arguments": _text(json.dumps(call.get("arguments"), indent=1)),
                "mark": mark,
            })  # fmt: skip
        screen = trajectory.screens[number]
        acted_on = None
        if screen is not None and any(call["mark"] for call in calls):
            acted_on = image_source(screen, url_of)
        observations = []
        observation = step.get("observation")
        if isinstance(observation, dict) and isinstance(observation.get("results"), list):
            for result in observation["results"]:
                if isinstance(result, dict):
                    observations.append({
                        "call_id": str(result.get("source_call_id") or ""),
                        "content": _content(result.get("content"), url_of),
                    })  # fmt: skip
        metrics = step.get("metrics")
        shown.append({
            "index": number,
            "step_id": step.get("step_id"),
            "source": str(step.get("source", "")),
            "timestamp": step.get("timestamp") if isinstance(step.get("timestamp"), str) else None,
            "model_name": step.get("model_name") if isinstance(step.get("model_name"), str)
            else None,
            "message": _content(step.get("message"), url_of),
            "reasoning": _text(step.get("reasoning_content"))
            if isinstance(step.get("reasoning_content"), str) else None,
            "tool_calls": calls,
            "acted_on": acted_on,
            "observations": observations,
            "metrics": metrics if isinstance(metrics, dict) else None,
        })  # fmt: skip
    return shown
