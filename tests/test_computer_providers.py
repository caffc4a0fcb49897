"""Each provider's native actions ↔ the canonical `Action`, one by one: buttons, counts,
modifiers, drags, scrolls, keys, waits, zoom, bash, and a ValueError (a message for the
model) for whatever a provider cannot map. Key names and coordinate scaling too."""

from __future__ import annotations

from typing import Any

import pytest

from helios.agents.computer import coordinates, keys
from helios.agents.computer.anthropic import AnthropicProvider
from helios.agents.computer.gemini import GeminiProvider
from helios.agents.computer.generic import GenericProvider
from helios.agents.computer.openai import OpenAIProvider
from helios.environments.desktop.actions import Action, ActionResult, Geometry
from helios.models.base import ImageRef, ToolCall

G = Geometry(1024, 768)
NEW = AnthropicProvider("claude-opus-4-5")
LEGACY = AnthropicProvider("claude-sonnet-4-5")
GA = OpenAIProvider("gpt-5.4")
PREVIEW = OpenAIProvider("computer-use-preview")
GEMINI = GeminiProvider("gemini-2.5-computer-use-preview-10-2025")
GENERIC = GenericProvider("qwen")


def _call(name: str, arguments: dict[str, Any] | None) -> ToolCall:
    return ToolCall("call_1", name, arguments)


# -- Anthropic ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"action": "left_click", "coordinate": [10, 20]}, [Action("click", point=(10, 20))]),
        ({"action": "left_click", "coordinate": [10, 20], "text": "ctrl+shift"},
         [Action("click", point=(10, 20), modifiers=("ctrl", "shift"))]),
        ({"action": "right_click", "coordinate": [1, 2]},
         [Action("click", point=(1, 2), button="right")]),
        ({"action": "middle_click", "coordinate": [1, 2]},
         [Action("click", point=(1, 2), button="middle")]),
        ({"action": "double_click", "coordinate": [1, 2]},
         [Action("click", point=(1, 2), count=2)]),
        ({"action": "triple_click"}, [Action("click", point=None, count=3)]),
        ({"action": "mouse_move", "coordinate": [5, 6]}, [Action("move", point=(5, 6))]),
        ({"action": "left_click_drag", "start_coordinate": [1, 1], "coordinate": [9, 9]},
         [Action("drag", path=((1, 1), (9, 9)))]),
        ({"action": "scroll", "coordinate": [50, 60], "scroll_direction": "left",
          "scroll_amount": 2, "text": "shift"},
         [Action("scroll", point=(50, 60), dx=-2, modifiers=("shift",))]),
        ({"action": "scroll", "scroll_direction": "down", "scroll_amount": 4},
         [Action("scroll", dy=4)]),
        ({"action": "type", "text": "hi there"}, [Action("type", text="hi there")]),
        ({"action": "key", "text": "ctrl+shift+t"}, [Action("key", keys=("ctrl", "shift", "t"))]),
        ({"action": "key", "text": "Return", "repeat": 2}, [Action("key", keys=("Return",))] * 2),
        ({"action": "hold_key", "text": "shift", "duration": 2},
         [Action("hold_key", keys=("shift",), seconds=2.0)]),
        ({"action": "wait", "duration": 3}, [Action("wait", seconds=3.0)]),
        ({"action": "wait", "duration": 999}, [Action("wait", seconds=30.0)]),
        ({"action": "screenshot"}, [Action("screenshot")]),
        ({"action": "zoom", "region": [10, 20, 110, 70]},
         [Action("zoom", region=(10, 20, 110, 70))]),
        ({"action": "left_click", "coordinate": [5000, -3]}, [Action("click", point=(1023, 0))]),
    ],
)  # fmt: skip
def test_anthropic_actions(arguments: dict[str, Any], expected: list[Action]) -> None:
    assert NEW.actions(_call("computer", arguments), G) == expected


