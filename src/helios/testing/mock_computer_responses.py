"""OpenAI's computer tool on the mock model server (Responses API).

Its declaration is checked as the real API does (`computer_use_preview` needs its display
and environment, and `truncation: "auto"`). GUI steps are played as one `computer_call`
with `actions[]` (the GA `computer` tool) or one call per action (`computer_use_preview`),
in the pixels of the last full screenshot; zoom and bash as calls of the declared
functions of those names; done as the message's text; a step's `safety` as a pending
safety check.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from helios.agents.computer import keys as key_names
from helios.testing.mock_gui import Placed, fill_answer, place_all, screen_of, unavailable
from helios.testing.mock_script import Conversation, InvalidRequest, Turn

_ENVIRONMENTS = frozenset({"windows", "mac", "linux", "ubuntu", "browser"})
#: the API's hosted tools (run by the provider, never called back): accepted, not played
_HOSTED = frozenset({"web_search", "web_search_preview", "file_search", "code_interpreter",
                     "image_generation", "mcp", "local_shell"})  # fmt: skip


def check_tools(body: Mapping[str, Any]) -> dict[str, Any]:
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise InvalidRequest("Invalid type for 'tools': expected an array.")
    context: dict[str, Any] = {"computer": None, "functions": set()}
    for i, tool in enumerate(tools):
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind == "computer_use_preview":
            for field in ("display_width", "display_height"):
                value = tool.get(field)
                if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                    raise InvalidRequest(f"Missing required parameter: 'tools[{i}].{field}'.")
            if tool.get("environment") not in _ENVIRONMENTS:
                raise InvalidRequest(f"Invalid value for 'tools[{i}].environment'.")
            if body.get("truncation") != "auto":
                raise InvalidRequest("The computer_use_preview tool requires truncation "
                                     "to be set to 'auto'.")  # fmt: skip
            context["computer"] = "preview"
        elif kind == "computer":
            context["computer"] = "ga"
        elif kind == "function":
            if not isinstance(tool.get("name"), str) or "function" in tool:
                raise InvalidRequest(f"Missing required parameter: 'tools[{i}].name'.")
            context["functions"].add(tool["name"])
        elif kind == "custom":  # a free-form tool (its input is text, not JSON)
            if not isinstance(tool.get("name"), str):
                raise InvalidRequest(f"Missing required parameter: 'tools[{i}].name'.")
            context["functions"].add(tool["name"])
        elif kind == "namespace":  # a named group of functions (Codex declares its sub-agents so)
            members = tool.get("tools")
            if not isinstance(tool.get("name"), str) or not isinstance(members, list):
                raise InvalidRequest(f"Missing required parameter: 'tools[{i}].tools'.")
            names = [m.get("name") for m in members if isinstance(m, dict)]
            context["functions"].update(n for n in names if isinstance(n, str))
        elif kind not in _HOSTED:
            raise InvalidRequest(f"Invalid value for 'tools[{i}].type': {kind!r}.")
    return context


_BUTTONS = {"left": "left", "right": "right", "middle": "wheel"}


def _xy(placed: Placed) -> dict[str, int]:
    point = placed.point
    if point is None:
        point = placed.centre
    return {"x": point[0], "y": point[1]}


def _held(placed: Placed) -> dict[str, Any]:
    modifiers = placed.step.modifiers
    return {"keys": key_names.to_openai(modifiers)} if modifiers else {}


def computer_actions(placed: Placed) -> list[dict[str, Any]]:
    """One canonical step as the computer tool's actions, in the screenshot's pixels."""
    step = placed.step
    kind = step.action
    if kind == "click":
        if step.count == 2 and step.button == "left":
            return [{"type": "double_click", **_xy(placed), **_held(placed)}]
        if step.count != 1:
            raise unavailable(step, "responses", f"{step.button} x{step.count}")
        return [{"type": "click", "button": _BUTTONS[step.button], **_xy(placed),
                 **_held(placed)}]  # fmt: skip
    if kind == "move":
        return [{"type": "move", **_xy(placed)}]
    if kind == "drag":
        return [{"type": "drag", "path": [{"x": x, "y": y} for x, y in placed.path]}]
    if kind == "scroll":
        return [{"type": "scroll", **_xy(placed), "scroll_x": step.dx * 100,
                 "scroll_y": step.dy * 100, **_held(placed)}]  # fmt: skip
    if kind == "type":
        click = [{"type": "click", "button": "left", **_xy(placed)}] if placed.point else []
        clear = [{"type": "keypress", "keys": ["CTRL", "A"]},
                 {"type": "keypress", "keys": ["BACKSPACE"]}] if step.clear else []  # fmt: skip
        enter = [{"type": "keypress", "keys": ["ENTER"]}] if step.enter else []
        return [*click, *clear, {"type": "type", "text": step.text}, *enter]
    if kind == "key":
        return [{"type": "keypress", "keys": key_names.to_openai(step.keys)}]
    if kind == "wait":
        return [{"type": "wait"}]
    if kind == "screenshot":
        return [{"type": "screenshot"}]
    if kind == "navigate":
        return [{"type": "keypress", "keys": ["CTRL", "L"]}, {"type": "type", "text": step.url},
                {"type": "keypress", "keys": ["ENTER"]}]  # fmt: skip
    raise unavailable(step, "responses")


def _function_arguments(placed: Placed, functions: set[str]) -> tuple[str, dict[str, Any]]:
    if placed.action not in functions:
        raise unavailable(placed, "responses", f"no {placed.action} function declared")
    if placed.action == "bash":
        return "bash", {"command": placed.step.command}
    assert placed.region is not None
    x0, y0, x1, y1 = placed.region
    return "zoom", {"x0": x0, "y0": y0, "x1": x1, "y1": y1}


def _safety(turn: Turn, t: int) -> list[dict[str, Any]]:
    if turn.safety is None:
        return []
    return [{"id": f"cu_sc_mock_{t}", "code": "malicious_instructions", "message": turn.safety}]


def gui_output(conv: Conversation, turn: Turn, t: int) -> tuple[list[dict[str, Any]], str]:
    """(the computer and function calls of a GUI turn, the text of any done step)."""
    computer = conv.context.get("computer")
    functions = conv.context.get("functions", set())
    calls: list[dict[str, Any]] = []
    actions: list[dict[str, Any]] = []
    answer = ""
    for placed in place_all(turn.reply_gui, screen_of(conv.screenshot)):
        if placed.action == "done":
            answer = fill_answer(placed.step, conv.last_image or conv.screenshot)
        elif placed.action in ("zoom", "bash"):
            name, arguments = _function_arguments(placed, functions)
            calls.append({"type": "function_call", "id": f"fc_mock_{t}_{len(calls)}",
                          "call_id": f"call_mock_{t}_{len(calls)}", "name": name,
                          "arguments": json.dumps(arguments), "status": "completed"})  # fmt: skip
        elif computer is None:
            raise unavailable(placed, "responses", "no computer tool declared")
        else:
            actions.extend(computer_actions(placed))
    checks = _safety(turn, t)
    if computer == "ga" and actions:
        calls.insert(0, {"type": "computer_call", "id": f"cu_mock_{t}", "call_id":
                         f"call_mock_{t}", "actions": actions, "pending_safety_checks": checks,
                         "status": "completed"})  # fmt: skip
    for i, action in enumerate(actions if computer == "preview" else []):
        calls.insert(i, {"type": "computer_call", "id": f"cu_mock_{t}_{i}", "call_id":
                         f"call_mock_{t}_{i}", "action": action,
                         "pending_safety_checks": checks if i == 0 else [],
                         "status": "completed"})  # fmt: skip
    return calls, answer
