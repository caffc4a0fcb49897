"""Key names: each provider's vocabulary ↔ the canonical one (xdotool's keysyms).

Claude writes xdotool names already ("ctrl+l", "Return"); OpenAI's computer tool
sends upper-case names (["CTRL", "L"], "ENTER", "ARROWLEFT"); Gemini's
`key_combination` sends "Control+C" or "Enter". `Action.keys` holds xdotool names,
which `Desktop.execute` runs as they are. Names not known here pass through
(xdotool knows more keysyms than any table: "KP_Enter", "XF86Back").
"""

from __future__ import annotations

from helios.environments.desktop.actions import Modifier

_MODIFIERS: dict[str, Modifier] = {
    "ctrl": "ctrl", "control": "ctrl", "ctl": "ctrl", "control_l": "ctrl", "control_r": "ctrl",
    "alt": "alt", "option": "alt", "opt": "alt", "alt_l": "alt", "alt_r": "alt",
    "shift": "shift", "shift_l": "shift", "shift_r": "shift",
    "super": "super", "meta": "super", "cmd": "super", "command": "super", "win": "super",
    "windows": "super", "super_l": "super", "super_r": "super",
}  # fmt: skip

_NAMES = {
    "enter": "Return", "return": "Return", "esc": "Escape", "escape": "Escape",
    "backspace": "BackSpace", "tab": "Tab", "space": "space", " ": "space",
    "delete": "Delete", "del": "Delete", "insert": "Insert", "ins": "Insert",
    "up": "Up", "arrowup": "Up", "down": "Down", "arrowdown": "Down",
    "left": "Left", "arrowleft": "Left", "right": "Right", "arrowright": "Right",
    "home": "Home", "end": "End", "pageup": "Page_Up", "page_up": "Page_Up", "pgup": "Page_Up",
    "pagedown": "Page_Down", "page_down": "Page_Down", "pgdn": "Page_Down",
    "capslock": "Caps_Lock", "caps_lock": "Caps_Lock", "printscreen": "Print", "print": "Print",
    "-": "minus", "+": "plus", "=": "equal", ",": "comma", ".": "period", "/": "slash",
    "\\": "backslash", ";": "semicolon", "'": "apostrophe", "`": "grave",
    "[": "bracketleft", "]": "bracketright",
}  # fmt: skip
# every name above, in any case ("PLUS", "page_down")
_NAMES.update({name.lower(): name for name in list(_NAMES.values())})


def modifier(name: str) -> Modifier | None:
    """The canonical modifier a name stands for, or None."""
    return _MODIFIERS.get(name.strip().lower())


def canonical(name: str) -> str:
    """One key in xdotool's name."""
    text = name if name == " " else name.strip()
    lowered = text.lower()
    held = _MODIFIERS.get(lowered)
    if held is not None:
        return held
    if lowered in _NAMES:
        return _NAMES[lowered]
    if len(lowered) >= 2 and lowered[0] == "f" and lowered[1:].isdigit():
        return "F" + lowered[1:]
    if len(text) == 1:
        return lowered  # the key, not the character: "A" is the a key
    return text


def combination(keys: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Keys pressed together, in xdotool names; ValueError for none, or a non-string."""
    if (
        not isinstance(keys, list | tuple)
        or not keys
        or not all(isinstance(k, str) and k for k in keys)
    ):
        raise ValueError(f"keys must be a non-empty list of key names, not {keys!r}")
    return tuple(canonical(k) for k in keys)


def split(text: str) -> tuple[str, ...]:
    """A combination written with "+" ("ctrl+shift+t", "Control+C", "ctrl++")."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"a key combination must be a non-empty string, not {text!r}")
    pieces = text.strip().split("+")
    keys = [p if p else "+" for p in pieces]
    # "ctrl++" splits to ["ctrl", "", ""]: one plus key, not two
    while len(keys) >= 2 and keys[-1] == "+" and keys[-2] == "+":
        keys.pop()
    return combination(keys)


def modifiers_of(text: object) -> tuple[Modifier, ...]:
    """The modifiers held during a click or scroll, from a "+" combination ("ctrl+shift");
    ValueError for a key that is not a modifier."""
    if text is None or text == "":
        return ()
    if isinstance(text, list):
        names = text
    elif isinstance(text, str):
        names = text.split("+")
    else:
        raise ValueError(f"modifiers must be a string or a list, not {text!r}")
    held: list[Modifier] = []
    for name in names:
        found = modifier(str(name))
        if found is None:
            raise ValueError(f"{name!r} is not a modifier key (shift, ctrl, alt, super)")
        if found not in held:
            held.append(found)
    return tuple(held)


# ----- the providers' vocabularies, for writing keys in them (the test model server) -------

_OPENAI = {"ctrl": "CTRL", "alt": "ALT", "shift": "SHIFT", "super": "META", "Return": "ENTER",
           "Escape": "ESC", "BackSpace": "BACKSPACE", "Tab": "TAB", "space": "SPACE",
           "Delete": "DELETE", "Up": "ARROWUP", "Down": "ARROWDOWN", "Left": "ARROWLEFT",
           "Right": "ARROWRIGHT", "Home": "HOME", "End": "END", "Page_Up": "PAGEUP",
           "Page_Down": "PAGEDOWN"}  # fmt: skip
_GEMINI = {"ctrl": "Control", "alt": "Alt", "shift": "Shift", "super": "Meta",
           "Return": "Enter", "Escape": "Escape", "BackSpace": "Backspace", "Tab": "Tab",
           "space": "Space", "Delete": "Delete", "Up": "ArrowUp", "Down": "ArrowDown",
           "Left": "ArrowLeft", "Right": "ArrowRight", "Home": "Home", "End": "End",
           "Page_Up": "PageUp", "Page_Down": "PageDown"}  # fmt: skip


def to_openai(keys: tuple[str, ...]) -> list[str]:
    return [_OPENAI.get(k, k.upper() if len(k) == 1 else k) for k in keys]


def to_gemini(keys: tuple[str, ...]) -> str:
    return "+".join(_GEMINI.get(k, k) for k in keys)


def to_anthropic(keys: tuple[str, ...]) -> str:
    return "+".join(keys)
