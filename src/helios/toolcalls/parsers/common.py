"""Shared pieces of the response parsers."""

from __future__ import annotations

import json
from typing import Any

from helios.models.base import ToolCall
from helios.toolcalls.types import new_call


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
    """Arguments as a dict, as russo's parsers make them: JSON text is parsed, and
    anything unusable (text that is not a JSON object, a value that is not a mapping)
    is `{}` (russo's `test_invalid_json_string_defaults_to_empty`). The text itself is
    kept by `parsed_call` in the call's `raw_arguments`."""
    if raw is None or raw == "":
        return {}
    if isinstance(raw, dict):
        return dict(raw)
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    if hasattr(raw, "items"):
        return dict(raw.items())
    return {}


def parsed_call(name: str, raw: Any) -> ToolCall:
    """A call as russo's parsers make it (`arguments_dict`), with the arguments' text,
    when they came as text, in `raw_arguments`: unreadable arguments are `{}` to russo's
    API and still readable for a report (`call.raw_arguments`)."""
    text = raw if isinstance(raw, str) else ""
    return new_call(name=name, arguments=arguments_dict(raw), raw_arguments=text)
