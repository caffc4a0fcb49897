"""How `--watch` and `--interactive` serve a trial's desktop, as a batch's settings
name it: without importing the desktop (`vnc`) a batch of no GUI task never uses."""

from __future__ import annotations

from typing import Literal

#: "view": watch only (`--watch`); "control": the viewer may take over (`--interactive`)
ViewMode = Literal["view", "control"]
