"""Hermes-compatible toolsets: `terminal`, `file` and `web`, with Hermes's tool names
and argument schemas, so generated data trains models for the tools Hermes users run.

Every tool runs inside the prompt's sandbox through `ctx.env`, except the web
tools, which reach the network from the host (sandboxes have none).
"""

from __future__ import annotations

from helios.agents.toolsets.base import Toolset
from helios.agents.toolsets.hermes.files import PatchTool, ReadFileTool, WriteFileTool
from helios.agents.toolsets.hermes.search import SearchFilesTool
from helios.agents.toolsets.hermes.terminal import TerminalTool
from helios.agents.toolsets.hermes.web import WebExtractTool, WebSearchTool
from helios.agents.toolsets.hermes.web_backends import web_unavailable_reason

__all__ = ["HERMES_TOOLSET_TOOLS", "all_hermes_tool_names", "hermes_toolsets"]

#: toolset name → its tools, in the order they are offered
HERMES_TOOLSET_TOOLS = {
    "terminal": ("terminal",),
    "file": ("read_file", "write_file", "patch", "search_files"),
    "web": ("web_search", "web_extract"),
}


def all_hermes_tool_names() -> list[str]:
    """Every tool the Hermes toolsets can offer (the zero-filled `tool_stats` keys)."""
    return [name for names in HERMES_TOOLSET_TOOLS.values() for name in names]


def hermes_toolsets() -> list[Toolset]:
    return [
        Toolset("terminal", "Hermes's terminal: shell commands in the sandbox", (TerminalTool,)),
        Toolset(
            "file",
            "Hermes's file tools: read_file, write_file, patch, search_files",
            (ReadFileTool, WriteFileTool, PatchTool, SearchFilesTool),
        ),
        Toolset(
            "web",
            "Hermes's web tools: web_search, web_extract (needs a search backend)",
            (WebSearchTool, WebExtractTool),
            unavailable_reason=web_unavailable_reason,
        ),
    ]
