"""The desktops a display announced (`DesktopReady`): under `--watch` each is served
until its trial ends. The server (`display.watch`, with aiohttp) is imported by the
first desktop, so a display of a batch without a GUI task never imports it."""

from __future__ import annotations

from rich.console import Console

from helios.engine.events import DesktopReady


class ShownDesktops:
    def __init__(self) -> None:
        self._shown: set[str] = set()

    def show(self, console: Console, event: DesktopReady) -> str | None:
        """Serve the trial's desktop and print its URL (`watch.show_desktop`)."""
        from helios.display import watch

        self._shown.add(event.trial_id)
        return watch.show_desktop(console, event)

    def forget(self, trial_id: str) -> None:
        """The trial ended: its desktop, if it had one, is no longer served."""
        if trial_id in self._shown:
            from helios.display import watch

            self._shown.discard(trial_id)
            watch.forget_desktop(trial_id)
