"""Anthropic's computer tool on the mock model server.

Its declaration is checked as the real API does: each version needs its beta in the
`anthropic-beta` header, its display size, and `enable_zoom` only on the 2025-11-24 tool.
Image blocks must be base64 of an image type. GUI steps are played as the tool's actions,
in the pixels of the last full screenshot: Claude's own space, since the screenshot sent
is already downscaled for a large desktop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from helios.agents.computer import keys as key_names
from helios.testing.mock_gui import (
    Placed,
    fill_answer,
    is_base64,
    place_all,
    screen_of,
    unavailable,
)
from helios.testing.mock_script import Conversation, InvalidRequest, Turn

#: the beta each computer tool version needs
COMPUTER_BETAS = {
    "computer_20241022": "computer-use-2024-10-22",
    "computer_20250124": "computer-use-2025-01-24",
    "computer_20251124": "computer-use-2025-11-24",
}
#: Anthropic's own tools that Helios may declare beside the computer tool
_BUILTIN_TOOLS = frozenset({"bash_20250124", "text_editor_20250124", "text_editor_20250429",
                            "text_editor_20250728"})  # fmt: skip
_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


def check_tools(tools: object, headers: Mapping[str, str]) -> dict[str, Any]:
    """Validate the declared tools; return what a GUI reply needs of them."""
    if tools is None:
        return {}
    if not isinstance(tools, list):
        raise InvalidRequest("tools: Input should be a valid list")
    betas = {b.strip() for b in headers.get("anthropic-beta", "").split(",") if b.strip()}
    context: dict[str, Any] = {"names": set()}
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise InvalidRequest(f"tools.{i}: Input should be a valid dictionary")
        kind = tool.get("type", "custom")
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidRequest(f"tools.{i}.name: Field required")
        if kind in COMPUTER_BETAS:
            _check_computer(i, tool, kind, betas)
            context["computer"] = tool
        elif kind in _BUILTIN_TOOLS:
            pass
        elif kind == "custom":
            if not isinstance(tool.get("input_schema"), dict):
                raise InvalidRequest(f"tools.{i}.custom.input_schema: Field required")
        else:
            raise InvalidRequest(f"tools.{i}: Input tag '{kind}' found using 'type' does not "
                                 "match any of the expected tags")  # fmt: skip
        context["names"].add(name)
    return context


def _check_computer(i: int, tool: dict[str, Any], kind: str, betas: set[str]) -> None:
    beta = COMPUTER_BETAS[kind]
    if beta not in betas:
        raise InvalidRequest(
            f"tools.{i}: Input tag '{kind}' found using 'type' does not match any of the "
            f"expected tags (the '{kind}' tool needs the 'anthropic-beta: {beta}' header)"
        )
    if tool.get("name") != "computer":
        raise InvalidRequest(f"tools.{i}.{kind}.name: Input should be 'computer'")
    for field in ("display_width_px", "display_height_px"):
        value = tool.get(field)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InvalidRequest(f"tools.{i}.{kind}.{field}: Field required")
    if "enable_zoom" in tool and kind != "computer_20251124":
        raise InvalidRequest(f"tools.{i}.{kind}.enable_zoom: Extra inputs are not permitted")


def _check_image(block: dict[str, Any], where: str) -> str:
    source = block.get("source")
    if not isinstance(source, dict) or source.get("type") != "base64":
        raise InvalidRequest(f"{where}.source: expected a base64 source")
    if source.get("media_type") not in _IMAGE_TYPES:
        raise InvalidRequest(f"{where}.source.media_type: Input should be one of "
                             f"{', '.join(sorted(_IMAGE_TYPES))}")  # fmt: skip
    data = source.get("data")
    if not is_base64(data):
        raise InvalidRequest(f"{where}.source.data: the image data is not valid base64")
    return str(data)


def _tool_uses(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"] if (
        isinstance(content, list)) else []  # fmt: skip


def last_screenshot(messages: list[dict[str, Any]]) -> tuple[str | None, int]:
    """(the base64 of the last full screenshot, the number of images); every image
    block is checked on the way. A zoom's answer is a crop, not a full screenshot."""
    last, _, count = last_images(messages)
    return last, count


def last_images(messages: list[dict[str, Any]]) -> tuple[str | None, str | None, int]:
    """(the last full screenshot, the last image of any kind (a zoom's crop too),
    the number of images), each image block checked on the way."""
    zooms: set[str] = set()
    last: str | None = None
    any_last: str | None = None
    count = 0
    for i, message in enumerate(messages):
        if message["role"] == "assistant":
            for block in _tool_uses(message):
                arguments = block.get("input")
                if isinstance(arguments, dict) and arguments.get("action") == "zoom":
                    zooms.add(str(block.get("id")))
            continue
        content = message.get("content")
        for j, block in enumerate(content if isinstance(content, list) else []):
            if not isinstance(block, dict):
                continue
            if block.get("type") == "image":
                last = any_last = _check_image(block, f"messages.{i}.content.{j}")
                count += 1
            elif block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                for k, inner in enumerate(block["content"]):
                    if isinstance(inner, dict) and inner.get("type") == "image":
                        data = _check_image(inner, f"messages.{i}.content.{j}.content.{k}")
                        count += 1
                        any_last = data
                        if str(block.get("tool_use_id")) not in zooms:
                            last = data
    return last, any_last, count


