"""Any OpenAI-compatible vision model (vLLM, SGLang, OpenRouter): one JSON-action
function tool, `computer`, over Chat Completions ↔ `Action`.

The tool's arguments are the canonical action itself ({"action": "click", "x": …,
"y": …}), in the desktop's pixels; the screenshots go as image parts (the Chat
Completions client sends a tool result's screenshot in a user message after it).
`done` ends the task with its answer.
"""

from __future__ import annotations

from typing import Any

from helios.agents.computer import coordinates, keys
from helios.agents.computer.coordinates import Scale
from helios.agents.computer.provider import ProviderBase, bash_action, tool_result
from helios.environments.desktop.actions import Action, ActionResult, Button, Geometry, Point
from helios.models.base import ImageRef, Message, ToolCall
from helios.models.routing import ModelSpec

KINDS = ("click", "move", "drag", "scroll", "type", "key", "hold_key", "wait", "screenshot",
         "zoom", "navigate", "done")  # fmt: skip
#: a wait or key hold longer than this is cut short (the turn must end)
MAX_SECONDS = 30.0
_INT = {"type": "integer"}
_POINT = {"type": "array", "items": _INT, "minItems": 2, "maxItems": 2}


def tool(geometry: Geometry, *, bash: bool) -> dict[str, Any]:
    """The `computer` function tool, in Chat Completions' form."""
    kinds = [*KINDS, *(["bash"] if bash else [])]
    description = (
        f"Act on the desktop ({geometry.width}x{geometry.height} pixels; x from the left, "
        "y from the top, in the screenshot's pixels). After each call you get a new "
        "screenshot. click: x, y, button (left|right|middle), count (1-3), modifiers "
        "(shift|ctrl|alt|super); move: x, y; drag: path [[x, y], ...]; scroll: x, y, dx, dy "
        "(wheel notches, positive right/down); type: text; key: keys pressed together "
        '(xdotool names, e.g. ["ctrl", "l"], ["Return"]); hold_key: keys, seconds; wait: '
        "seconds; screenshot; zoom: region [x0, y0, x1, y1] (the next screenshot is that "
        "region at full resolution); navigate: url; done: answer (the task is finished)"
        + ("; bash: command (a shell command, its output comes back)" if bash else "")
        + "."
    )
    properties: dict[str, Any] = {
        "action": {"type": "string", "enum": kinds},
        "x": _INT, "y": _INT,
        "button": {"type": "string", "enum": ["left", "right", "middle"]},
        "count": {"type": "integer", "minimum": 1, "maximum": 3},
        "modifiers": {"type": "array", "items": {"type": "string"}},
        "path": {"type": "array", "items": _POINT, "minItems": 2},
        "dx": _INT, "dy": _INT,
        "text": {"type": "string"},
        "keys": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "seconds": {"type": "number", "minimum": 0},
        "region": {"type": "array", "items": _INT, "minItems": 4, "maxItems": 4},
        "url": {"type": "string"},
        "answer": {"type": "string"},
    }  # fmt: skip
    if bash:
        properties["command"] = {"type": "string"}
    parameters = {"type": "object", "properties": properties, "required": ["action"]}
    function = {"name": "computer", "description": description, "parameters": parameters}
    return {"type": "function", "function": function}


class GenericProvider(ProviderBase):
    api = "openai"

    def __init__(self, model: str = "") -> None:
        self.model = model

    def scale(self, geometry: Geometry) -> Scale:
        return coordinates.native(geometry)

    def tools(self, geometry: Geometry, *, bash: bool) -> list[dict[str, Any]]:
        return [tool(geometry, bash=bash)]

    def actions(self, call: ToolCall, geometry: Geometry) -> list[Action]:
        if call.name != "computer":
            raise ValueError(f"unknown tool {call.name!r}: use the computer tool")
        if call.arguments is None:
            raise ValueError("the arguments are not a JSON object")
        return [parse(call.arguments, self.scale(geometry))]

    def result(self, call: ToolCall, outcome: ActionResult, screenshot: ImageRef | None) -> Message:
        text = outcome.error or outcome.output or ("error" if outcome.error else "done")
        return tool_result(call, outcome, screenshot, text)


