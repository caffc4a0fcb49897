"""Toolset lookup: the ones registered in-process (`register_toolset`), the
built-ins, then plugins from the `helios.toolsets` entry point (`helios.plugins`)."""

from __future__ import annotations

import functools
from collections.abc import Iterable

from helios.agents.toolsets.base import Tool, Toolset
from helios.plugins import Plugins

ENTRY_POINT_GROUP = "helios.toolsets"
_registered: dict[str, Toolset] = {}


def register_toolset(toolset: Toolset) -> None:
    """Add (or replace) a toolset by name; for plugins and tests."""
    _registered[toolset.name] = toolset


def registered_toolsets() -> tuple[Toolset, ...]:
    """The toolsets registered in this process by code (what a worker process, a
    fresh interpreter, would not have: the parent hands them over)."""
    return tuple(_registered.values())


@functools.cache
def _builtins() -> dict[str, Toolset]:
    # Built once: the toolsets are immutable (availability is checked at create()).
    from helios.agents.toolsets.builtin import builtin_toolsets

    return builtin_toolsets()


def _adopt(loaded: object) -> Toolset | None:
    """A plugin is a Toolset, or something that makes one (a class, a function)."""
    toolset = loaded() if callable(loaded) and not isinstance(loaded, Toolset) else loaded
    return toolset if isinstance(toolset, Toolset) else None


# Registered and built-in names first: scanning the installed packages' entry
# points costs milliseconds, far more than an episode should pay per start.
TOOLSETS: Plugins[Toolset] = Plugins(
    ENTRY_POINT_GROUP, "toolset", lambda: {**_builtins(), **_registered}, _adopt,
    must_be="a Toolset", field="toolsets",
)  # fmt: skip


def available_toolsets() -> list[str]:
    return TOOLSETS.names()


def get_toolset(name: str) -> Toolset:
    return TOOLSETS.get(name)


def resolve_tools(names: Iterable[str]) -> list[Tool]:
    """The tools of the named toolsets, in order, each tool once."""
    tools: dict[str, Tool] = {}
    for name in names:
        for tool in get_toolset(name).create():
            tools.setdefault(tool.name, tool)
    return list(tools.values())
