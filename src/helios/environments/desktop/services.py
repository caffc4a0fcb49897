"""The names of the desktop's services (`Environment.start_service`): what a module
that only asks whether one runs (`pages`) needs, without the desktop itself."""

from __future__ import annotations

#: the X server, the window manager and the browser of a desktop
SERVICE_X, SERVICE_WM, SERVICE_BROWSER = "desktop-x", "desktop-wm", "desktop-browser"
#: the x11vnc view of `--watch` (`vnc.start_vnc`)
SERVICE_VNC = "desktop-vnc"
