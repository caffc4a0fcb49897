"""Gemini's computer use on the mock model server (generateContent's `computer_use` tool).

The tool's declaration is checked (`computerUse` with its environment; function
declarations named). GUI steps are played as the predefined functions (click_at,
type_text_at, scroll_at, …) on the 0–999 grid, placed from the last full screenshot;
zoom and bash as calls of the declared functions of those names; done as text; a step's
`safety` as a require_confirmation safety decision.
"""

from __future__ import annotations

from typing import Any

from helios.agents.computer import coordinates
from helios.agents.computer import keys as key_names
from helios.environments.desktop.actions import Geometry
from helios.testing.mock_gui import Placed, fill_answer, place_all, screen_of, unavailable
from helios.testing.mock_script import Conversation, InvalidRequest, Turn

_ENVIRONMENTS = frozenset({"ENVIRONMENT_BROWSER"})


def get_field(data: Any, camel: str) -> Any:
    """A field by its camelCase name, or its snake_case one (as Google's parser reads)."""
    if camel in data:
        return data[camel]
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)
    return data.get(snake)


def check_tools(tools: object) -> dict[str, Any]:
    context: dict[str, Any] = {"computer_use": False, "functions": set()}
    if tools is None:
        return context
    if not isinstance(tools, list):
        raise InvalidRequest("Invalid value at 'tools': expected a list")
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise InvalidRequest(f"Invalid value at 'tools[{i}]'")
        computer = get_field(tool, "computerUse")
        if computer is not None:
            if not isinstance(computer, dict) or computer.get("environment") not in _ENVIRONMENTS:
                raise InvalidRequest(f"Invalid value at 'tools[{i}].computer_use.environment'")
            context["computer_use"] = True
        for j, declaration in enumerate(get_field(tool, "functionDeclarations") or []):
            name = declaration.get("name") if isinstance(declaration, dict) else None
            if not isinstance(name, str) or not name:
                raise InvalidRequest(f"* GenerateContentRequest.tools[{i}].function_declarations"
                                     f"[{j}].name: Name cannot be empty.")  # fmt: skip
            context["functions"].add(name)
    return context


def _grid(placed: Placed, point: tuple[int, int] | None = None) -> dict[str, int]:
    scale = coordinates.gemini(Geometry(*placed.screen_size))
    x, y = scale.to_model(point or placed.point or placed.centre)
    return {"x": x, "y": y}


def _grid_edges(placed: Placed) -> dict[str, int]:
    assert placed.region is not None
    width, height = placed.screen_size
    x0, y0, x1, y1 = placed.region
    edge = coordinates.GEMINI_GRID

    def low(v: int, size: int) -> int:
        return min(max(v * edge // size, 0), edge - 1)

    def high(v: int, size: int) -> int:
        return min(max(-(-v * edge // size), 0), edge - 1)

    return {"x0": low(x0, width), "y0": low(y0, height), "x1": high(x1, width),
            "y1": high(y1, height)}  # fmt: skip


def _scrolls(placed: Placed) -> list[tuple[str, dict[str, Any]]]:
    step = placed.step
    moves = [("down" if step.dy > 0 else "up", abs(step.dy), True)] if step.dy else []
    moves += [("right" if step.dx > 0 else "left", abs(step.dx), False)] if step.dx else []
    if placed.point is None:
        return [("scroll_document", {"direction": d}) for d, _, _ in moves]
    width, height = placed.screen_size
    return [("scroll_at", {**_grid(placed), "direction": d,
                           "magnitude": n * 100 * coordinates.GEMINI_GRID // (
                               height if vertical else width)})
            for d, n, vertical in moves]  # fmt: skip


def predefined_calls(placed: Placed) -> list[tuple[str, dict[str, Any]]]:
    """One canonical step as the computer-use functions, on the 0–999 grid."""
    step = placed.step
    kind = step.action
    if kind == "click":
        if (step.button, step.count, step.modifiers) != ("left", 1, ()):
            raise unavailable(step, "gemini", "only a plain left click")
        return [("click_at", _grid(placed))]
    if kind == "move":
        return [("hover_at", _grid(placed))]
    if kind == "drag":
        if len(placed.path) != 2:
            raise unavailable(step, "gemini", "a path of more than two points")
        start, end = (_grid(placed, p) for p in placed.path)
        return [("drag_and_drop", {**start, "destination_x": end["x"],
                                   "destination_y": end["y"]})]  # fmt: skip
    if kind == "scroll":
        return _scrolls(placed)
    if kind == "type":
        if placed.point is None:
            raise unavailable(step, "gemini", "type_text_at needs a target")
        return [("type_text_at", {**_grid(placed), "text": step.text, "press_enter": step.enter,
                                  "clear_before_typing": step.clear})]  # fmt: skip
    if kind == "key":
        return [("key_combination", {"keys": key_names.to_gemini(step.keys)})]
    simple = {"wait": "wait_5_seconds", "screenshot": "open_web_browser"}
    if kind in simple:
        return [(simple[kind], {})]
    if kind == "navigate":
        return [("navigate", {"url": step.url})]
    raise unavailable(step, "gemini")


def gui_parts(conv: Conversation, turn: Turn) -> tuple[list[dict[str, Any]], str]:
    """(the function calls of a GUI turn, the text of any done step)."""
    functions = conv.context.get("functions", set())
    calls: list[tuple[str, dict[str, Any]]] = []
    answer = ""
    for placed in place_all(turn.reply_gui, screen_of(conv.screenshot)):
        if placed.action == "done":
            answer = fill_answer(placed.step, conv.last_image or conv.screenshot)
        elif placed.action in ("zoom", "bash"):
            if placed.action not in functions:
                raise unavailable(placed, "gemini", f"no {placed.action} function declared")
            arguments = _grid_edges(placed) if placed.action == "zoom" else {
                "command": placed.step.command}  # fmt: skip
            calls.append((placed.action, arguments))
        elif not conv.context.get("computer_use"):
            raise unavailable(placed, "gemini", "no computer_use tool declared")
        else:
            calls.extend(predefined_calls(placed))
    if calls and turn.safety is not None:
        decision = {"decision": "require_confirmation", "explanation": turn.safety}
        calls[0] = (calls[0][0], {**calls[0][1], "safety_decision": decision})
    return [{"functionCall": {"name": n, "args": a}} for n, a in calls], answer