_CLICKS = {("left", 1): "left_click", ("right", 1): "right_click", ("middle", 1): "middle_click",
           ("left", 2): "double_click", ("left", 3): "triple_click"}  # fmt: skip


def _xy(point: tuple[int, int] | None) -> dict[str, Any]:
    return {} if point is None else {"coordinate": [point[0], point[1]]}


def _held(placed: Placed) -> dict[str, Any]:
    modifiers = placed.step.modifiers
    return {"text": "+".join(modifiers)} if modifiers else {}


def _seconds(value: float) -> int | float:
    return int(value) if value == int(value) else value


def computer_inputs(placed: Placed, tool: dict[str, Any]) -> list[dict[str, Any]]:
    """One canonical step as the computer tool's inputs, in the screenshot's pixels."""
    step = placed.step
    kind = step.action
    if kind == "click":
        action = _CLICKS.get((step.button, step.count))
        if action is None:
            raise unavailable(step, "anthropic", f"{step.button} x{step.count}")
        return [{"action": action, **_xy(placed.point), **_held(placed)}]
    if kind == "move":
        return [{"action": "mouse_move", **_xy(placed.point)}]
    if kind == "drag":
        if len(placed.path) != 2:
            raise unavailable(step, "anthropic", "a path of more than two points")
        (sx, sy), (ex, ey) = placed.path
        return [{"action": "left_click_drag", "start_coordinate": [sx, sy],
                 "coordinate": [ex, ey], **_held(placed)}]  # fmt: skip
    if kind == "scroll":
        scrolls = [("down" if step.dy > 0 else "up", abs(step.dy))] if step.dy else []
        scrolls += [("right" if step.dx > 0 else "left", abs(step.dx))] if step.dx else []
        return [{"action": "scroll", **_xy(placed.point), "scroll_direction": direction,
                 "scroll_amount": amount, **_held(placed)}
                for direction, amount in scrolls]  # fmt: skip
    if kind == "type":
        click = [{"action": "left_click", **_xy(placed.point)}] if placed.point else []
        clear = [{"action": "key", "text": "ctrl+a"}, {"action": "key", "text": "BackSpace"}]
        enter = [{"action": "key", "text": "Return"}] if step.enter else []
        return [*click, *(clear if step.clear else []), {"action": "type", "text": step.text},
                *enter]  # fmt: skip
    if kind == "key":
        return [{"action": "key", "text": key_names.to_anthropic(step.keys)}]
    if kind == "hold_key":
        return [{"action": "hold_key", "text": key_names.to_anthropic(step.keys),
                 "duration": _seconds(step.seconds)}]  # fmt: skip
    if kind == "wait":
        return [{"action": "wait", "duration": _seconds(step.seconds)}]
    if kind == "screenshot":
        return [{"action": "screenshot"}]
    if kind == "zoom":
        if not tool.get("enable_zoom"):
            raise unavailable(step, "anthropic", f"{tool.get('type')} without enable_zoom")
        assert placed.region is not None
        return [{"action": "zoom", "region": list(placed.region)}]
    if kind == "navigate":
        return [{"action": "key", "text": "ctrl+l"}, {"action": "type", "text": step.url},
                {"action": "key", "text": "Return"}]  # fmt: skip
    raise unavailable(step, "anthropic")


def gui_blocks(conv: Conversation, turn: Turn, turn_index: int) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    tool = conv.context.get("computer")
    calls: list[tuple[str, dict[str, Any]]] = []
    for placed in place_all(turn.reply_gui, screen_of(conv.screenshot)):
        if placed.action == "done":
            blocks.append({"type": "text", "text": fill_answer(placed.step, conv.last_image)})
        elif placed.action == "bash":
            if "bash" not in conv.context.get("names", ()):
                raise unavailable(placed, "anthropic", "no bash tool declared")
            calls.append(("bash", {"command": placed.step.command}))
        elif tool is None:
            raise unavailable(placed, "anthropic", "no computer tool declared")
        else:
            calls.extend(("computer", data) for data in computer_inputs(placed, tool))
    for i, (name, data) in enumerate(calls):
        blocks.append({"type": "tool_use", "id": f"toolu_{turn_index}_{i}", "name": name,
                       "input": data})  # fmt: skip
    return blocks
