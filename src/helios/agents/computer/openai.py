"""OpenAI's computer tool (Responses API) ↔ `Action`.

The computer-use-preview model takes the `computer_use_preview` tool (the display
size and environment declared, one `action` per call); later models the GA
`computer` tool (a batch of `actions` per call). Both answer in the pixels of the
screenshot sent, which is the desktop's own. The tool has no zoom, bash or done:
zoom and bash are function tools beside it, and the final answer is the text of the
model's last message.

Safety checks: a call may carry `pending_safety_checks` (a page that looks like a
prompt injection, an unexpected domain). Helios runs unattended in a sandbox that
contains what the agent does, so it acknowledges them and goes on: `result` echoes
each check in `acknowledged_safety_checks`, and the check's message is kept in the
tool message's text, so the trajectory shows it.
"""

from __future__ import annotations

import math
from typing import Any

from helios.agents.computer import coordinates, keys
from helios.agents.computer.coordinates import Scale
from helios.agents.computer.provider import BASH_FUNCTION as PLAIN_BASH
from helios.agents.computer.provider import (
    CORNERS,
    ProviderBase,
    bash_action,
    tool_result,
    zoom_function,
)
from helios.environments.desktop.actions import (
    Action,
    ActionResult,
    Button,
    Geometry,
    Modifier,
    Point,
)
from helios.models.base import ImageRef, Message, ToolCall
from helios.models.routing import ModelSpec

PREVIEW_TOOL = "computer_use_preview"
GA_TOOL = "computer"
#: pixels of OpenAI's scroll distances per wheel notch (xdotool scrolls by notches)
PIXELS_PER_NOTCH = 100
#: what OpenAI's `wait` waits (it takes no duration)
WAIT_SECONDS = 2.0
_BUTTONS: dict[str, Button] = {"left": "left", "right": "right", "wheel": "middle"}


def strict_function(function: dict[str, Any]) -> dict[str, Any]:
    """A function as the Responses API declares it, in strict mode (its parameters
    closed to others)."""
    parameters = {**function["parameters"], "additionalProperties": False}
    return {"type": "function", **function, "parameters": parameters, "strict": True}


ZOOM_FUNCTION = strict_function(
    zoom_function("Corners in screenshot pixels, x1 and y1 excluded.", "pixels of the screenshot")
)
BASH_FUNCTION = strict_function(PLAIN_BASH)


def is_preview(model: str) -> bool:
    return model.lower().startswith("computer-use-preview")


class OpenAIProvider(ProviderBase):
    api = "responses"

    def __init__(self, model: str, *, environment: str = "linux") -> None:
        self.model = model
        self.tool = PREVIEW_TOOL if is_preview(model) else GA_TOOL
        self.environment = environment

    def scale(self, geometry: Geometry) -> Scale:
        return coordinates.native(geometry)

    def tools(self, geometry: Geometry, *, bash: bool) -> list[dict[str, Any]]:
        computer: dict[str, Any] = {"type": self.tool}
        if self.tool == PREVIEW_TOOL:
            computer.update(display_width=geometry.width, display_height=geometry.height,
                            environment=self.environment)  # fmt: skip
        return [computer, ZOOM_FUNCTION, *([BASH_FUNCTION] if bash else [])]

    def actions(self, call: ToolCall, geometry: Geometry) -> list[Action]:
        arguments = call.arguments
        if arguments is None:
            raise ValueError("the arguments are not a JSON object")
        scale = self.scale(geometry)
        if call.name == "zoom":
            return [_zoom(arguments, scale)]
        if call.name == "bash":
            return [bash_action(arguments)]
        if call.name != "computer":
            raise ValueError(f"unknown tool {call.name!r}")
        batch = arguments.get("actions")
        if batch is None and isinstance(arguments.get("action"), dict):
            batch = [arguments["action"]]
        if not isinstance(batch, list) or not batch:
            raise ValueError("a computer call needs an action")
        return [_action(item, scale) for item in batch]

    def result(self, call: ToolCall, outcome: ActionResult, screenshot: ImageRef | None) -> Message:
        checks = _checks(call)
        notes = [f"safety check acknowledged: {c.get('message') or c.get('code') or c['id']}"
                 for c in checks]  # fmt: skip
        text = "\n".join([*(t for t in (outcome.error or outcome.output,) if t), *notes])
        state = {"acknowledged_safety_checks": checks} if checks else None
        return tool_result(call, outcome, screenshot, text, state)


def _checks(call: ToolCall) -> list[dict[str, Any]]:
    raw = (call.arguments or {}).get("pending_safety_checks") or []
    checks = [c for c in raw if isinstance(c, dict) and isinstance(c.get("id"), str)]
    return [{k: c[k] for k in ("id", "code", "message") if k in c} for c in checks]


def _number(item: dict[str, Any], key: str) -> float:
    value = item.get(key)
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ValueError(f"`{key}` must be a number")
    return float(value)


def _at(item: dict[str, Any], scale: Scale) -> Point:
    return scale.to_desktop(_number(item, "x"), _number(item, "y"))


def _notches(pixels: float) -> int:
    if not math.isfinite(pixels):
        raise ValueError("a scroll distance must be finite")
    if pixels == 0:
        return 0
    return int(math.copysign(max(1, round(abs(pixels) / PIXELS_PER_NOTCH)), pixels))


def _held(item: dict[str, Any]) -> tuple[Modifier, ...]:
    return keys.modifiers_of(item.get("keys") or [])


def _action(item: Any, scale: Scale) -> Action:
    if not isinstance(item, dict):
        raise ValueError("each action must be an object")
    kind = item.get("type")
    if kind == "click":
        button = _BUTTONS.get(str(item.get("button") or "left"))
        if button is None:
            raise ValueError(f"the {item.get('button')!r} button is not available")
        return Action("click", point=_at(item, scale), button=button, modifiers=_held(item))
    if kind == "double_click":
        return Action("click", point=_at(item, scale), count=2, modifiers=_held(item))
    if kind == "move":
        return Action("move", point=_at(item, scale))
    if kind == "drag":
        path = item.get("path")
        if not isinstance(path, list) or len(path) < 2:
            raise ValueError("a drag needs a path of two points or more")
        points = tuple(_at(p if isinstance(p, dict) else {}, scale) for p in path)
        return Action("drag", path=points, modifiers=_held(item))
    if kind == "scroll":
        return Action("scroll", point=_at(item, scale), dx=_notches(_number(item, "scroll_x")),
                      dy=_notches(_number(item, "scroll_y")), modifiers=_held(item))  # fmt: skip
    if kind == "type":
        text = item.get("text")
        if not isinstance(text, str):
            raise ValueError("type needs `text`")
        return Action("type", text=text)
    if kind == "keypress":
        return Action("key", keys=keys.combination(item.get("keys") or []))
    if kind == "wait":
        return Action("wait", seconds=WAIT_SECONDS)
    if kind == "screenshot":
        return Action("screenshot")
    raise ValueError(f"unknown computer action {kind!r}")


def _zoom(arguments: dict[str, Any], scale: Scale) -> Action:
    corners = [_number(arguments, k) for k in CORNERS]
    return Action("zoom", region=scale.region_to_desktop(*corners))


def provider(spec: ModelSpec) -> OpenAIProvider:
    """The provider for a resolved model (how `choice.load_provider` makes it)."""
    return OpenAIProvider(spec.model)
