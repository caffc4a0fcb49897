"""Gemini's computer use (generateContent's `computer_use` tool) ↔ `Action`.

The model calls predefined browser functions on a 0–999 grid (`coordinates.gemini`):
click_at, hover_at, type_text_at, scroll_document, scroll_at, key_combination,
drag_and_drop, navigate, search, go_back, go_forward, wait_5_seconds,
open_web_browser. Zoom and bash are function declarations beside the tool. There is
no "done": the final answer is the text of the model's last message.

Safety: a call may carry `safety_decision` {"decision": "require_confirmation",
"explanation": …}. Helios runs unattended in a sandbox that contains what the agent
does, so it confirms on the user's behalf: the action runs, the function response
carries `safety_acknowledgement: "true"` (the API refuses the next turn without it),
and the explanation stays in the tool message's text, so the trajectory shows it.
Any other decision that is not "allowed" (a block) is refused: the action does not
run and the model is told why.
"""

from __future__ import annotations

from typing import Any

from helios.agents.computer import coordinates, keys
from helios.agents.computer.coordinates import Scale
from helios.agents.computer.provider import (
    BASH_FUNCTION,
    CORNERS,
    ProviderBase,
    bash_action,
    tool_result,
    zoom_function,
)
from helios.environments.desktop.actions import Action, ActionResult, Geometry, Point
from helios.models.base import ImageRef, Message, ToolCall
from helios.models.routing import ModelSpec

ENVIRONMENT = "ENVIRONMENT_BROWSER"
#: the scroll_document distance, in wheel notches
DOCUMENT_NOTCHES = 5
#: pixels per wheel notch, to turn scroll_at's magnitude into notches
PIXELS_PER_NOTCH = 100
#: scroll_at's magnitude when the model gives none (grid units, as Google's agent)
DEFAULT_MAGNITUDE = 800
SEARCH_URL = "https://www.google.com/"
_DIRECTIONS = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}
ZOOM_DECLARATION = zoom_function("Corners on the 0-999 grid.", "0-999 grid over the screen")
BASH_DECLARATION = BASH_FUNCTION


class GeminiProvider(ProviderBase):
    api = "gemini"

    def __init__(self, model: str) -> None:
        self.model = model

    def scale(self, geometry: Geometry) -> Scale:
        return coordinates.gemini(geometry)

    def tools(self, geometry: Geometry, *, bash: bool) -> list[dict[str, Any]]:
        declarations = [ZOOM_DECLARATION, *([BASH_DECLARATION] if bash else [])]
        return [{"computerUse": {"environment": ENVIRONMENT}},
                {"functionDeclarations": declarations}]  # fmt: skip

    def actions(self, call: ToolCall, geometry: Geometry) -> list[Action]:
        args = call.arguments
        if args is None:
            raise ValueError("the arguments are not a JSON object")
        decision = _decision(args)
        if decision not in (None, "allowed", "require_confirmation"):
            raise ValueError(f"the action was not run: the safety system's decision was "
                             f"{decision!r}")  # fmt: skip
        scale = self.scale(geometry)
        handler = _HANDLERS.get(call.name)
        if handler is None:
            raise ValueError(f"unknown function {call.name!r}")
        actions: list[Action] = handler(args, scale)
        return actions

    def result(self, call: ToolCall, outcome: ActionResult, screenshot: ImageRef | None) -> Message:
        response: dict[str, Any] = {"url": outcome.meta.get("url", "")}
        text = outcome.error or outcome.output
        if _decision(call.arguments or {}) == "require_confirmation":
            response["safety_acknowledgement"] = "true"
            explanation = str((call.arguments or {})["safety_decision"].get("explanation") or "")
            text = "\n".join(t for t in (text, f"safety confirmation given: {explanation}") if t)
        return tool_result(call, outcome, screenshot, text, {"response": response})


def _decision(args: dict[str, Any]) -> str | None:
    safety = args.get("safety_decision")
    if safety is None:
        return None
    if not isinstance(safety, dict):
        return "unreadable"
    return str(safety.get("decision") or "unreadable")


def _number(args: dict[str, Any], key: str) -> float:
    value = args.get(key)
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ValueError(f"`{key}` must be a number on the 0-999 grid")
    return float(value)


