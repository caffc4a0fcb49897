"""Toolsets: named groups of tools an agent can be given.

A door chooses the tools: the task door uses `core` (bash, editor, submit); the
datagen door uses Hermes's `terminal`, `file` and `web`. Toolsets come from the
built-ins here and from plugins in the `helios.toolsets` entry-point group.
"""

from helios.agents.toolsets.base import (
    Tool,
    ToolContext,
    ToolInputError,
    ToolOutcome,
    Toolset,
    ToolsetUnavailable,
)
from helios.agents.toolsets.registry import (
    available_toolsets,
    get_toolset,
    register_toolset,
    resolve_tools,
)

__all__ = [
    "Tool",
    "ToolContext",
    "ToolInputError",
    "ToolOutcome",
    "Toolset",
    "ToolsetUnavailable",
    "available_toolsets",
    "get_toolset",
    "register_toolset",
    "resolve_tools",
]
