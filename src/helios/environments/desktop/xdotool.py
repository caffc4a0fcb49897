"""The canonical `Action` as xdotool arguments: key names, buttons, modifiers.

Only input actions are here (click, move, drag, scroll, type, key, hold_key and the
URL-bar keystrokes of navigate); what is not input (wait, zoom, screenshot, done,
bash) is `Desktop.execute`'s own. Everything returned is a list of xdotool argv lists (run
one after the other: nothing may follow `type` in one xdotool call), quoted with
`shlex.quote` by the caller: no text of the model's reaches a shell unquoted.
"""

from __future__ import annotations

import itertools

from helios.environments.desktop.actions import Action, Button, Geometry, Point

#: common key names (any case) → xdotool keysyms; anything else is passed as given
#: (xdotool takes X keysym names: "a", "F5", "Page_Up", "KP_Enter"…)
KEY_NAMES: dict[str, str] = {
    "ctrl": "ctrl", "control": "ctrl", "lctrl": "ctrl", "rctrl": "ctrl",
    "alt": "alt", "option": "alt", "opt": "alt",
    "shift": "shift",
    "super": "super", "meta": "super", "cmd": "super", "command": "super", "win": "super",
    "windows": "super",
    "enter": "Return", "return": "Return",
    "esc": "Escape", "escape": "Escape",
    "tab": "Tab", "space": "space", "spacebar": "space",
    "backspace": "BackSpace", "delete": "Delete", "del": "Delete", "insert": "Insert",
    "home": "Home", "end": "End",
    "pageup": "Prior", "page_up": "Prior", "pgup": "Prior",
    "pagedown": "Next", "page_down": "Next", "pgdn": "Next",
    "up": "Up", "down": "Down", "left": "Left", "right": "Right",
    "arrowup": "Up", "arrowdown": "Down", "arrowleft": "Left", "arrowright": "Right",
    "capslock": "Caps_Lock", "printscreen": "Print",
    "+": "plus", "-": "minus", "=": "equal", ",": "comma", ".": "period", "/": "slash",
    ";": "semicolon", "'": "apostrophe", "[": "bracketleft", "]": "bracketright",
    "\\": "backslash", "`": "grave",
}  # fmt: skip
MODIFIERS = frozenset({"ctrl", "alt", "shift", "super"})
BUTTONS: dict[Button, str] = {"left": "1", "middle": "2", "right": "3"}
#: X button numbers of one scroll notch: up, down, left, right
SCROLL_UP, SCROLL_DOWN, SCROLL_LEFT, SCROLL_RIGHT = "4", "5", "6", "7"
#: pointer steps per drag segment: browsers see a movement, not a jump
DRAG_STEPS = 6
#: ms between the clicks of a double or triple click (well under the 400 ms of X)
CLICK_DELAY_MS = 60
#: ms between typed characters
TYPE_DELAY_MS = 6
MAX_CLICKS = 3
MAX_NOTCHES = 50


def keysym(name: str) -> str:
    """One key name as an xdotool keysym; F-keys in any case ("f5" → "F5")."""
    text = name.strip()
    lowered = text.lower()
    if lowered in KEY_NAMES:
        return KEY_NAMES[lowered]
    if len(lowered) in (2, 3) and lowered[0] == "f" and lowered[1:].isdigit():
        return "F" + lowered[1:]
    if not text:
        raise ValueError("an empty key name")
    return text


def split_keys(keys: tuple[str, ...]) -> list[str]:
    """Keys as given, where one entry may itself be a combination ("ctrl+l")."""
    found: list[str] = []
    for key in keys:
        parts = [key] if key.strip() == "+" else [p for p in key.split("+") if p.strip()]
        found += parts or [key]
    return found


def combination(keys: tuple[str, ...]) -> str:
    """Keys pressed together, as xdotool's `ctrl+shift+t`."""
    names = [keysym(k) for k in split_keys(keys)]
    if not names:
        raise ValueError("no key given")
    return "+".join(names)