@pytest.mark.parametrize(
    ("provider", "name", "arguments", "message"),
    [
        (NEW, "computer", {"action": "cursor_position"}, "cursor_position"),
        (NEW, "computer", {"action": "left_mouse_down"}, "left_click_drag"),
        (NEW, "computer", {"action": "dance"}, "unknown computer action 'dance'"),
        (LEGACY, "computer", {"action": "zoom", "region": [0, 0, 5, 5]}, "unknown computer action"),
        (NEW, "computer", {"action": "left_click", "coordinate": ["a", 1]}, "two numbers"),
        (NEW, "computer", {"action": "mouse_move"}, "needs `coordinate`"),
        (NEW, "computer", {"action": "scroll", "scroll_direction": "sideways"}, "scroll_direction"),
        (NEW, "computer", {"action": "key", "text": ""}, "key combination"),
        (NEW, "computer", {"action": "left_click", "text": "q"}, "not a modifier"),
        (NEW, "computer", None, "not a JSON object"),
        (NEW, "bash", {"restart": True}, "restarting"),
        (NEW, "editor", {}, "unknown tool"),
    ],
)  # fmt: skip
def test_unmappable_calls_are_refused_with_a_message(
    provider: Any, name: str, arguments: dict[str, Any] | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        provider.actions(_call(name, arguments), G)


def test_anthropic_tools_and_answers() -> None:
    [tool, bash] = NEW.tools(G, bash=True)
    assert tool == {"type": "computer_20251124", "name": "computer", "display_width_px": 1024,
                    "display_height_px": 768, "display_number": 1, "enable_zoom": True}  # fmt: skip
    assert bash == {"type": "bash_20250124", "name": "bash"}
    assert LEGACY.tools(G, bash=False)[0]["type"] == "computer_20250124"
    assert "enable_zoom" not in LEGACY.tools(G, bash=False)[0]
    assert NEW.actions(_call("bash", {"command": "ls"}), G) == [Action("bash", text="ls")]
    shot = ImageRef.of(b"png")
    message = NEW.result(_call("computer", {}), ActionResult(error="bad key"), shot)
    assert message.role == "tool" and message.is_error and message.images == [shot]
    assert message.tool_call_id == "call_1" and message.content == "bad key"


# -- OpenAI -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ({"type": "click", "button": "left", "x": 3, "y": 4}, Action("click", point=(3, 4))),
        ({"type": "click", "button": "wheel", "x": 3, "y": 4},
         Action("click", point=(3, 4), button="middle")),
        ({"type": "click", "button": "right", "x": 3, "y": 4, "keys": ["CTRL", "SHIFT"]},
         Action("click", point=(3, 4), button="right", modifiers=("ctrl", "shift"))),
        ({"type": "double_click", "x": 3, "y": 4}, Action("click", point=(3, 4), count=2)),
        ({"type": "move", "x": 3, "y": 4}, Action("move", point=(3, 4))),
        ({"type": "drag", "path": [{"x": 1, "y": 1}, {"x": 5, "y": 5}, {"x": 9, "y": 1}]},
         Action("drag", path=((1, 1), (5, 5), (9, 1)))),
        ({"type": "scroll", "x": 10, "y": 10, "scroll_x": 0, "scroll_y": -300},
         Action("scroll", point=(10, 10), dy=-3)),
        ({"type": "scroll", "x": 10, "y": 10, "scroll_x": 30, "scroll_y": 0},
         Action("scroll", point=(10, 10), dx=1)),
        ({"type": "type", "text": "abc"}, Action("type", text="abc")),
        ({"type": "keypress", "keys": ["CTRL", "L"]}, Action("key", keys=("ctrl", "l"))),
        ({"type": "keypress", "keys": ["ENTER"]}, Action("key", keys=("Return",))),
        ({"type": "keypress", "keys": ["ARROWLEFT"]}, Action("key", keys=("Left",))),
        ({"type": "wait"}, Action("wait", seconds=2.0)),
        ({"type": "screenshot"}, Action("screenshot")),
    ],
)  # fmt: skip
def test_openai_actions(action: dict[str, Any], expected: Action) -> None:
    for provider in (GA, PREVIEW):
        assert provider.actions(_call("computer", {"action": action}), G) == [expected]
    batch = {"actions": [action, {"type": "screenshot"}]}
    assert GA.actions(_call("computer", batch), G) == [expected, Action("screenshot")]


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("computer", {"action": {"type": "click", "button": "back", "x": 1, "y": 1}}, "button"),
        ("computer", {"action": {"type": "jump"}}, "unknown computer action 'jump'"),
        ("computer", {"action": {"type": "click", "x": "1", "y": 1}}, "must be a number"),
        ("computer", {"actions": []}, "needs an action"),
        ("computer", {"action": {"type": "drag", "path": [{"x": 1, "y": 1}]}}, "two points"),
        ("computer", {"action": {"type": "keypress", "keys": []}}, "non-empty"),
        ("zoom", {"x0": 1}, "must be a number"),
        ("bash", {}, "bash needs"),
        ("shell", {}, "unknown tool"),
    ],
)  # fmt: skip
def test_openai_refusals(name: str, arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GA.actions(_call(name, arguments), G)


def test_openai_tools_zoom_bash_and_safety_acknowledgement() -> None:
    assert GA.tools(G, bash=False)[0] == {"type": "computer"}
    preview = {"type": "computer_use_preview", "display_width": 1024, "display_height": 768,
               "environment": "linux"}  # fmt: skip
    assert PREVIEW.tools(G, bash=False)[0] == preview
    names = [t.get("name") for t in GA.tools(G, bash=True)]
    assert names == [None, "zoom", "bash"]
    zoom = GA.actions(_call("zoom", {"x0": 10, "y0": 20, "x1": 30, "y1": 40}), G)
    assert zoom == [Action("zoom", region=(10, 20, 30, 40))]
    check = {"id": "sc_1", "code": "irrelevant_domain", "message": "Off-task site"}
    call = _call("computer", {"action": {"type": "screenshot"}, "pending_safety_checks": [check]})
    message = GA.result(call, ActionResult(), ImageRef.of(b"png"))
    assert message.provider_state == {"acknowledged_safety_checks": [check]}
    assert "Off-task site" in message.content
    plain = GA.result(_call("computer", {"action": {}}), ActionResult(), None)
    assert plain.provider_state is None and plain.images == []


# -- Gemini -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("click_at", {"x": 500, "y": 500}, [Action("click", point=(512, 384))]),
        ("hover_at", {"x": 0, "y": 999}, [Action("move", point=(0, 767))]),
        ("type_text_at", {"x": 500, "y": 500, "text": "hi"},
         [Action("click", point=(512, 384)), Action("key", keys=("ctrl", "a")),
          Action("key", keys=("BackSpace",)), Action("type", text="hi"),
          Action("key", keys=("Return",))]),
        ("type_text_at", {"x": 500, "y": 500, "text": "hi", "press_enter": False,
                          "clear_before_typing": False},
         [Action("click", point=(512, 384)), Action("type", text="hi")]),
        ("scroll_document", {"direction": "down"}, [Action("scroll", point=(512, 384), dy=5)]),
        ("scroll_at", {"x": 500, "y": 500, "direction": "up"},
         [Action("scroll", point=(512, 384), dy=-6)]),
        ("scroll_at", {"x": 500, "y": 500, "direction": "right", "magnitude": 200},
         [Action("scroll", point=(512, 384), dx=2)]),
        ("key_combination", {"keys": "Control+Shift+T"},
         [Action("key", keys=("ctrl", "shift", "t"))]),
        ("key_combination", {"keys": "Enter"}, [Action("key", keys=("Return",))]),
        ("drag_and_drop", {"x": 100, "y": 100, "destination_x": 900, "destination_y": 900},
         [Action("drag", path=((102, 76), (921, 691)))]),
        ("navigate", {"url": "https://example.test/"},
         [Action("navigate", url="https://example.test/")]),
        ("search", {}, [Action("navigate", url="https://www.google.com/")]),
        ("go_back", {}, [Action("key", keys=("alt", "Left"))]),
        ("go_forward", {}, [Action("key", keys=("alt", "Right"))]),
        ("wait_5_seconds", {}, [Action("wait", seconds=5.0)]),
        ("open_web_browser", {}, [Action("screenshot")]),
        ("zoom", {"x0": 0, "y0": 0, "x1": 500, "y1": 500},
         [Action("zoom", region=(0, 0, 512, 384))]),
        ("bash", {"command": "ls"}, [Action("bash", text="ls")]),
    ],
)  # fmt: skip
def test_gemini_actions(name: str, args: dict[str, Any], expected: list[Action]) -> None:
    assert GEMINI.actions(_call(name, args), G) == expected


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("click_at", {"x": "1", "y": 1}, "0-999 grid"),
        ("scroll_at", {"x": 1, "y": 1, "direction": "diagonal"}, "direction"),
        ("type_text_at", {"x": 1, "y": 1, "text": "a", "press_enter": "yes"}, "true or false"),
        ("navigate", {"url": ""}, "url"),
        ("take_over_the_world", {}, "unknown function"),
        ("click_at", {"x": 1, "y": 1, "safety_decision": "odd"}, "not run"),
    ],
)  # fmt: skip
def test_gemini_refusals(name: str, args: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GEMINI.actions(_call(name, args), G)


def test_gemini_tools_and_confirmed_result() -> None:
    tools = GEMINI.tools(G, bash=True)
    assert tools[0] == {"computerUse": {"environment": "ENVIRONMENT_BROWSER"}}
    assert [d["name"] for d in tools[1]["functionDeclarations"]] == ["zoom", "bash"]
    safety = {"decision": "require_confirmation", "explanation": "Accept cookies?"}
    call = _call("click_at", {"x": 1, "y": 1, "safety_decision": safety})
    assert GEMINI.actions(call, G) == [Action("click", point=(1, 0))]
    message = GEMINI.result(call, ActionResult(meta={"url": "https://x.test/"}), None)
    assert message.provider_state == {
        "response": {"url": "https://x.test/", "safety_acknowledgement": "true"}
    }
    assert "Accept cookies?" in message.content


# -- generic ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"action": "click", "x": 1, "y": 2, "button": "right", "count": 2, "modifiers": ["alt"]},
         Action("click", point=(1, 2), button="right", count=2, modifiers=("alt",))),
        ({"action": "move", "x": 1, "y": 2}, Action("move", point=(1, 2))),
        ({"action": "drag", "path": [[1, 2], [3, 4], [5, 6]]},
         Action("drag", path=((1, 2), (3, 4), (5, 6)))),
        ({"action": "scroll", "x": 1, "y": 2, "dy": -2}, Action("scroll", point=(1, 2), dy=-2)),
        ({"action": "type", "text": "x"}, Action("type", text="x")),
        ({"action": "key", "keys": ["ctrl", "L"]}, Action("key", keys=("ctrl", "l"))),
        ({"action": "hold_key", "keys": ["shift"], "seconds": 0.5},
         Action("hold_key", keys=("shift",), seconds=0.5)),
        ({"action": "wait", "seconds": 2}, Action("wait", seconds=2.0)),
        ({"action": "screenshot"}, Action("screenshot")),
        ({"action": "zoom", "region": [0, 0, 10, 10]}, Action("zoom", region=(0, 0, 10, 10))),
        ({"action": "navigate", "url": "u"}, Action("navigate", url="u")),
        ({"action": "done", "answer": "yes"}, Action("done", text="yes")),
        ({"action": "bash", "command": "ls"}, Action("bash", text="ls")),
    ],
)  # fmt: skip
def test_generic_actions(arguments: dict[str, Any], expected: Action) -> None:
    assert GENERIC.actions(_call("computer", arguments), G) == [expected]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"action": "fly"}, "unknown action 'fly'"),
        ({"action": "click", "x": 1}, "`y` must be a number"),
        ({"action": "click", "x": 1, "y": 1, "count": 5}, "count"),
        ({"action": "click", "x": 1, "y": 1, "button": "side"}, "button"),
        ({"action": "scroll", "x": 1, "y": 1}, "dx"),
        ({"action": "drag", "path": [[1, 2]]}, "path"),
        ({"action": "key", "keys": "ctrl"}, "non-empty list"),
        ({"action": "zoom", "region": [1, 2, 3]}, "region"),
        ({"action": "type"}, "`text` must be a string"),
    ],
)  # fmt: skip
def test_generic_refusals(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GENERIC.actions(_call("computer", arguments), G)


def test_generic_tool_offers_bash_only_when_allowed() -> None:
    without = GENERIC.tools(G, bash=False)[0]["function"]
    assert "bash" not in without["parameters"]["properties"]["action"]["enum"]
    assert "1024x768" in without["description"]
    with_bash = GENERIC.tools(G, bash=True)[0]["function"]
    assert "bash" in with_bash["parameters"]["properties"]["action"]["enum"]


# -- keys and coordinates -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ctrl+l", ("ctrl", "l")),
        ("Control+Shift+T", ("ctrl", "shift", "t")),
        ("ctrl++", ("ctrl", "plus")),
        ("cmd+alt+Escape", ("super", "alt", "Escape")),
        ("Page_Down", ("Page_Down",)),
        ("pgup", ("Page_Up",)),
        ("F5", ("F5",)),
        ("KP_Enter", ("KP_Enter",)),
    ],
)
def test_key_names(text: str, expected: tuple[str, ...]) -> None:
    assert keys.split(text) == expected
    assert keys.split(keys.to_gemini(expected)) == expected
    assert keys.combination(keys.to_openai(expected)) == expected


