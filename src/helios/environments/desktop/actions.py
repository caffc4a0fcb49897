"""The canonical computer action: what every provider's computer-use call is mapped
to, and what `Desktop.execute` runs.

Points are desktop pixels (the model's coordinate space is mapped in
`agents/computer/coordinates.py`, in one place). Each provider module maps its own
wire format to and from `Action`; nothing else knows a provider's action names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

ActionKind = Literal[
    "click", "move", "drag", "scroll", "type", "key", "hold_key", "wait",
    "screenshot", "zoom", "navigate", "done", "bash",
]  # fmt: skip
Button = Literal["left", "right", "middle"]
Modifier = Literal["shift", "ctrl", "alt", "super"]
#: a point on the desktop, in pixels from the top-left corner
Point = tuple[int, int]
#: a region x0, y0, x1, y1 (x1, y1 excluded)
Region = tuple[int, int, int, int]


@dataclass(frozen=True, slots=True)
class Geometry:
    """The desktop's size in pixels (Xvfb's screen)."""

    width: int = 1024
    height: int = 768

    def clamp(self, point: Point) -> Point:
        x, y = point
        return max(0, min(self.width - 1, x)), max(0, min(self.height - 1, y))


@dataclass(frozen=True, slots=True)
class Action:
    """One step on the desktop.

    - click: at `point` (None: where the pointer is) with `button`, `count` 1 to 3
      (double, triple), holding `modifiers`;
    - move: the pointer to `point`;
    - drag: the left button pressed along `path` (two points or more);
    - scroll: `dx`, `dy` notches (positive: right, down) at `point`, with `modifiers`;
    - type: `text`, as typed on a keyboard;
    - key: `keys` pressed together, xdotool names (`["ctrl", "l"]`, `["Return"]`);
    - hold_key: `keys` held for `seconds`;
    - wait: `seconds`;
    - screenshot: nothing but a new screenshot;
    - zoom: the next screenshot is `region` at full resolution;
    - navigate: the browser to `url`;
    - done: the task is over; `text` is the final answer;
    - bash: `text` is a command (only when the task allows it).
    """

    kind: ActionKind
    point: Point | None = None
    button: Button = "left"
    count: int = 1
    modifiers: tuple[Modifier, ...] = ()
    path: tuple[Point, ...] = ()
    dx: int = 0
    dy: int = 0
    text: str = ""
    keys: tuple[str, ...] = ()
    seconds: float = 0.0
    region: Region | None = None
    url: str = ""


@dataclass(slots=True)
class ActionResult:
    """What executing an action gave: feedback for the model, and an error (the
    action could not be done: a bad key name, a dead desktop) that is not fatal."""

    output: str = ""
    error: str | None = None
    #: extra fields a provider may need to echo back (safety checks acknowledged)
    meta: dict[str, str] = field(default_factory=dict)