def _move(point: Point, geometry: Geometry) -> list[str]:
    x, y = geometry.clamp(point)
    return ["mousemove", str(x), str(y)]


def _modifiers(action: Action, down: bool) -> list[str]:
    keys = [keysym(m) for m in action.modifiers]
    return [arg for key in keys for arg in ("keydown" if down else "keyup", key)]


def _click(action: Action, geometry: Geometry) -> list[str]:
    count = max(1, min(MAX_CLICKS, action.count))
    argv = _move(action.point, geometry) if action.point is not None else []
    argv += _modifiers(action, down=True)
    argv += ["click", "--repeat", str(count), "--delay", str(CLICK_DELAY_MS)]
    argv += [BUTTONS[action.button]]
    return argv + _modifiers(action, down=False)


def _drag(action: Action, geometry: Geometry) -> list[str]:
    if len(action.path) < 2:
        raise ValueError("a drag needs a path of two points or more")
    points = [geometry.clamp(p) for p in action.path]
    argv = ["mousemove", str(points[0][0]), str(points[0][1]), "mousedown", "1"]
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        for step in range(1, DRAG_STEPS + 1):
            x = x0 + (x1 - x0) * step // DRAG_STEPS
            y = y0 + (y1 - y0) * step // DRAG_STEPS
            argv += ["mousemove", str(x), str(y)]
    return [*argv, "mouseup", "1"]


def _scroll(action: Action, geometry: Geometry) -> list[str]:
    point = action.point or (geometry.width // 2, geometry.height // 2)
    argv = _move(point, geometry) + _modifiers(action, down=True)
    for notches, back, forth in ((action.dy, SCROLL_UP, SCROLL_DOWN),
                                 (action.dx, SCROLL_LEFT, SCROLL_RIGHT)):  # fmt: skip
        if notches:
            count = min(MAX_NOTCHES, abs(notches))
            argv += ["click", "--repeat", str(count), "--delay", "10"]
            argv.append(forth if notches > 0 else back)
    return argv + _modifiers(action, down=False)


def input_commands(action: Action, geometry: Geometry) -> list[list[str]]:
    """The xdotool calls of an input action. `ValueError` for one that cannot be
    done (a drag of one point, an empty key), with a message for the model."""
    return [_input_argv(action, geometry)]


def _input_argv(action: Action, geometry: Geometry) -> list[str]:
    kind = action.kind
    if kind == "click":
        return _click(action, geometry)
    if kind == "move":
        if action.point is None:
            raise ValueError("move needs a point")
        return _move(action.point, geometry)
    if kind == "drag":
        return _drag(action, geometry)
    if kind == "scroll":
        return _scroll(action, geometry)
    if kind == "type":
        return ["type", "--clearmodifiers", "--delay", str(TYPE_DELAY_MS), "--", action.text]
    if kind == "key":
        return ["key", "--clearmodifiers", combination(action.keys)]
    if kind == "hold_key":
        names = [keysym(k) for k in split_keys(action.keys)]
        if not names:
            raise ValueError("hold_key needs a key")
        seconds = f"{max(0.0, min(action.seconds, 30.0)):.3f}"
        downs = [arg for name in names for arg in ("keydown", name)]
        ups = [arg for name in reversed(names) for arg in ("keyup", name)]
        return [*downs, "sleep", seconds, *ups]
    raise ValueError(f"{kind} is not an input action")


def navigate_commands(url: str) -> list[list[str]]:
    """Focus the browser's URL bar, replace its text with `url`, press Enter."""
    return [
        ["key", "--clearmodifiers", "ctrl+l", "key", "--clearmodifiers", "ctrl+a"],
        ["type", "--clearmodifiers", "--delay", str(TYPE_DELAY_MS), "--", url],
        ["key", "--clearmodifiers", "Return"],
    ]