def test_anthropic_scale_fits_the_limits_and_maps_back() -> None:
    assert coordinates.anthropic(Geometry(1024, 768)).identity
    for geometry in (Geometry(1920, 1080), Geometry(2560, 1600), Geometry(3840, 2160)):
        scale = coordinates.anthropic(geometry)
        width, height = scale.screenshot_size
        assert max(width, height) <= coordinates.ANTHROPIC_MAX_EDGE
        assert width * height <= coordinates.ANTHROPIC_MAX_PIXELS
        assert abs(width / height - geometry.width / geometry.height) < 0.01
        for point in ((0, 0), (geometry.width - 1, geometry.height - 1), (777, 333)):
            back = scale.to_desktop(*scale.to_model(point))
            step = geometry.width / width
            assert abs(back[0] - point[0]) <= step and abs(back[1] - point[1]) <= step
        assert scale.region_to_desktop(0, 0, width, height) == (0, 0, geometry.width,
                                                                 geometry.height)  # fmt: skip


def test_coordinates_refuse_what_is_not_a_number() -> None:
    scale = coordinates.native(G)
    with pytest.raises(ValueError):
        scale.to_desktop(float("nan"), 1)
    with pytest.raises(ValueError):
        scale.region_to_desktop(0, 0, float("inf"), 1)
    assert scale.region_to_desktop(50, 50, 10, 10) == (10, 10, 50, 50)
    assert scale.region_to_desktop(5, 5, 5, 5) == (5, 5, 6, 6)
