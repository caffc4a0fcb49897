"""Claude's computer tool (`computer_20250124`, `computer_20251124` with zoom) ↔ `Action`.

The tool version follows the model, as Anthropic's docs list them: the 2025-11-24
tool (with `enable_zoom`) for Claude Opus 4.5 and later models, the 2025-01-24 tool
for Claude Sonnet 4.5, Haiku 4.5, Opus 4.1, Sonnet 4 and Opus 4. The Messages client
adds the beta header that the declared tool needs (`models/anthropic_messages.py`).

Claude answers in the pixels of the screenshot it saw; for a desktop over Anthropic's
image limits that screenshot is sent downscaled (`screenshot_size`), and its points
are mapped back in `coordinates.anthropic`. Bash, when the task allows it, is
Anthropic's own `bash_20250124` tool. The tool has no "done": the final answer is
the text of the model's last message.
"""

from __future__ import annotations

import math
import re
from typing import Any

from helios.agents.computer import coordinates, keys
from helios.agents.computer.coordinates import Scale
from helios.agents.computer.provider import ProviderBase, bash_action, tool_result
from helios.environments.desktop.actions import Action, ActionResult, Button, Geometry, Point
from helios.models.base import ImageRef, Message, ToolCall
from helios.models.routing import ModelSpec

NEW_TOOL = "computer_20251124"
LEGACY_TOOL = "computer_20250124"
BASH_TOOL = "bash_20250124"
#: models that know only the 2025-01-24 tool; every other (newer) model gets the new one
_LEGACY = re.compile(
    r"claude-(sonnet-4-5|haiku-4-5|opus-4-1|3-7-sonnet|sonnet-4(-\d{8})?$|opus-4(-\d{8})?$)"
)
_CLICKS: dict[str, tuple[Button, int]] = {
    "left_click": ("left", 1), "right_click": ("right", 1), "middle_click": ("middle", 1),
    "double_click": ("left", 2), "triple_click": ("left", 3),
}  # fmt: skip
_SCROLL = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}
_REFUSED = {
    "cursor_position": "cursor_position is not available here; take a screenshot instead",
    "left_mouse_down": "left_mouse_down is not available here; use left_click_drag",
    "left_mouse_up": "left_mouse_up is not available here; use left_click_drag",
}
#: a wait or key hold longer than this is cut short (the turn must end)
MAX_SECONDS = 30.0


def tool_version(model: str) -> str:
    return LEGACY_TOOL if _LEGACY.search(model.lower()) else NEW_TOOL


class AnthropicProvider(ProviderBase):
    api = "anthropic"

    def __init__(self, model: str, *, zoom: bool = True) -> None:
        self.model = model
        self.tool = tool_version(model)
        #: the zoom action exists only in the new tool
        self.zoom = zoom and self.tool == NEW_TOOL

    def scale(self, geometry: Geometry) -> Scale:
        return coordinates.anthropic(geometry)

    def tools(self, geometry: Geometry, *, bash: bool) -> list[dict[str, Any]]:
        width, height = self.screenshot_size(geometry)
        computer: dict[str, Any] = {
            "type": self.tool,
            "name": "computer",
            "display_width_px": width,
            "display_height_px": height,
            "display_number": 1,
        }
        if self.zoom:
            computer["enable_zoom"] = True
        return [computer, {"type": BASH_TOOL, "name": "bash"}] if bash else [computer]

    def actions(self, call: ToolCall, geometry: Geometry) -> list[Action]:
        arguments = call.arguments
        if arguments is None:
            raise ValueError("the tool input is not a JSON object")
        if call.name == "bash":
            return [_bash(arguments)]
        if call.name != "computer":
            raise ValueError(f"unknown tool {call.name!r}: use the computer tool")
        return self._computer(arguments, self.scale(geometry))

    def _computer(self, data: dict[str, Any], scale: Scale) -> list[Action]:
        action = data.get("action")
        if not isinstance(action, str):
            raise ValueError("the computer tool needs an `action`")
        if action in _REFUSED:
            raise ValueError(_REFUSED[action])
        if action in _CLICKS:
            button, count = _CLICKS[action]
            return [Action("click", point=_point(data, scale, required=False), button=button,
                           count=count, modifiers=keys.modifiers_of(data.get("text")))]  # fmt: skip
        simple = {
            "screenshot": lambda: Action("screenshot"),
            "mouse_move": lambda: Action("move", point=_point(data, scale)),
            "type": lambda: Action("type", text=_text(data)),
            "wait": lambda: Action("wait", seconds=_seconds(data, default=1.0)),
            "hold_key": lambda: Action("hold_key", keys=keys.split(_text(data)),
                                       seconds=_seconds(data, default=1.0)),
            "left_click_drag": lambda: _drag(data, scale),
            "scroll": lambda: _scroll(data, scale),
        }  # fmt: skip
        if action in simple:
            return [simple[action]()]
        if action == "key":
            return _key(data)
        if action == "zoom" and self.zoom:
            return [_zoom(data, scale)]
        raise ValueError(f"unknown computer action {action!r}")

    def result(self, call: ToolCall, outcome: ActionResult, screenshot: ImageRef | None) -> Message:
        return tool_result(call, outcome, screenshot, outcome.error or outcome.output)


