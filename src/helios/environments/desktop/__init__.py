"""A desktop inside a sandbox, for computer-use agents: the canonical action model,
the desktop's services (Xvfb, a window manager, Chromium, x11vnc) and its actions."""

from helios.environments.desktop.actions import Action, ActionResult, Geometry
from helios.environments.desktop.desktop import DISPLAY, Desktop, DesktopUnavailable

__all__ = ["DISPLAY", "Action", "ActionResult", "Desktop", "DesktopUnavailable", "Geometry"]
