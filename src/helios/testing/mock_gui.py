"""Scripted GUI steps for the mock model server.

A step is written once, in the canonical action's terms, and each wire renders it as
its provider's native action in that provider's coordinates (`mock_llm_anthropic`,
`mock_llm_responses`, `mock_llm_gemini`, and `mock_llm_openai` for the generic
JSON-action tool). Where a step aims at something, the target is found in the last
full screenshot the request carried (a zoom's crop does not count), so a script
needs no coordinates:

    {"action": "click", "target": {"color": "#e53935"}}
    {"action": "click", "target": "#1e88e5", "button": "right", "count": 2,
     "modifiers": ["ctrl"]}
    {"action": "move", "target": {"point": [10, 10]}}
    {"action": "drag", "target": "#43a047", "to": "#fdd835"}
    {"action": "scroll", "target": "#8e24aa", "dy": 3}
    {"action": "type", "text": "hello"}            (Gemini: needs a target)
    {"action": "type", "target": "#43a047", "text": "hi", "clear": true, "enter": true}
    {"action": "key", "keys": ["ctrl", "l"]}       (or "ctrl+l")
    {"action": "hold_key", "keys": ["shift"], "seconds": 1}
    {"action": "wait", "seconds": 1}
    {"action": "screenshot"}
    {"action": "zoom", "target": {"color": "#000000", "pad": 4}}
    {"action": "navigate", "url": "https://example.test/"}
    {"action": "done", "answer": "42"}
    {"action": "done", "answer": "CODE: {read}"}   ({read}: the text read in the last
                                                   image, a zoom's crop too: glyphs.py)
    {"action": "bash", "command": "ls /"}

A target is {"color": "#rrggbb", "tolerance": 24} (the centre of the bounding box of
that colour's pixels; a zoom takes the box itself), {"point": [x, y]} or
{"region": [x0, y0, x1, y1]}, in the screenshot's pixels; a bare "#rrggbb" string is
a colour. A `type` with a target clicks it first; `clear` and `enter` (Gemini's
type_text_at flags, off unless given) select-all and delete before, and press Enter
after, on every wire. A step that cannot be played (no screenshot, the colour is not there, an
action the wire lacks) is answered with a 400 that says why.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from helios.agents.computer import keys as key_names
from helios.testing.glyphs import read_text
from helios.testing.screens import Box, Rgb, Screen, ScreenError, parse_color

KINDS = frozenset({"click", "move", "drag", "scroll", "type", "key", "hold_key", "wait",
                   "screenshot", "zoom", "navigate", "done", "bash"})  # fmt: skip
_STEP_KEYS = frozenset({"action", "target", "to", "path", "button", "count", "modifiers", "dx",
                        "dy", "text", "keys", "seconds", "url", "answer", "command", "enter",
                        "clear"})  # fmt: skip
_TARGET_KEYS = frozenset({"color", "tolerance", "point", "region", "pad"})
#: how far a screenshot's pixel may be from a target colour, per channel (a
#: downscaled screenshot blends edges; the inside of a shape keeps its colour)
DEFAULT_TOLERANCE = 24
Point = tuple[int, int]


class ScriptError(ValueError):
    """A scripted step that cannot be played on this request (answered with a 400)."""


def _where_keys(data: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    unknown = sorted(k for k in data if k not in allowed and not k.startswith("_"))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")


def _ints(value: object, count: int, where: str) -> tuple[int, ...]:
    if (not isinstance(value, list | tuple) or len(value) != count
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)):  # fmt: skip
        raise ValueError(f"{where}: expected {count} whole numbers")
    return tuple(value)


@dataclass(frozen=True)
class Target:
    """Where a step aims, in the screenshot's pixels."""

    color: Rgb | None = None
    tolerance: int = DEFAULT_TOLERANCE
    point: Point | None = None
    region: Box | None = None
    #: pixels added around a found region (zoom)
    pad: int = 0

    @classmethod
    def from_value(cls, value: object, where: str) -> Target:
        if isinstance(value, str):
            return cls(color=parse_color(value))
        if not isinstance(value, Mapping):
            raise ValueError(f"{where}: a target is '#rrggbb' or an object")
        _where_keys(value, _TARGET_KEYS, where)
        given = [k for k in ("color", "point", "region") if k in value]
        if len(given) != 1:
            raise ValueError(f"{where}: a target has one of color, point, region")
        tolerance = value.get("tolerance", DEFAULT_TOLERANCE)
        pad = value.get("pad", 0)
        if not isinstance(tolerance, int) or not isinstance(pad, int) or tolerance < 0 or pad < 0:
            raise ValueError(f"{where}: tolerance and pad are whole numbers >= 0")
        if "color" in value:
            return cls(color=parse_color(value["color"]), tolerance=tolerance, pad=pad)
        if "point" in value:
            x, y = _ints(value["point"], 2, f"{where}.point")
            return cls(point=(x, y), pad=pad)
        x0, y0, x1, y1 = _ints(value["region"], 4, f"{where}.region")
        return cls(region=(x0, y0, x1, y1), pad=pad)

    def box(self, screen: Screen | None) -> Box:
        """The target's box in the screenshot's pixels."""
        if self.point is not None:
            found: Box = (*self.point, self.point[0] + 1, self.point[1] + 1)
        elif self.region is not None:
            found = self.region
        else:
            assert self.color is not None
            if screen is None:
                raise ScriptError("a colour target needs a screenshot in the request")
            try:
                box = screen.find(self.color, self.tolerance)
            except ScreenError as exc:
                raise ScriptError(str(exc)) from None
            if box is None:
                hex_color = "#{:02x}{:02x}{:02x}".format(*self.color)
                raise ScriptError(f"colour {hex_color} is not in the last screenshot")
            found = box
        if not self.pad:
            return found
        x0, y0, x1, y1 = found
        return x0 - self.pad, y0 - self.pad, x1 + self.pad, y1 + self.pad

    def point_in(self, screen: Screen | None) -> Point:
        x0, y0, x1, y1 = self.box(screen)
        return (x0 + x1 - 1) // 2, (y0 + y1 - 1) // 2


