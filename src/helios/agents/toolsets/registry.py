"""Toolset lookup: built-ins plus plugins from the `helios.toolsets` entry point."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from importlib.metadata import entry_points

from helios.agents.toolsets.base import Tool, Toolset
from helios.errors import ConfigError

ENTRY_POINT_GROUP = "helios.toolsets"
_registered: dict[str, Toolset] = {}


def register_toolset(toolset: Toolset) -> None:
    """Add (or replace) a toolset by name; for plugins and tests."""
    _registered[toolset.name] = toolset


@functools.cache
def _builtins() -> dict[str, Toolset]:
    # Built once: the toolsets are immutable (availability is checked at create()).
    from helios.agents.toolsets.builtin import builtin_toolsets

    return builtin_toolsets()


def _all() -> dict[str, Toolset]:
    found = dict(_builtins())
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in found:
            continue
        loaded = ep.load()
        toolset = loaded() if callable(loaded) and not isinstance(loaded, Toolset) else loaded
        if not isinstance(toolset, Toolset):
            raise ConfigError(f"plugin {ep.value} is not a Toolset", field="toolset")
        found[ep.name] = toolset
    found.update(_registered)
    return found


def available_toolsets() -> list[str]:
    return sorted(_all())


def get_toolset(name: str) -> Toolset:
    # Registered and built-in names first: scanning the installed packages' entry
    # points costs milliseconds, far more than an episode should pay per start.
    if name in _registered:
        return _registered[name]
    builtins = _builtins()
    if name in builtins:
        return builtins[name]
    toolsets = _all()
    if name not in toolsets:
        known = ", ".join(sorted(toolsets))
        raise ConfigError(f"unknown toolset {name!r} (known: {known})", field="toolsets")
    return toolsets[name]


def resolve_tools(names: Iterable[str]) -> list[Tool]:
    """The tools of the named toolsets, in order, each tool once."""
    tools: dict[str, Tool] = {}
    for name in names:
        for tool in get_toolset(name).create():
            tools.setdefault(tool.name, tool)
    return list(tools.values())