def _pair(value: Any, name: str) -> tuple[float, float]:
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise ValueError(f"`{name}` must be [x, y]")
    x, y = value
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (x, y)):
        raise ValueError(f"`{name}` must be two numbers")
    return float(x), float(y)


def _point(data: dict[str, Any], scale: Scale, *, required: bool = True,
           name: str = "coordinate") -> Point | None:  # fmt: skip
    value = data.get(name)
    if value is None:
        if required:
            raise ValueError(f"this action needs `{name}`")
        return None  # where the pointer is
    return scale.to_desktop(*_pair(value, name))


def _text(data: dict[str, Any]) -> str:
    text = data.get("text")
    if not isinstance(text, str):
        raise ValueError("this action needs `text` (a string)")
    return text


def _seconds(data: dict[str, Any], *, default: float) -> float:
    value = data.get("duration", default)
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or value < 0:
        raise ValueError("`duration` must be a number of seconds")
    return min(float(value), MAX_SECONDS)


def _key(data: dict[str, Any]) -> list[Action]:
    combination = keys.split(_text(data))
    repeat = data.get("repeat", 1)
    if not isinstance(repeat, int) or isinstance(repeat, bool) or not 1 <= repeat <= 100:
        raise ValueError("`repeat` must be a whole number from 1 to 100")
    return [Action("key", keys=combination) for _ in range(repeat)]


def _drag(data: dict[str, Any], scale: Scale) -> Action:
    start = _point(data, scale, name="start_coordinate")
    end = _point(data, scale)
    assert start is not None and end is not None
    return Action("drag", path=(start, end), modifiers=keys.modifiers_of(data.get("text")))


def _scroll(data: dict[str, Any], scale: Scale) -> Action:
    direction = data.get("scroll_direction")
    if direction not in _SCROLL:
        raise ValueError("`scroll_direction` must be up, down, left or right")
    amount = data.get("scroll_amount", 3)
    if not isinstance(amount, int) or isinstance(amount, bool) or not 0 <= amount <= 100:
        raise ValueError("`scroll_amount` must be a whole number from 0 to 100")
    dx, dy = _SCROLL[direction]
    return Action("scroll", point=_point(data, scale, required=False), dx=dx * amount,
                  dy=dy * amount, modifiers=keys.modifiers_of(data.get("text")))  # fmt: skip


def _zoom(data: dict[str, Any], scale: Scale) -> Action:
    region = data.get("region")
    if not isinstance(region, list) or len(region) != 4:
        raise ValueError("`region` must be [x0, y0, x1, y1]")
    x0, y0 = _pair(region[:2], "region")
    x1, y1 = _pair(region[2:], "region")
    return Action("zoom", region=scale.region_to_desktop(x0, y0, x1, y1))


def _bash(data: dict[str, Any]) -> Action:
    if data.get("restart"):
        raise ValueError("restarting the shell is not available; run the next command")
    return bash_action(data)


def provider(spec: ModelSpec) -> AnthropicProvider:
    """The provider for a resolved model (how `choice.load_provider` makes it)."""
    return AnthropicProvider(spec.model)
