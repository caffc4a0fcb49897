"""Shared pieces of the response parsers."""

from __future__ import annotations

import json
from typing import Any


def field(obj: Any, *keys: str, default: Any = None) -> Any:
    """The first of `keys` found on `obj`, as a dict key or an attribute."""
    for key in keys:
        if isinstance(obj, dict):
            if key in obj:
                return obj[key]
        elif hasattr(obj, key):
            return getattr(obj, key)
    return default


def arguments_dict(raw: Any) -> dict[str, Any]:
    """Arguments as a dict: JSON text is parsed; anything unusable is kept under `_raw`.

    A call whose arguments cannot be read still counts as a call (with the text
    kept for the diff), rather than silently becoming a call with no arguments.
    """
    if raw is None or raw == "":
        return {}
    if isinstance(raw, dict):
        return dict(raw)
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except ValueError:
            return {"_raw": raw}
        return parsed if isinstance(parsed, dict) else {"_raw": parsed}
    if hasattr(raw, "items"):
        return dict(raw.items())
    return {"_raw": raw}