def _at(args: dict[str, Any], scale: Scale, x: str = "x", y: str = "y") -> Point:
    return scale.to_desktop(_number(args, x), _number(args, y))


def _direction(args: dict[str, Any]) -> tuple[int, int]:
    direction = args.get("direction")
    if direction not in _DIRECTIONS:
        raise ValueError("`direction` must be up, down, left or right")
    return _DIRECTIONS[direction]


def _flag(args: dict[str, Any], key: str, default: bool) -> bool:
    value = args.get(key, default)
    if not isinstance(value, bool):
        raise ValueError(f"`{key}` must be true or false")
    return value


def _type_text_at(args: dict[str, Any], scale: Scale) -> list[Action]:
    text = args.get("text")
    if not isinstance(text, str):
        raise ValueError("type_text_at needs `text`")
    steps = [Action("click", point=_at(args, scale))]
    if _flag(args, "clear_before_typing", True):
        steps += [Action("key", keys=("ctrl", "a")), Action("key", keys=("BackSpace",))]
    steps.append(Action("type", text=text))
    if _flag(args, "press_enter", True):
        steps.append(Action("key", keys=("Return",)))
    return steps


def _scroll_at(args: dict[str, Any], scale: Scale) -> list[Action]:
    dx, dy = _direction(args)
    magnitude = args.get("magnitude", DEFAULT_MAGNITUDE)
    if not isinstance(magnitude, int | float) or isinstance(magnitude, bool):
        raise ValueError("`magnitude` must be a number on the 0-999 grid")
    pixels = scale.length_to_desktop(magnitude, vertical=dy != 0)
    notches = max(1, round(pixels / PIXELS_PER_NOTCH))
    return [Action("scroll", point=_at(args, scale), dx=dx * notches, dy=dy * notches)]


def _scroll_document(args: dict[str, Any], scale: Scale) -> list[Action]:
    dx, dy = _direction(args)
    geometry = scale.geometry
    centre = (geometry.width // 2, geometry.height // 2)
    return [Action("scroll", point=centre, dx=dx * DOCUMENT_NOTCHES, dy=dy * DOCUMENT_NOTCHES)]


def _navigate(args: dict[str, Any], scale: Scale) -> list[Action]:
    url = args.get("url")
    if not isinstance(url, str) or not url.strip():
        raise ValueError("navigate needs a `url`")
    return [Action("navigate", url=url.strip())]


def _zoom(args: dict[str, Any], scale: Scale) -> list[Action]:
    corners = [_number(args, k) for k in CORNERS]
    return [Action("zoom", region=scale.region_to_desktop(*corners))]


def _bash(args: dict[str, Any], scale: Scale) -> list[Action]:
    return [bash_action(args)]


def _key_combination(args: dict[str, Any], scale: Scale) -> list[Action]:
    return [Action("key", keys=keys.split(args.get("keys", "")))]


_HANDLERS: dict[str, Any] = {
    "open_web_browser": lambda a, s: [Action("screenshot")],  # the browser is open already
    "click_at": lambda a, s: [Action("click", point=_at(a, s))],
    "hover_at": lambda a, s: [Action("move", point=_at(a, s))],
    "type_text_at": _type_text_at,
    "scroll_document": _scroll_document,
    "scroll_at": _scroll_at,
    "wait_5_seconds": lambda a, s: [Action("wait", seconds=5.0)],
    "go_back": lambda a, s: [Action("key", keys=("alt", "Left"))],
    "go_forward": lambda a, s: [Action("key", keys=("alt", "Right"))],
    "search": lambda a, s: [Action("navigate", url=SEARCH_URL)],
    "navigate": _navigate,
    "key_combination": _key_combination,
    "drag_and_drop": lambda a, s: [
        Action("drag", path=(_at(a, s), _at(a, s, "destination_x", "destination_y")))
    ],
    "zoom": _zoom,
    "bash": _bash,
}


def provider(spec: ModelSpec) -> GeminiProvider:
    """The provider for a resolved model (how `choice.load_provider` makes it)."""
    return GeminiProvider(spec.model)