@dataclass(frozen=True)
class GuiStep:
    """One canonical action of a scripted GUI turn."""

    action: str
    target: Target | None = None
    to: Target | None = None
    path: tuple[Target, ...] = ()
    button: str = "left"
    count: int = 1
    modifiers: tuple[str, ...] = ()
    dx: int = 0
    dy: int = 0
    text: str = ""
    keys: tuple[str, ...] = ()
    seconds: float = 1.0
    url: str = ""
    answer: str = ""
    command: str = ""
    #: Gemini's type_text_at: press Enter after, clear the field before
    enter: bool = False
    clear: bool = False

    @classmethod
    def from_dict(cls, data: object, where: str) -> GuiStep:
        if not isinstance(data, Mapping):
            raise ValueError(f"{where}: a step is an object")
        _where_keys(data, _STEP_KEYS, where)
        action = data.get("action")
        if action not in KINDS:
            raise ValueError(f"{where}.action: one of {sorted(KINDS)}, not {action!r}")
        fields: dict[str, Any] = {"action": action}
        for name in ("target", "to"):
            if name in data:
                fields[name] = Target.from_value(data[name], f"{where}.{name}")
        if "path" in data:
            if not isinstance(data["path"], list) or len(data["path"]) < 2:
                raise ValueError(f"{where}.path: two targets or more")
            fields["path"] = tuple(Target.from_value(t, f"{where}.path[{i}]")
                                   for i, t in enumerate(data["path"]))  # fmt: skip
        fields.update(_scalars(data, where))
        step = cls(**fields)
        step.check(where)
        return step

    def check(self, where: str) -> None:
        needs_target = {"click", "move", "zoom"}
        if self.action in needs_target and self.target is None:
            raise ValueError(f"{where}: {self.action} needs a target")
        if self.action == "drag" and not self.path and (self.target is None or self.to is None):
            raise ValueError(f"{where}: drag needs target and to, or a path")
        if self.action in ("key", "hold_key") and not self.keys:
            raise ValueError(f"{where}: {self.action} needs keys")
        if self.action == "scroll" and not (self.dx or self.dy):
            raise ValueError(f"{where}: scroll needs dx or dy")
        if self.button not in ("left", "right", "middle") or not 1 <= self.count <= 3:
            raise ValueError(f"{where}: button is left|right|middle and count 1 to 3")

    def drag_targets(self) -> tuple[Target, ...]:
        if self.path:
            return self.path
        assert self.target is not None and self.to is not None
        return self.target, self.to


