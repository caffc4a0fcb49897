"""The toolsets Helios ships. Each door picks the ones it offers.

- `core`: bash, editor, submit (the task door's tool agent).
- `terminal`, `file`, `web`: Hermes's tools (the datagen door), see `toolsets.hermes`.
"""

from __future__ import annotations

from helios.agents.toolsets.base import Toolset


def builtin_toolsets() -> dict[str, Toolset]:
    from helios.agents.tools import CORE_TOOLS
    from helios.agents.toolsets.hermes import hermes_toolsets

    toolsets = [
        Toolset("core", "bash, editor and submit: the task door's tools", CORE_TOOLS),
        *hermes_toolsets(),
    ]
    return {t.name: t for t in toolsets}
