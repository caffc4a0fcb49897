"""The toolsets Helios ships. Each door picks the ones it offers.

- `core`: bash, editor, submit (the task door's tool agent).
"""

from __future__ import annotations

from helios.agents.toolsets.base import Toolset


def builtin_toolsets() -> dict[str, Toolset]:
    from helios.agents.tools import CORE_TOOLS

    toolsets = [
        Toolset("core", "bash, editor and submit: the task door's tools", CORE_TOOLS),
    ]
    return {t.name: t for t in toolsets}