def _scalars(data: Mapping[str, Any], where: str) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for name, kind in (("button", str), ("text", str), ("url", str), ("answer", str),
                       ("command", str), ("enter", bool), ("clear", bool)):  # fmt: skip
        if name in data:
            if not isinstance(data[name], kind):
                raise ValueError(f"{where}.{name}: expected {kind.__name__}")
            fields[name] = data[name]
    for name in ("count", "dx", "dy"):
        if name in data:
            value = data[name]
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"{where}.{name}: expected a whole number")
            fields[name] = value
    if "seconds" in data:
        value = data["seconds"]
        if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{where}.seconds: expected a number >= 0")
        fields["seconds"] = float(value)
    if "keys" in data:
        raw = data["keys"]
        fields["keys"] = key_names.split(raw) if isinstance(raw, str) else (
            key_names.combination(raw))  # fmt: skip
    if "modifiers" in data:
        fields["modifiers"] = key_names.modifiers_of(data["modifiers"])
    return fields


@dataclass(frozen=True)
class Placed:
    """A step with its targets found, in the pixels of the screenshot (`size`)."""

    step: GuiStep
    size: tuple[int, int]
    point: Point | None = None
    path: tuple[Point, ...] = ()
    region: Box | None = None

    @property
    def action(self) -> str:
        return self.step.action

    @property
    def screen_size(self) -> tuple[int, int]:
        """The screenshot's size, for a wire whose coordinates are relative to it."""
        if self.size == (0, 0):
            raise ScriptError(f"the {self.action} step needs a screenshot in the request")
        return self.size

    @property
    def centre(self) -> Point:
        width, height = self.screen_size
        return width // 2, height // 2


def place(step: GuiStep, screen: Screen | None) -> Placed:
    """Find the step's targets in `screen` (the last full screenshot)."""
    try:
        size = screen.size if screen is not None else (0, 0)
    except ScreenError as exc:
        raise ScriptError(str(exc)) from None
    if step.action == "drag":
        path = tuple(t.point_in(screen) for t in step.drag_targets())
        return Placed(step, size, path=path)
    if step.action == "zoom":
        assert step.target is not None
        x0, y0, x1, y1 = step.target.box(screen)
        if size != (0, 0):
            x0, y0, x1, y1 = max(0, x0), max(0, y0), min(size[0], x1), min(size[1], y1)
        return Placed(step, size, region=(x0, y0, x1, y1))
    point = step.target.point_in(screen) if step.target is not None else None
    return Placed(step, size, point=point)


def place_all(steps: tuple[GuiStep, ...], screen: Screen | None) -> list[Placed]:
    return [place(step, screen) for step in steps]


def fill_answer(step: GuiStep, image: str | None) -> str:
    """A done step's answer, its `{read}` replaced by the text the reader sees in
    `image` (the base64 of the request's last image), by glyphs it renders itself."""
    if "{read}" not in step.answer:
        return step.answer
    if image is None:
        raise ScriptError("the done step reads an image, but the request carries none")
    try:
        text = read_text(base64.b64decode(image, validate=True))
    except (binascii.Error, ValueError) as exc:
        raise ScriptError(f"cannot read the last image: {exc}") from None
    return step.answer.replace("{read}", text)


def unavailable(step: GuiStep | Placed, wire: str, detail: str = "") -> ScriptError:
    action = step.action
    more = f" ({detail})" if detail else ""
    return ScriptError(f"the {action} step cannot be played on the {wire} wire{more}")


def screen_of(encoded: str | None) -> Screen | None:
    """The screenshot a request carried (base64), ready to search."""
    if encoded is None:
        return None
    try:
        return Screen(base64.b64decode(encoded, validate=True))
    except (binascii.Error, ValueError):
        raise ScriptError("the last screenshot is not valid base64") from None


def data_url_payload(url: object) -> str | None:
    """The base64 of a `data:image/...;base64,` URL, or None for anything else."""
    if not isinstance(url, str) or not url.startswith("data:image/"):
        return None
    head, _, payload = url.partition(",")
    return payload if head.endswith(";base64") and payload else None


def is_base64(text: object) -> bool:
    """Whether `text` is strict, non-empty base64 (as the real APIs require of image data)."""
    if not isinstance(text, str) or not text:
        return False
    try:
        binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError):
        return False
    return True
