"""A desktop inside a sandbox, for computer-use agents: the canonical action model,
the desktop's services (Xvfb, a window manager, Chromium, x11vnc) and its actions.

The names below are imported on first use, so that a module here that names no
desktop (`services`, `view_mode`, `pages`: what every trial and a batch's settings
read) does not import the desktop itself: a batch without a GUI task never does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from helios.lazy import lazy_exports

if TYPE_CHECKING:
    from helios.environments.desktop.actions import Action as Action
    from helios.environments.desktop.actions import ActionResult as ActionResult
    from helios.environments.desktop.actions import Geometry as Geometry
    from helios.environments.desktop.desktop import DISPLAY as DISPLAY
    from helios.environments.desktop.desktop import Desktop as Desktop
    from helios.environments.desktop.desktop import DesktopUnavailable as DesktopUnavailable

__getattr__, __dir__ = lazy_exports(globals())