def parse(data: dict[str, Any], scale: Scale) -> Action:
    """One JSON action as an `Action`; ValueError with a message for the model."""
    kind = data.get("action")
    if kind == "bash":
        return bash_action(data)
    if kind not in KINDS:
        raise ValueError(f"unknown action {kind!r}; one of: {', '.join(KINDS)}")
    action: Action = _BUILDERS[str(kind)](data, scale)
    return action


def _number(data: dict[str, Any], key: str, default: float | None = None) -> float:
    value = data.get(key, default)
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ValueError(f"`{key}` must be a number")
    return float(value)


def _whole(data: dict[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = data.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"`{key}` must be a whole number from {low} to {high}")
    return value


def _at(data: dict[str, Any], scale: Scale) -> Point:
    return scale.to_desktop(_number(data, "x"), _number(data, "y"))


def _text(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise ValueError(f"`{key}` must be a string")
    return value


def _click(data: dict[str, Any], scale: Scale) -> Action:
    button = data.get("button", "left")
    if button not in ("left", "right", "middle"):
        raise ValueError("`button` must be left, right or middle")
    chosen: Button = button
    return Action("click", point=_at(data, scale), button=chosen,
                  count=_whole(data, "count", 1, 1, 3),
                  modifiers=keys.modifiers_of(data.get("modifiers") or []))  # fmt: skip


def _drag(data: dict[str, Any], scale: Scale) -> Action:
    path = data.get("path")
    if not isinstance(path, list) or len(path) < 2:
        raise ValueError("`path` must be two points [x, y] or more")
    points = []
    for point in path:
        if not isinstance(point, list) or len(point) != 2:
            raise ValueError("each point of `path` must be [x, y]")
        points.append(scale.to_desktop(*_pair(point)))
    return Action("drag", path=tuple(points))


def _pair(point: list[Any]) -> tuple[float, float]:
    x, y = point
    return _number({"x": x}, "x"), _number({"y": y}, "y")


def _scroll(data: dict[str, Any], scale: Scale) -> Action:
    dx = _whole(data, "dx", 0, -100, 100)
    dy = _whole(data, "dy", 0, -100, 100)
    if dx == 0 and dy == 0:
        raise ValueError("a scroll needs `dx` or `dy`")
    return Action("scroll", point=_at(data, scale), dx=dx, dy=dy,
                  modifiers=keys.modifiers_of(data.get("modifiers") or []))  # fmt: skip


def _seconds(data: dict[str, Any], default: float) -> float:
    value = _number(data, "seconds", default)
    if value < 0:
        raise ValueError("`seconds` must not be negative")
    return min(value, MAX_SECONDS)


def _zoom(data: dict[str, Any], scale: Scale) -> Action:
    region = data.get("region")
    if not isinstance(region, list) or len(region) != 4:
        raise ValueError("`region` must be [x0, y0, x1, y1]")
    corners = [_number({"v": v}, "v") for v in region]
    return Action("zoom", region=scale.region_to_desktop(*corners))


_BUILDERS: dict[str, Any] = {
    "click": _click,
    "move": lambda d, s: Action("move", point=_at(d, s)),
    "drag": _drag,
    "scroll": _scroll,
    "type": lambda d, s: Action("type", text=_text(d, "text")),
    "key": lambda d, s: Action("key", keys=keys.combination(d.get("keys") or [])),
    "hold_key": lambda d, s: Action("hold_key", keys=keys.combination(d.get("keys") or []),
                                    seconds=_seconds(d, 1.0)),
    "wait": lambda d, s: Action("wait", seconds=_seconds(d, 1.0)),
    "screenshot": lambda d, s: Action("screenshot"),
    "zoom": _zoom,
    "navigate": lambda d, s: Action("navigate", url=_text(d, "url")),
    "done": lambda d, s: Action("done", text=str(d.get("answer") or "")),
}  # fmt: skip


def provider(spec: ModelSpec) -> GenericProvider:
    """The provider for a resolved model (how `choice.load_provider` makes it)."""
    return GenericProvider(spec.model)
